// Kernels per process and step (engine/kernels.h) over an in-memory trace: a launch-bound
// loop of 400 `mul` and 400 `add` launches a step from one line, names from the trace, and the
// chain that names them.
#include <gtest/gtest.h>

#include "engine/kernels.h"
#include "engine/result_json.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

constexpr uint64_t kStepStack = 31;
constexpr uint64_t kMul = 0x401e45, kAdd = 0x401f10, kFill = 0x402000, kStripped = 0x403000;

class NamedSource : public Source {
 public:
  std::vector<KernelNameInfo> names;
  std::optional<KernelNaming> naming;
  std::vector<KernelNameInfo> kernel_names(const std::optional<std::string>&) override {
    return names;
  }
  std::optional<KernelNaming> kernel_naming(const std::optional<std::string>&) override {
    return naming;
  }
};

// `steps` steps: 400 mul and 400 add launches of 4 us every 5 us from tiny_step (faults2.py:8),
// one fill in every other step, 3 launches of a function without a name, then a short loss read.
void launch_bound_loop(NamedSource& s, int steps) {
  uint64_t step = 4100 * kUs;
  for (int i = 0; i < steps; ++i) {
    uint64_t t = uint64_t(i) * step;
    for (int k = 0; k < 800; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, t + uint64_t(k) * 5 * kUs, 4 * kUs, kStepStack)
          .set(Field::kFunc, k % 2 ? kAdd : kMul);
    if (i % 2)
      s.call("cudaLaunchKernel", EventKind::kLaunch, t + 4001 * kUs, 4 * kUs)
          .set(Field::kFunc, kFill);
    for (int k = 0; k < 3; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, t + 4010 * kUs + uint64_t(k) * 5 * kUs,
             4 * kUs)
          .set(Field::kFunc, kStripped);
    uint64_t r = t + 4040 * kUs;
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, r, 5 * kUs, kLossStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, r + 6 * kUs, 20 * kUs, kLossStack);
  }
  s.frames_[kLossStack] = {{true, "<module>", "/w/faults2.py", 12, "", ""}};
  s.frames_[kStepStack] = {{true, "tiny_step", "/w/faults2.py", 8, "", ""},
                           {true, "<module>", "/w/faults2.py", 11, "", ""}};
  s.names = {{"", 1, kMul, "mul", "mul", "registration"},
             {"", 1, kAdd, "add", "add", "registration"},
             {"", 1, kFill, "void fill<float>(float*, int)", "_Z4fillIfEvPT_i", "elf_symbol"}};
  s.naming = KernelNaming{3, uint64_t(steps) * 3, 1, 0, 0, 0};
}

TEST(Kernels, PerStepCountsNamesAndTheLaunchingLine) {
  NamedSource s;
  launch_bound_loop(s, 30);
  auto a = analyze(s, Window{});
  ASSERT_EQ(a.steps.processes.size(), 1u);
  const StepSeries& st = a.steps.processes[0];
  ASSERT_GE(st.summary.steps, 20u) << st.cadence_note;
  ASSERT_TRUE(a.kernels.named);
  const ProcessKernels* k = a.kernels.find(1);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->launches, 30u * 803 + 15);
  EXPECT_EQ(k->unnamed_launches, 90u);
  EXPECT_EQ(k->unnamed_functions, 1u);
  EXPECT_EQ(k->folded_launches, 0u);
  ASSERT_EQ(k->kernels.size(), 4u);
  EXPECT_EQ(k->kernels[0].label(), "add");  // 12,000 each: ties by name
  EXPECT_EQ(k->kernels[1].label(), "mul");
  EXPECT_EQ(k->kernels[2].label(), "function 0x403000");
  EXPECT_EQ(k->kernels[3].label(), "fill<float>");
  EXPECT_EQ(k->kernels[3].full_name, "void fill<float>(float*, int)");
  EXPECT_EQ(k->kernels[3].source, "elf_symbol");
  EXPECT_EQ(k->kernels[1].launches, 12000u);
  EXPECT_EQ(k->kernels[1].per_step_median, 400u);
  EXPECT_EQ(k->kernels[1].per_step_max, 400u);
  EXPECT_EQ(k->kernels[1].steps_with, st.summary.steps);
  EXPECT_EQ(k->kernels[1].where, "tiny_step (faults2.py:8)");
  EXPECT_EQ(k->kernels[3].per_step_max, 1u);
  EXPECT_EQ(kernels_per_step_text(*k),
            "400 \u00d7 `add` and 400 \u00d7 `mul` per step from tiny_step (faults2.py:8)");
  // Each step lists its kernels.
  ASSERT_EQ(k->per_step.size(), st.steps.size());
  size_t with_fill = 0;
  for (size_t i = 0; i < st.steps.size(); ++i) {
    if (st.steps[i].warmup) continue;
    const auto& ks = k->per_step[i];
    ASSERT_GE(ks.size(), 3u) << i;
    EXPECT_EQ(std::vector(ks.begin(), ks.begin() + 3),
              (std::vector<std::pair<uint32_t, uint32_t>>{{0, 400}, {1, 400}, {2, 3}}))
        << i;
    if (ks.size() == 4) {
      EXPECT_EQ(ks[3], (std::pair<uint32_t, uint32_t>{3, 1})) << i;
      ++with_fill;
    }
  }
  EXPECT_EQ(with_fill, k->kernels[3].steps_with);
  // The launch-bound chain names them and the line.
  const Chain* lb = nullptr;
  for (const auto& c : a.chains)
    if (c.rule == "launch_bound") lb = &c;
  ASSERT_NE(lb, nullptr);
  EXPECT_NE(lb->summary.find(": 400 \u00d7 `add` and 400 \u00d7 `mul` per step from tiny_step "
                             "(faults2.py:8)"),
            std::string::npos)
      << lb->summary;
  EXPECT_NE(lb->explanation.find("90 of its 24,105 launches have no kernel name"),
            std::string::npos)
      << lb->explanation;
  EXPECT_EQ(unnamed_kernels_line(a.kernels),
            "90 launches (of 1 function) have no kernel name: their kernels were registered "
            "before the trace began and the file has no symbol at them (trace the program from "
            "its start, or keep its symbols)");
  auto j = report_json(a, {});
  EXPECT_EQ(j["kernels"]["unnamed_launches"], 90);
  EXPECT_EQ(j["kernels"]["processes"][0]["kernels"][1]["per_step_median"], 400);
  EXPECT_EQ(j["kernels"]["processes"][0]["kernels"][1]["where"], "tiny_step (faults2.py:8)");
}

// Why launches have no name: what the tracer counted as first launched while its kernel look-ups
// rested is said as that, not as a registration before the trace.
TEST(Kernels, UnnamedLaunchesSayWhenTheLookUpsRested) {
  KernelReport k;
  k.named = true;
  ProcessKernels p;
  p.pid = 1;
  p.unnamed_launches = 40;
  p.unnamed_functions = 3;
  k.processes.push_back(p);
  k.naming = KernelNaming{};
  const std::string before =
      "their kernels were registered before the trace began and the file has no symbol at them "
      "(trace the program from its start, or keep its symbols)";
  const std::string rest =
      "first launched while the tracer's kernel look-up probes rested, and their library did not "
      "look them up again (trace with --keep-lookup-probes)";
  EXPECT_EQ(unnamed_kernels_line(k), "40 launches (of 3 functions) have no kernel name: " + before);
  k.naming->at_rest = 1;
  EXPECT_EQ(unnamed_kernels_line(k), "40 launches (of 3 functions) have no kernel name: " + before +
                                         "; 1 of those functions was " + rest);
  k.naming->at_rest = 2;
  EXPECT_EQ(unnamed_kernels_line(k), "40 launches (of 3 functions) have no kernel name: " + before +
                                         "; 2 of those functions were " + rest);
  k.naming->at_rest = 3;
  EXPECT_EQ(unnamed_kernels_line(k),
            "40 launches (of 3 functions) have no kernel name: they were " + rest);
  // Counted over the whole trace: never more than the window's own unnamed functions.
  k.naming->at_rest = 7;
  EXPECT_EQ(unnamed_cause(k, 3), "they were " + rest);
}

TEST(Kernels, ATraceWithoutNamesReadsNothingMoreAndSaysNothing) {
  NamedSource s;
  launch_bound_loop(s, 10);
  s.names.clear();
  s.naming.reset();
  auto a = analyze(s, Window{});
  EXPECT_FALSE(a.kernels.named);
  EXPECT_TRUE(a.kernels.processes.empty());
  EXPECT_FALSE(report_json(a, {}).contains("kernels"));
  for (const auto& c : a.chains) EXPECT_EQ(c.summary.find("\u00d7"), std::string::npos);
}

TEST(Kernels, FoldedLaunchesAreCountedApart) {
  // A source whose launches come as a folded run: no function was kept.
  struct Runs : NamedSource {
    void call_runs(const Window& w, const EventFn& fn, const CallRunFn& run) override {
      calls(w, fn);
      CallRun r;
      r.pid = 1;
      r.kind = EventKind::kLaunch;
      r.calls = 500;
      run(r);
    }
  } s;
  s.call("cudaLaunchKernel", EventKind::kLaunch, 1000, 10).set(Field::kFunc, kMul);
  s.names = {{"", 1, kMul, "mul", "mul", "registration"}};
  auto k = compute_kernels(s, Window{}, StepModel{});
  ASSERT_EQ(k.processes.size(), 1u);
  EXPECT_EQ(k.processes[0].launches, 1u);
  EXPECT_EQ(k.processes[0].folded_launches, 500u);
  EXPECT_EQ(k.processes[0].kernels[0].per_step_median, 0u);  // no steps
  EXPECT_EQ(kernels_per_step_text(k.processes[0]), "");
}

// A source whose launches also come as folded runs.
struct Folded : NamedSource {
  std::vector<CallRun> runs;
  void call_runs(const Window& w, const EventFn& fn, const CallRunFn& run) override {
    calls(w, fn);
    for (const auto& r : runs) run(r);
  }
};

constexpr uint64_t kFoldedStep = 4100 * kUs;

// 20 steps of alternating mul and add launches, 400 of each, the first `folded` of them as
// tiered retention leaves them: 28 of each kept as rows, 744 folded into one run of several
// kernels (no function kept; with `counts`, how many launches of each, as runs keep them).
void folded_loop(Folded& s, int folded, bool counts = false) {
  static const std::string kCounts =
      std::to_string(kMul) + ":372,+" + std::to_string(kAdd - kMul) + ":372";
  for (int i = 0; i < 20; ++i) {
    uint64_t t = uint64_t(i) * kFoldedStep;
    int kept = i < folded ? 56 : 800;
    for (int k = 0; k < kept; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, t + uint64_t(k) * 5 * kUs, 4 * kUs, kStepStack)
          .set(Field::kFunc, k % 2 ? kAdd : kMul);
    if (i < folded) {
      CallRun r;
      r.pid = r.tid = 1;
      r.kind = EventKind::kLaunch;
      r.op = "cudaLaunchKernel";
      r.calls = 744;
      r.ts_ns = int64_t(t + 56 * 5 * kUs);
      r.span_ns = 743 * 5 * kUs + 4 * kUs;
      r.sum_ns = 744 * 4 * kUs;
      r.min_ns = r.max_ns = 4 * kUs;
      r.stack_id = kStepStack;
      if (counts) r.funcs = kCounts;
      s.runs.push_back(r);
    }
    uint64_t r = t + 4040 * kUs;
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, r, 5 * kUs, kLossStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, r + 6 * kUs, 20 * kUs, kLossStack);
  }
  s.frames_[kLossStack] = {{true, "<module>", "/w/faults2.py", 12, "", ""}};
  s.frames_[kStepStack] = {{true, "tiny_step", "/w/faults2.py", 8, "", ""}};
  s.names = {{"", 1, kMul, "mul", "mul", "registration"},
             {"", 1, kAdd, "add", "add", "registration"}};
}

// Found on `demo launch-bound` after compact: "28 × `mul` and 28 × `add` per step" where 400
// of each were made. The per-step figures are those of the steps that kept every kernel.
TEST(Kernels, StepsWithLaunchesFoldedWithoutTheirKernelAreNotCountedByKernel) {
  Folded s;
  folded_loop(s, 14);
  auto a = analyze(s, Window{});
  const StepSeries* st = a.steps.find(1);
  ASSERT_NE(st, nullptr);
  size_t steady = 0, whole = 0;
  for (const auto& x : st->steps) {
    if (x.warmup) continue;
    ++steady;
    bool folded = false;  // a run overlaps it
    for (const auto& r : s.runs)
      folded = folded || (r.ts_ns < x.end_ns && r.ts_ns + int64_t(r.span_ns) > x.start_ns);
    whole += !folded;
  }
  ASSERT_GT(whole, 3u);
  ASSERT_LT(whole, steady);
  const ProcessKernels* k = a.kernels.find(1);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->folded_launches, 14u * 744);
  EXPECT_EQ(k->steady_steps, steady);
  EXPECT_EQ(k->whole_steps, whole);
  ASSERT_EQ(k->kernels.size(), 2u);
  for (const auto& c : k->kernels) {
    EXPECT_EQ(c.per_step_median, 400u) << c.name;  // 28 before: most steady steps were folded
    EXPECT_EQ(c.steps_with, whole) << c.name;
    EXPECT_EQ(c.steady_launches, 400 * whole) << c.name;
  }
  EXPECT_EQ(kernels_per_step_text(*k),
            "400 \u00d7 `add` and 400 \u00d7 `mul` per step from tiny_step (faults2.py:8)");
  EXPECT_EQ(report_json(a, {})["kernels"]["processes"][0]["whole_steps"], whole);
  // One wording for explain, get_kernels and the report's page (which shows the model's text).
  std::string which = "the " + std::to_string(whole) + " of " + std::to_string(steady) +
                      " steady steps that kept every kernel";
  EXPECT_EQ(whole_steps_text(*k), which);
  EXPECT_EQ(report_json(a, {})["kernels"]["processes"][0]["whole_steps_text"], which);
  // Each step says whether its kernels count short.
  std::vector<size_t> all(st->steps.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  auto steps = kernel_steps_json(*k, *st, all);
  size_t partial = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    bool folded = false;
    for (const auto& r : s.runs)
      folded = folded || (r.ts_ns <= st->steps[i].end_ns &&
                          r.ts_ns + int64_t(r.span_ns) >= st->steps[i].start_ns);
    EXPECT_EQ(steps[i].value("kernels_partial", false), folded) << i;
    partial += folded;
  }
  // The 14 folded iterations fall in 13 steps: the first one's launches come before the first
  // sync, which begins the first step.
  EXPECT_EQ(partial, 13u);
}

TEST(Kernels, WithEveryStepFoldedNoKernelIsCountedPerStep) {
  Folded s;
  folded_loop(s, 20);
  auto a = analyze(s, Window{});
  const ProcessKernels* k = a.kernels.find(1);
  ASSERT_NE(k, nullptr);
  EXPECT_GT(k->steady_steps, 3u);
  EXPECT_EQ(k->whole_steps, 0u);
  for (const auto& c : k->kernels) EXPECT_EQ(c.per_step_median, 0u) << c.name;
  EXPECT_EQ(kernels_per_step_text(*k), "");
  EXPECT_EQ(whole_steps_text(*k), "not known: every steady step has folded launches");
  const Chain* lb = nullptr;
  for (const auto& c : a.chains)
    if (c.rule == "launch_bound") lb = &c;
  ASSERT_NE(lb, nullptr);
  EXPECT_EQ(lb->summary.find("\u00d7"), std::string::npos) << lb->summary;
  EXPECT_NE(lb->summary.find("launches 800 kernels per"), std::string::npos) << lb->summary;
}

// Runs of several kernels keep how many launches of each (store/call_block.h): a run that lies
// in one step counts them in it, so the steps with folded launches count whole.
TEST(Kernels, RunsOfSeveralKernelsCountEachKernelInTheStepTheyLieIn) {
  Folded s;
  folded_loop(s, 14, true);
  auto a = analyze(s, Window{});
  const ProcessKernels* k = a.kernels.find(1);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->folded_launches, 0u);
  EXPECT_EQ(k->launches, 20u * 800);
  EXPECT_GT(k->steady_steps, 10u);
  EXPECT_EQ(k->whole_steps, k->steady_steps);
  EXPECT_EQ(whole_steps_text(*k), "");
  ASSERT_EQ(k->kernels.size(), 2u);
  for (const auto& c : k->kernels) {
    EXPECT_EQ(c.launches, 20u * 400) << c.name;
    EXPECT_EQ(c.per_step_median, 400u) << c.name;
    EXPECT_EQ(c.steady_launches, 400 * k->steady_steps) << c.name;
  }
  EXPECT_EQ(kernels_per_step_text(*k),
            "400 \u00d7 `add` and 400 \u00d7 `mul` per step from tiny_step (faults2.py:8)");
}

// A run of several kernels across a step's end: which of its launches fall on each side is not
// known, so the steps it overlaps leave the per-step figures to the others.
TEST(Kernels, ARunOfSeveralKernelsAcrossAStepsEndLeavesItsStepsOut) {
  Folded s;
  folded_loop(s, 14, true);
  CallRun& cut = s.runs[6];
  cut.span_ns += kFoldedStep;  // into the next iteration's step
  auto a = analyze(s, Window{});
  const StepSeries* st = a.steps.find(1);
  ASSERT_NE(st, nullptr);
  size_t overlapped = 0;
  for (const auto& x : st->steps)
    if (!x.warmup && cut.ts_ns <= x.end_ns && cut.ts_ns + int64_t(cut.span_ns) >= x.start_ns)
      ++overlapped;
  ASSERT_GE(overlapped, 2u);
  const ProcessKernels* k = a.kernels.find(1);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->folded_launches, 0u);
  EXPECT_EQ(k->whole_steps, k->steady_steps - overlapped);
  for (const auto& c : k->kernels) {
    EXPECT_EQ(c.launches, 20u * 400) << c.name;
    EXPECT_EQ(c.per_step_median, 400u) << c.name;
    EXPECT_EQ(c.steady_launches, 400 * k->whole_steps) << c.name;
  }
}

// Found on kernels_app (each kernel launched from its own line): a run keeps its first call's
// stack alone, and "41,284 of 49,900 launches" were given to one line where each made 25,000.
// A run of several kernels gives each kernel's launches to the line its own launches were seen
// at: the kept rows here.
TEST(Kernels, ARunOfSeveralKernelsGivesEachKernelsLaunchesToItsOwnLine) {
  constexpr uint64_t kAddStack = 32;
  Folded s;
  folded_loop(s, 14, true);
  s.calls_.erase(std::remove_if(s.calls_.begin(), s.calls_.end(),
                                [](const Event& e) { return e.kind == EventKind::kLaunch; }),
                 s.calls_.end());
  for (int i = 0; i < 20; ++i) {  // the kept launches again, each kernel from its own line
    uint64_t t = uint64_t(i) * kFoldedStep;
    int kept = i < 14 ? 56 : 800;
    for (int k = 0; k < kept; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, t + uint64_t(k) * 5 * kUs, 4 * kUs,
             k % 2 ? kAddStack : kStepStack)
          .set(Field::kFunc, k % 2 ? kAdd : kMul);
  }
  s.frames_[kAddStack] = {{true, "add_step", "/w/faults2.py", 9, "", ""}};
  auto a = analyze(s, Window{});
  const StepSeries* st = a.steps.find(1);
  ASSERT_NE(st, nullptr);
  const StepSummary& m = st->summary;
  ASSERT_GT(m.launches, 0u);
  ASSERT_EQ(m.launch_sites.size(), 2u);
  for (const auto& site : m.launch_sites) EXPECT_EQ(site.calls, m.launches / 2) << site.where;
  EXPECT_EQ(m.launch_sites[0].where, "add_step (faults2.py:9)");  // a tie: by name
  EXPECT_EQ(m.launch_sites[0].stack, kAddStack);
  EXPECT_EQ(m.launch_sites[1].where, "tiny_step (faults2.py:8)");
  EXPECT_EQ(m.launch_site_calls, m.launches / 2);
  const ProcessKernels* k = a.kernels.find(1);
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->kernels.size(), 2u);
  EXPECT_EQ(k->kernels[0].label(), "add");
  EXPECT_EQ(k->kernels[0].where, "add_step (faults2.py:9)");
  EXPECT_EQ(k->kernels[1].where, "tiny_step (faults2.py:8)");
  EXPECT_EQ(kernels_per_step_text(*k),
            "400 \u00d7 `add` (from add_step (faults2.py:9)) and 400 \u00d7 `mul` (from "
            "tiny_step (faults2.py:8)) per step");
  const Chain* lb = nullptr;
  for (const auto& c : a.chains)
    if (c.rule == "launch_bound") lb = &c;
  ASSERT_NE(lb, nullptr);
  EXPECT_NE(
      lb->explanation.find(format_count(m.launches / 2) + " of the " + format_count(m.launches) +
                           " launches of the steady steps come from add_step"),
      std::string::npos)
      << lb->explanation;
}

// A kernel never seen on its own keeps the run's line.
TEST(Kernels, AKernelOnlyEverSeenInRunsOfSeveralKeepsTheRunsLine) {
  Folded s;
  folded_loop(s, 20, true);  // every iteration folded: the kept rows are at the run's line
  for (auto& e : s.calls_)
    if (e.kind == EventKind::kLaunch && e.get(Field::kFunc) == kAdd) e.set(Field::kFunc, kMul);
  auto a = analyze(s, Window{});
  const ProcessKernels* k = a.kernels.find(1);
  ASSERT_NE(k, nullptr);
  for (const auto& c : k->kernels) EXPECT_EQ(c.where, "tiny_step (faults2.py:8)") << c.name;
  EXPECT_TRUE(k->site_moves.empty());
  const StepSeries* st = a.steps.find(1);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->summary.launch_site_calls, st->summary.launches);
}

// Kernel counts that do not add up to the run's calls (damage) count the run as folded.
TEST(Kernels, ARunWhoseKernelCountsDoNotAddUpCountsAsFolded) {
  const std::string mul = std::to_string(kMul), gap = std::to_string(kAdd - kMul);
  for (std::string counts :
       std::vector<std::string>{mul + ":372,+" + gap + ":371",  // 743 of 744
                                mul + ":744,",                  // a trailing comma
                                "x:744",                        // no function
                                mul + ":0,+" + gap + ":744",    // a count of 0
                                mul + ":7440",                  // more than the run's calls
                                mul + ":372," + gap + ":372",   // a distance without its +
                                mul + ":372,+0:372",            // the same function twice
                                "99999999999999999999:744"}) {  // past 64 bits
    SCOPED_TRACE(counts);
    Folded s;
    folded_loop(s, 14, true);
    for (auto& r : s.runs) r.funcs = counts;
    auto a = analyze(s, Window{});
    const ProcessKernels* k = a.kernels.find(1);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->folded_launches, 14u * 744);
    EXPECT_EQ(k->launches, 20u * 800 - 14u * 744);
  }
}

TEST(Kernels, RunsThatKeptTheirFunctionCountAsItsLaunchesStepByStep) {
  // Launches folded into a run of one kernel (as tracers fold since runs keep `func`).
  struct Runs : NamedSource {
    void call_runs(const Window& w, const EventFn& fn, const CallRunFn& run) override {
      calls(w, fn);
      CallRun r;
      r.pid = 1;
      r.kind = EventKind::kLaunch;
      r.func = kMul;
      r.calls = 500;
      r.ts_ns = 2000;
      r.span_ns = 500 * 10;
      r.sum_ns = r.min_ns = r.max_ns = 0;
      run(r);
    }
  } s;
  s.call("cudaLaunchKernel", EventKind::kLaunch, 1000, 10).set(Field::kFunc, kMul);
  s.names = {{"", 1, kMul, "mul", "mul", "registration"}};
  auto k = compute_kernels(s, Window{}, StepModel{});
  ASSERT_EQ(k.processes.size(), 1u);
  EXPECT_EQ(k.processes[0].launches, 501u);
  EXPECT_EQ(k.processes[0].folded_launches, 0u);
  ASSERT_EQ(k.processes[0].kernels.size(), 1u);
  EXPECT_EQ(k.processes[0].kernels[0].name, "mul");
  EXPECT_EQ(k.processes[0].kernels[0].launches, 501u);
}

}  // namespace
}  // namespace ingero::engine

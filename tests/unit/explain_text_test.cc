// What `explain` prints, on exact text (issue 44, "Text glitches seen in real output"): stack
// headers that count the set they name, GPU API columns sized from the data, and the tails with
// no host cause folded under the chains (every one with --all-chains and in the JSON). The
// tracer named as the tracer: explain_tracer_test.cc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "app/explain_report.h"
#include "engine/analysis.h"
#include "engine/result_json.h"
#include "store/sql_trace_source.h"
#include "store/sqlite_db.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::app {
namespace {

using engine::Chain;
using engine::ChainStack;
using engine::Severity;
using engine::StackCounts;

constexpr uint64_t kUs = 1'000, kMs = 1'000'000;

size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

// The text from the line that starts with `from` up to (without) the line that starts with `to`.
std::string section(const std::string& text, const std::string& from, const std::string& to) {
  size_t a = text.find(from);
  if (a == std::string::npos) return "";
  size_t b = text.find(to, a);
  return text.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

ChainStack stack(StackCounts k, uint64_t calls, uint64_t examined, uint64_t worst) {
  ChainStack s;
  s.counts = k;
  s.calls = calls;
  s.examined = examined;
  s.worst_ns = worst;
  s.pid = 618;
  s.tid = 643;
  s.frames = {"[Python] faults.py:35 in <module>()"};
  return s;
}

// Each set a stack's figures count is named as that set: 126 gaps over 18 steps are not "126 of
// the 18 slowest calls", and preempted time is not the worst of 29,999 calls.
TEST(ExplainText, StackHeaderNamesTheSetItCounts) {
  EXPECT_EQ(engine::stack_counts_text(stack(StackCounts::kSlowestCalls, 18, 20, 2'600 * kUs)),
            "18 of the 20 slowest calls, worst 2.6ms");
  EXPECT_EQ(engine::stack_counts_text(stack(StackCounts::kGaps, 126, 18, 11'800 * kUs)),
            "126 gaps in 18 steady steps, longest 11.8ms");
  EXPECT_EQ(engine::stack_counts_text(stack(StackCounts::kGaps, 1, 18, 0)),
            "1 gap in 18 steady steps");
  EXPECT_EQ(engine::stack_counts_text(stack(StackCounts::kPreempted, 0, 29'999, 11'800 * kMs)),
            "11.8s preempted just before this call in 29,999 steady steps");
  EXPECT_EQ(engine::stack_counts_text(stack(StackCounts::kSiteCalls, 22'499, 50'507, 0)),
            "22,499 of 50,507 calls");
  EXPECT_EQ(engine::stack_counts_text(stack(StackCounts::kSiteCalls, 412, 412, 3 * kMs)),
            "412 calls, worst 3.0ms");
  EXPECT_EQ(engine::stack_counts_text(stack(StackCounts::kNone, 0, 0, 0)), "");

  Chain c;
  c.severity = Severity::kHigh;
  c.summary = "s";
  c.root_cause = "r";
  c.stacks = {stack(StackCounts::kGaps, 126, 18, 11'800 * kUs), stack(StackCounts::kNone, 0, 0, 0)};
  std::ostringstream out;
  print_chain(out, c);
  EXPECT_EQ(out.str(),
            "\n[HIGH] s\n"
            "  Stack (126 gaps in 18 steady steps, longest 11.8ms, pid 618 tid 643):\n"
            "    [Python] faults.py:35 in <module>()\n"
            "  Stack (pid 618 tid 643):\n"
            "    [Python] faults.py:35 in <module>()\n"
            "  Root cause: r\n");
  // The JSON says which set, and gives the header as printed.
  auto j = engine::chain_json(c);
  EXPECT_EQ(j["stacks"][0]["counts"], "gaps");
  EXPECT_EQ(j["stacks"][0]["header"], "126 gaps in 18 steady steps, longest 11.8ms");
  EXPECT_EQ(j["stacks"][1]["counts"], "none");
}

// The GPU API table's columns are as wide as their data: a 7-digit error count and a long op
// name keep two spaces from their neighbours.
TEST(ExplainText, OpTableColumnsAreSizedFromTheData) {
  engine::Analysis a;
  engine::OpStats s;
  s.key.op = "cudaGraphInstantiateWithFlags";  // 29 characters
  s.key.api = "cuda_runtime";
  s.count = 12'345'678;
  s.sum_ns = s.count * 40 * kUs;
  s.p50 = 30 * kUs;
  s.p95 = 90 * kUs;
  s.p99 = 1'200 * kUs;
  s.max_ns = 6'500 * kUs;
  s.errors = 9'900'000;
  a.stats.overall.push_back(s);
  engine::OpStats small;
  small.key.op = "cuMemFree";
  small.key.api = "cuda_driver";
  small.count = 2;
  small.sum_ns = 4 * kUs;
  small.p50 = small.p95 = small.p99 = small.max_ns = 2 * kUs;
  a.stats.overall.push_back(small);
  std::ostringstream out;
  print_report(out, a, {});
  EXPECT_EQ(section(out.str(), "GPU API calls", "CAUSAL CHAINS"),
            "GPU API calls\n"
            "  op                             api                  calls      avg      p50      "
            "p95      p99      max     errors\n"
            "  cudaGraphInstantiateWithFlags  cuda_runtime    12,345,678     40us     30us     "
            "90us    1.2ms    6.5ms  9,900,000\n"
            "  cuMemFree                      cuda_driver              2      2us      2us      "
            "2us      2us      2us          0\n"
            "\n");
}

// An op none of whose calls was timed (a thread's few driver launches after its runtime ones,
// all between two timed launches) has no duration: "-" and null, not 0 ns.
TEST(ExplainText, AnOpWithNoTimedCallShowsNoDuration) {
  engine::Analysis a;
  engine::OpStats timed;
  timed.key.op = "cudaLaunchKernel";
  timed.key.api = "cuda_runtime";
  timed.count = 40;
  timed.sum_ns = 40 * 12 * kUs;
  timed.min_ns = timed.p50 = timed.p95 = timed.p99 = timed.max_ns = 12 * kUs;
  a.stats.overall.push_back(timed);
  engine::OpStats untimed;
  untimed.key.op = "cuLaunchKernel";
  untimed.key.api = "cuda_driver";
  untimed.count = 7;
  a.stats.overall.push_back(untimed);
  std::ostringstream out;
  print_report(out, a, {});
  EXPECT_EQ(section(out.str(), "GPU API calls", "CAUSAL CHAINS"),
            "GPU API calls\n"
            "  op                        api               calls      avg      p50      p95      "
            "p99      max  errors\n"
            "  cudaLaunchKernel          cuda_runtime         40     12us     12us     12us     "
            "12us     12us       0\n"
            "  cuLaunchKernel            cuda_driver           7        -        -        -        "
            "-        -       0\n"
            "  -: no call of the op was timed (launches seen at entry only: one in "
            "--launch-timing per thread is timed, among all its launches; 1 times every one)\n"
            "\n");
  auto j = engine::op_stats_json(untimed);
  for (const char* k : {"avg_ns", "min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns"})
    EXPECT_TRUE(j[k].is_null()) << k << ": " << j.dump();
  EXPECT_EQ(j["calls"], 7);
  EXPECT_EQ(engine::op_stats_json(timed)["p99_ns"], 12 * kUs);
}

// Quantiles from the sketches are said to be so, and why, without claiming runs the trace may
// not have: launches seen at entry only are enough (a HIP trace of 4 untimed launches said
// "tiered retention folded launches into runs" with no run in the file).
TEST(ExplainText, SketchQuantilesSayWhyWithoutClaimingRuns) {
  engine::Analysis a;
  engine::OpStats s;
  s.key.op = "hipLaunchKernel";
  s.key.api = "hip";
  s.count = 5;
  s.sum_ns = 5 * kUs;
  s.p50 = s.p95 = s.p99 = s.max_ns = kUs;
  a.stats.overall.push_back(s);
  a.stats.sketch_quantiles = true;
  std::ostringstream out;
  print_report(out, a, {});
  std::string table = section(out.str(), "GPU API calls", "CAUSAL CHAINS");
  EXPECT_NE(table.find("  p50/p95/p99 of the timed calls, from the per-second sketches, within "
                       "1%: the window has launches seen at entry only or folded into runs (a "
                       "trace recorded with --launch-timing 1 --keep-all gives them exact)\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("tiered retention folded"), std::string::npos) << table;
}

// A window shorter than a second gives its length, not "over 0 s".
TEST(ExplainText, ASpanUnderASecondIsGivenInItsUnit) {
  engine::Analysis a;
  a.events = 6'004;
  a.span = {1'000'000'000, 1'034'500'000};
  std::ostringstream out;
  print_report(out, a, {});
  EXPECT_NE(out.str().find("6,004 events over 34.5ms"), std::string::npos) << out.str();
  a.span = {1'000'000'000, 9'000'000'000};
  std::ostringstream out2;
  print_report(out2, a, {});
  EXPECT_NE(out2.str().find("6,004 events over 8 s"), std::string::npos) << out2.str();
}

// Launches folded into runs that kept no kernel (older files): the per-step kernel counts leave
// them out, and the line says how many (it showed "16 × apply<lambda>" for 29 a step, and five
// kernels not at all, without a word).
TEST(ExplainText, KernelsPerStepSayHowManyLaunchesWereNotCounted) {
  engine::Analysis a;
  engine::StepSeries s;
  s.pid = 42;
  s.summary.steps = 50;
  s.summary.text = "50 steady steps, median 2.0ms";
  a.steps.processes.push_back(s);
  engine::ProcessKernels k;
  k.pid = 42;
  engine::KernelCount apply;
  apply.name = "apply<lambda>";
  apply.func = 0x10;
  apply.launches = 800;
  apply.per_step_median = 16;
  k.kernels.push_back(apply);
  k.launches = 800;
  k.folded_launches = 4'450;
  a.kernels.processes.push_back(k);
  std::ostringstream out;
  print_report(out, a, {});
  EXPECT_NE(out.str().find("    kernels per step: 16 \u00d7 apply<lambda>; not counted: 4,450 of "
                           "5,250 launches, folded into runs that kept no kernel (--keep-all keeps "
                           "each kernel)\n"),
            std::string::npos)
      << out.str();
  // The per-step figures are those of the steps that kept every kernel (engine/kernels.h).
  a.kernels.processes[0].steady_steps = 50;
  a.kernels.processes[0].whole_steps = 12;
  out.str("");
  print_report(out, a, {});
  EXPECT_NE(out.str().find("each kernel); per step: the 12 of 50 steady steps that kept every "
                           "kernel\n"),
            std::string::npos)
      << out.str();
  // Runs that kept their kernels' counts but lie across a step's edge: nothing is uncounted,
  // and the per-step figures are still the whole steps'.
  a.kernels.processes[0].folded_launches = 0;
  out.str("");
  print_report(out, a, {});
  EXPECT_NE(out.str().find("    kernels per step: 16 \u00d7 apply<lambda>; per step: the 12 of 50 "
                           "steady steps that kept every kernel\n"),
            std::string::npos)
      << out.str();
  a.kernels.processes[0].folded_launches = 4'450;
  a.kernels.processes[0].whole_steps = 0;
  a.kernels.processes[0].kernels[0].per_step_median = 0;
  out.str("");
  print_report(out, a, {});
  EXPECT_NE(out.str().find("    kernels per step: not known (every steady step has folded "
                           "launches); not counted: 4,450 of"),
            std::string::npos)
      << out.str();
}

// The real starvation trace (tests/fixtures/h100/starve): one HIGH finding, then six tails the
// host does not explain.
struct Starve {
  std::unique_ptr<store::TraceReader> reader;
  std::unique_ptr<store::SqlTraceSource> source;
  engine::Analysis a;
};

Starve starve() {
  std::string db = test::temp_path("h100-starve.db");
  EXPECT_TRUE(test::unpack_fixture("h100/starve", db));
  Starve s;
  auto r = store::TraceReader::open(db);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  s.reader = std::move(*r);
  s.source = std::make_unique<store::SqlTraceSource>(*s.reader);
  s.a = engine::analyze(*s.source, engine::Window{});
  return s;
}

std::string report(const engine::Analysis& a, bool all_chains) {
  ReportOptions o;
  o.title = "starve";
  o.all_chains = all_chains;
  std::ostringstream out;
  print_report(out, a, o);
  return out.str();
}

TEST(ExplainText, TailsWithoutHostCauseFoldIntoOneLineOnTheStarveTrace) {
  auto s = starve();
  ASSERT_EQ(s.a.chains.size(), 6u);
  std::string text = report(s.a, false);
  std::string chains = section(text, "CAUSAL CHAINS", "\x01");
  // The header still counts every chain, and says how many are folded.
  EXPECT_EQ(chains.substr(0, chains.find('\n')),
            "CAUSAL CHAINS \u2014 6 (1 HIGH, 0 MEDIUM, 5 LOW; 5 folded into the last line)");
  EXPECT_EQ(count_of(chains, "\n["), 1u) << chains;  // the HIGH chain only
  // Without device data the GPU's idle share is a lower bound, in the headline as in the steps.
  EXPECT_NE(
      chains.find("\n[HIGH] Data-loader starvation: the GPU is idle \u2265 85% of each 16.0ms "
                  "step while python3 (pid 618) runs on-CPU before <module> "
                  "(faults.py:35)\n"),
      std::string::npos)
      << chains;
  EXPECT_EQ(count_of(chains, "no host-side cause in the trace"), 0u) << chains;
  // The HIGH chain's stack counts gaps over steps, not "39 of the 39 slowest calls".
  EXPECT_NE(chains.find("  Stack (39 gaps in 39 steady steps, longest 15.9ms, pid 618 tid 618):\n"
                        "    [Python] /work/steering/.gpu/faults.py:35 in <module>()\n"),
            std::string::npos)
      << chains;
  EXPECT_EQ(chains.substr(chains.rfind("\n\n") + 2),
            "5 ops have tail latency with no host-side cause: cuLaunchKernel p99 1.1ms, "
            "cudaLaunchKernel p99 1.2ms, cuLaunchKernelEx p99 2.6ms, cudaMemcpyAsync p99 1.9ms, "
            "cuMemcpyHtoDAsync p99 1.9ms (warm-up); explain --all-chains shows each\n");
}

TEST(ExplainText, AllChainsAndTheJsonShowEveryTail) {
  auto s = starve();
  std::string text = report(s.a, true);
  std::string chains = section(text, "CAUSAL CHAINS", "\x01");
  EXPECT_EQ(chains.substr(0, chains.find('\n')),
            "CAUSAL CHAINS \u2014 6 (1 HIGH, 0 MEDIUM, 5 LOW)");
  EXPECT_EQ(chains.find("tail latency with no host-side cause:"), std::string::npos);
  size_t tails = 0;
  for (const Chain& c : s.a.chains) {
    if (!engine::no_host_cause(c)) continue;
    ++tails;
    EXPECT_EQ(c.severity, Severity::kLow);
    EXPECT_NE(chains.find("\n[LOW] " + c.summary + "\n"), std::string::npos) << c.summary;
  }
  EXPECT_EQ(tails, 5u);
  EXPECT_EQ(count_of(chains, "\n[LOW] "), 5u);
  EXPECT_EQ(count_of(chains, "no host-side cause in the trace"), 5u);
  auto j = engine::report_json(s.a, {});
  ASSERT_EQ(j["chains"].size(), 6u);
  size_t json_tails = 0;
  for (const auto& c : j["chains"]) json_tails += c["rule"] == "tail_latency";
  EXPECT_EQ(json_tails, 5u);
}

// Off-CPU intervals past the cap are said to be missing, where and how many, in the text and the
// JSON: the attributions after that point are lower bounds. Nothing is said when none are.
TEST(ExplainText, OffCpuIntervalsPastTheCapAreNamed) {
  engine::Analysis a;
  engine::HostOpStat sw;
  sw.count = 1'004'000;
  sw.sum_ns = sw.count * 500;
  sw.max_ns = 900;
  a.host.ops["sched_switch"] = sw;
  std::ostringstream whole;
  print_report(whole, a, {});
  EXPECT_EQ(whole.str().find("kept until"), std::string::npos) << whole.str();
  EXPECT_FALSE(engine::report_json(a, {}).contains("offcpu_intervals_not_kept"));

  a.host.offcpu_dropped = 4'000;
  a.host.offcpu_kept_until_ns = 1'795'000'000'000'000'000;  // 2026-11-18 11:06:40 UTC
  std::ostringstream out;
  print_report(out, a, {});
  EXPECT_EQ(section(out.str(), "Host events", "CAUSAL CHAINS"),
            "Host events\n"
            "  sched_switch            1,004,000  avg 500ns, max 900ns\n"
            "  off-CPU intervals of GPU threads kept until 2026-11-18 11:06:40 UTC only (the first "
            "1,000,000): 4,000 later ones are counted among the host events but not attributed to "
            "steps, tails or contention (explain --from covers them)\n\n");
  auto j = engine::report_json(a, {});
  EXPECT_EQ(j["offcpu_intervals_not_kept"],
            nlohmann::json({{"count", 4'000}, {"kept_until_ns", 1'795'000'000'000'000'000}}));
  // The tracer's own analyses keep the modelled window's intervals first: the oldest gave way.
  a.host.offcpu_kept_until_ns = 0;
  a.host.offcpu_kept_from_ns = 1'795'000'000'000'000'000;
  std::ostringstream tracer;
  print_report(tracer, a, {});
  EXPECT_NE(
      tracer.str().find("  off-CPU intervals of GPU threads kept from 2026-11-18 11:06:40 UTC "
                        "only (the last 1,000,000): 4,000 earlier ones are counted among the "
                        "host events but not attributed to steps, tails or contention (explain "
                        "--to covers them)\n"),
      std::string::npos)
      << tracer.str();
  EXPECT_EQ(engine::report_json(a, {})["offcpu_intervals_not_kept"],
            nlohmann::json({{"count", 4'000}, {"kept_from_ns", 1'795'000'000'000'000'000}}));
  // Where the modelled part alone overflowed the cap: both ends.
  a.host.offcpu_kept_until_ns = 1'795'000'060'000'000'000;  // a minute later
  std::ostringstream both;
  print_report(both, a, {});
  EXPECT_NE(both.str().find("  off-CPU intervals of GPU threads kept from 2026-11-18 11:06:40 UTC "
                            "until 2026-11-18 11:07:40 UTC only (1,000,000): 4,000 others are "
                            "counted among the host events but not attributed to steps, tails "
                            "or contention (explain --from covers them)\n"),
            std::string::npos)
      << both.str();
}

}  // namespace
}  // namespace ingero::app

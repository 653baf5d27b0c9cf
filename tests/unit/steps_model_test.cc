// The step model on synthetic call streams, through an in-memory TraceSource: the cadence,
// nested runtime->driver calls, return codes, host-gap attribution from scheduler intervals and
// from on-CPU samples, the windows fallback.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "engine/analysis.h"
#include "engine/result_json.h"
#include "engine/steps.h"
#include "engine/steps_internal.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

TEST(StepModel, CadenceBreakdownAndGapsOfASteadyLoop) {
  Source s;
  loop(s, 50, 10 * kMs, 8 * kMs, false);
  s.offcpu(0, 10 * kUs, false, 1);  // the trace has scheduler events
  auto a = analyze(s, Window{});
  const auto& st = only(a);
  EXPECT_EQ(st.cadence, Cadence::kSync);
  EXPECT_EQ(st.anchor_site, "py:/w/train.py:43");
  EXPECT_EQ(st.steps.size(), 49u);
  EXPECT_EQ(st.summary.median_ns, 10 * kMs);
  const Step& x = st.steps[10];
  EXPECT_EQ(x.wait_ns, 10 * kUs + 100 * kUs);        // the loss copy and its sync
  EXPECT_EQ(x.enqueue_ns, 20 * kUs + 10 * 8 * kUs);  // the upload and 10 launches
  EXPECT_EQ(x.host_ns, 10 * kMs - x.wait_ns - x.enqueue_ns);
  // The GPU has no work from the sync's return until the upload; the host gap ends when the
  // upload call starts, the GPU idle when it returns.
  EXPECT_EQ(x.host_gap_ns, 10 * kMs - 312 * kUs);
  EXPECT_EQ(x.gpu_idle_ns, 10 * kMs - 312 * kUs + 20 * kUs);
  EXPECT_EQ(x.gap.on_cpu_ns, x.host_gap_ns);
  EXPECT_EQ(st.summary.gap_where, "<module> (train.py:35)");
  EXPECT_EQ(st.summary.text.rfind("median step 10.0ms: GPU idle ", 0), 0u) << st.summary.text;
}

// Over the memory cap the model stops at a point in time and says so: later calls are counted,
// and the JSON (explain --json, MCP) carries both the count and where the model stops.
TEST(StepModel, CallsOverTheCapAreCountedAndTheStopIsReported) {
  Source s;
  loop(s, 50, 10 * kMs, 8 * kMs, false);  // 13 top-level calls per step
  HostContext host = collect_host_context(s, Window{});
  // Per step: the upload, the copy and the sync are items; the 10 launches one item and their
  // list. The launches' one stack is interned once.
  using steps_detail::Call, steps_detail::Grouped, steps_detail::GroupList;
  StepModel m = compute_steps(
      s, Window{}, host, 48 + 20 * (4 * sizeof(Call) + 10 * sizeof(Grouped) + sizeof(GroupList)));
  const StepSeries& st = m.processes.at(0);
  EXPECT_EQ(st.calls_dropped, 13u * 30);
  // The 20th step's sync is the last modelled call: it returns 312 us into the step.
  EXPECT_EQ(st.last_call_ns, int64_t(19 * 10 * kMs + 8 * kMs + 312 * kUs));
  auto j = step_series_json(st, "python3");
  EXPECT_EQ(j["calls_not_modelled"], 13u * 30);
  EXPECT_EQ(j["modelled_until_ns"], st.last_call_ns);
  StepModel all = compute_steps(s, Window{}, host);
  EXPECT_EQ(all.processes.at(0).calls_dropped, 0u);
}

// A small memory cap also caps the gaps kept as records (a quarter of the bytes, ~230 bytes a
// gap): the others are counted, and every step's totals still include them.
TEST(StepModel, GapsPastAQuarterOfTheCapAreCountedNotKept) {
  Source s;
  loop(s, 50, 10 * kMs, 8 * kMs, false);  // one host gap per step
  HostContext host = collect_host_context(s, Window{});
  StepModel all = compute_steps(s, Window{}, host);
  const StepSeries& a = all.processes.at(0);
  ASSERT_GE(a.gaps.size(), 45u);
  EXPECT_EQ(a.gaps_dropped, 0u);
  // Room for the calls, exactly (the 13 calls of a step are 3 items and a group of 10
  // launches, and their one stack), and so for n gaps.
  using steps_detail::Call, steps_detail::Grouped, steps_detail::GroupList;
  size_t bytes = 48 + 50 * (4 * sizeof(Call) + 10 * sizeof(Grouped) + sizeof(GroupList));
  size_t n = bytes / 4 / sizeof(HostGap);
  ASSERT_GT(n, 5u);
  ASSERT_LT(n, a.gaps.size());
  StepModel few = compute_steps(s, Window{}, host, bytes);
  const StepSeries& f = few.processes.at(0);
  EXPECT_EQ(f.calls_dropped, 0u);
  ASSERT_EQ(f.gaps.size(), n);
  EXPECT_EQ(f.gaps_dropped, a.gaps.size() - n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(f.gaps[i].start_ns, a.gaps[i].start_ns);
  ASSERT_EQ(f.steps.size(), a.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i)
    EXPECT_EQ(f.steps[i].host_gap_ns, a.steps[i].host_gap_ns) << i;
}

// Runtime calls with their driver calls nested inside count once: the same steps and the same
// breakdown as without them; nested calls are counted as nested.
TEST(StepModel, NestedDriverCallsAreFoldedIntoTheirCaller) {
  Source flat, nested;
  loop(flat, 20, 10 * kMs, 8 * kMs, false);
  loop(nested, 20, 10 * kMs, 8 * kMs, true);
  auto a = analyze(flat, Window{}), b = analyze(nested, Window{});
  const auto &x = only(a), &y = only(b);
  ASSERT_EQ(x.steps.size(), y.steps.size());
  for (size_t i = 0; i < x.steps.size(); ++i) {
    EXPECT_EQ(x.steps[i].enqueue_ns, y.steps[i].enqueue_ns);
    EXPECT_EQ(x.steps[i].launches, y.steps[i].launches);
    EXPECT_EQ(x.steps[i].host_gap_ns, y.steps[i].host_gap_ns);
  }
  for (const auto& op : y.ops)
    if (op.op == "cuLaunchKernel") {
      EXPECT_EQ(op.calls, 0u);
      EXPECT_EQ(op.nested, 200u);
    }
}

// Without a GPU every call fails: the model reads time, not return codes.
TEST(StepModel, FailedCallsGiveTheSameSteps) {
  Source ok, failed;
  loop(ok, 20, 10 * kMs, 8 * kMs, false);
  loop(failed, 20, 10 * kMs, 8 * kMs, false, 35);
  auto a = analyze(ok, Window{}), b = analyze(failed, Window{});
  EXPECT_EQ(only(a).steps.size(), only(b).steps.size());
  EXPECT_EQ(only(a).summary.median_ns, only(b).summary.median_ns);
  EXPECT_EQ(only(a).summary.host_gap, only(b).summary.host_gap);
}

// Gap time goes to what the thread did: preempted (by whom), blocked on I/O, asleep, on-CPU.
TEST(StepModel, GapsAreAttributedFromSchedulerIntervals) {
  Source s;
  loop(s, 20, 10 * kMs, 8 * kMs, false);
  for (int i = 0; i < 20; ++i) {
    uint64_t t = uint64_t(i) * 10 * kMs;          // the gap runs from t-9.688 ms to t+8.02 ms
    s.offcpu(t + 1 * kMs, 2 * kMs, true, 0, 99);  // preempted by "hog"
    s.offcpu(t + 4 * kMs, 1 * kMs, false, 2);     // uninterruptible: I/O
    s.offcpu(t + 6 * kMs, 500 * kUs, false, 1);   // interruptible: asleep
  }
  auto a = analyze(s, Window{});
  const Step& x = only(a).steps[5];
  EXPECT_EQ(x.gap.preempted_ns, 2 * kMs);
  EXPECT_EQ(x.gap.io_ns, 1 * kMs);
  EXPECT_EQ(x.gap.sleep_ns, 500 * kUs);
  EXPECT_EQ(x.gap.total(), x.host_gap_ns);
  EXPECT_EQ(x.preempted_ns, 2 * kMs);
  ASSERT_FALSE(only(a).summary.preemptors.empty());
  EXPECT_EQ(only(a).summary.preemptors[0].comm, "hog");
}

// A gap counts its own thread's intervals only: another thread of the process, switching in
// and out between them (two threads handing the GIL back and forth), leaves it as it was.
TEST(StepModel, GapsCountOnlyTheirOwnThreadsIntervals) {
  Source alone, shared;
  loop(alone, 20, 10 * kMs, 8 * kMs, false);
  loop(shared, 20, 10 * kMs, 8 * kMs, false);
  for (int i = 0; i < 20; ++i) {
    uint64_t t = uint64_t(i) * 10 * kMs;
    for (Source* s : {&alone, &shared}) {
      s->offcpu(t + 1 * kMs, 2 * kMs, true, 0, 99);
      s->offcpu(t + 4 * kMs, 1 * kMs, false, 2);
    }
    // Thread 2: asleep, preempted and in I/O around and between thread 1's intervals.
    shared.offcpu(t + 500 * kUs, 1 * kMs, false, 1, 0, 2);
    shared.offcpu(t + 3500 * kUs, 300 * kUs, true, 0, 99, 2);
    shared.offcpu(t + 5 * kMs, 2 * kMs, false, 2, 0, 2);
  }
  auto a = analyze(alone, Window{}), b = analyze(shared, Window{});
  const Step &x = only(a).steps[5], &y = only(b).steps[5];
  EXPECT_EQ(x.gap.preempted_ns, 2 * kMs);
  EXPECT_EQ(x.gap.io_ns, 1 * kMs);
  EXPECT_EQ(y.gap.preempted_ns, 2 * kMs);
  EXPECT_EQ(y.gap.io_ns, 1 * kMs);
  EXPECT_EQ(y.gap.sleep_ns, 0u);
  EXPECT_EQ(y.gap.total(), y.host_gap_ns);
}

// With on-CPU samples the gap is located where the thread ran, not by the next GPU call.
TEST(StepModel, CpuSamplesLocateTheGap) {
  Source s;
  loop(s, 20, 10 * kMs, 8 * kMs, false);
  s.offcpu(0, 10 * kUs, false, 1);
  constexpr uint64_t kGetItem = 21;
  s.frames_[kGetItem] = {{true, "SlowDS.__getitem__", "/w/faults.py", 15, "", ""},
                         {true, "<module>", "/w/faults.py", 35, "", ""}};
  for (int i = 0; i < 20; ++i)
    for (int k = 0; k < 5; ++k)
      s.samples_.push_back({int64_t(uint64_t(i) * 10 * kMs + uint64_t(k) * kMs), 1, 1, kGetItem});
  auto a = analyze(s, Window{});
  const auto& m = only(a).summary;
  EXPECT_TRUE(m.gap_where_sampled);
  EXPECT_EQ(m.gap_where, "SlowDS.__getitem__ (faults.py:15)");
  EXPECT_NE(m.text.find("host on-CPU in SlowDS.__getitem__ (faults.py:15)"), std::string::npos)
      << m.text;
  ASSERT_FALSE(a.chains.empty());
  EXPECT_EQ(a.chains[0].rule, "data_loader_starvation");
  EXPECT_NE(a.chains[0].summary.find("on-CPU in SlowDS.__getitem__ (faults.py:15)"),
            std::string::npos)
      << a.chains[0].summary;
}

// A sync per row inside each step is periodic too, but it is an inner loop: the step is the
// loss read, and the rows are a hidden sync.
TEST(StepModel, PerRowSyncIsAnInnerLoopNotTheStep) {
  Source s;
  s.offcpu(0, 10 * kUs, false, 1);
  for (int i = 0; i < 30; ++i) {
    uint64_t t = uint64_t(i) * 10 * kMs;
    row_syncs(s, t, kRowStack);
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, t + 9 * kMs, 10 * kUs, kLossStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, t + 9 * kMs + 12 * kUs, 50 * kUs, kLossStack);
  }
  s.frames_[kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
  s.frames_[kRowStack] = {{true, "mask_tokens", "/w/train.py", 21, "", ""}};
  auto a = analyze(s, Window{});
  EXPECT_EQ(only(a).anchor_site, "py:/w/train.py:43");
  EXPECT_EQ(only(a).steps.size(), 29u);
  bool hidden = false;
  for (const auto& c : a.chains)
    if (c.rule == "hidden_sync") {
      hidden = true;
      EXPECT_NE(c.summary.find("16 blocking round trips per step at mask_tokens (train.py:21)"),
                std::string::npos)
          << c.summary;
    }
  EXPECT_TRUE(hidden);
}

// A source whose reads of stacks notice when two overlap: the step model's threads, and stack
// attribution beside them, must take turns.
class TurnTakingStacks : public Source {
 public:
  std::vector<StackFrameInfo> stack(uint64_t id) override {
    enter();
    ++reads_;
    auto it = frames_.find(id);
    std::vector<StackFrameInfo> out =
        it == frames_.end() ? std::vector<StackFrameInfo>{} : it->second;
    inside_.fetch_sub(1);
    return out;
  }
  bool has_stacks() override {  // a read of the file too
    enter();
    bool any = !frames_.empty();
    inside_.fetch_sub(1);
    return any;
  }
  std::vector<InflightRow> inflight(const Window&) override {  // and so is this
    enter();
    ++inflight_reads_;
    inside_.fetch_sub(1);
    return {};
  }
  void enter() {
    if (inside_.fetch_add(1)) overlapped_ = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a slow read: room to overlap
  }
  std::atomic<int> inside_{0}, reads_{0}, inflight_reads_{0};
  std::atomic<bool> overlapped_{false};
};

// Four ranks that share stacks but meet them in different orders, and differ in step length
// and host time.
void four_ranks(TurnTakingStacks& s) {
  for (uint32_t pid = 1; pid <= 4; ++pid) {
    uint64_t step = (8 + pid) * kMs, host = (4 + pid) * kMs, base = pid * 100 * kUs;
    for (int i = 0; i < 40; ++i) {
      uint64_t t = base + uint64_t(i) * step + host;
      auto rank = [&](Event& e) -> Event& {
        e.pid = e.tid = pid;
        return e;
      };
      if (pid % 2)  // odd ranks upload first, even ranks launch first
        rank(s.call("cudaMemcpy", EventKind::kMemcpy, t, 20 * kUs, kUploadStack))
            .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
      for (int k = 0; k < 5; ++k)
        rank(s.call("cudaLaunchKernel", EventKind::kLaunch, t + 30 * kUs + uint64_t(k) * 10 * kUs,
                    8 * kUs, kRankStack + pid));
      if (!(pid % 2))
        rank(s.call("cudaMemcpy", EventKind::kMemcpy, t + 90 * kUs, 20 * kUs, kUploadStack))
            .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
      uint64_t r = t + 200 * kUs;
      rank(s.call("cudaMemcpyAsync", EventKind::kMemcpy, r, 10 * kUs, kLossStack))
          .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
      rank(s.call("cudaStreamSynchronize", EventKind::kSync, r + 12 * kUs, 100 * kUs, kLossStack));
    }
    s.frames_[kRankStack + pid] = {{true, "forward", "/w/model.py", int64_t(10 + pid), "", ""}};
  }
  s.frames_[kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
  s.frames_[kUploadStack] = {{true, "<module>", "/w/train.py", 35, "", ""}};
}

// Every step, gap and site of every process, and what was not modelled.
std::string model_json(const StepModel& m) {
  nlohmann::json j = nlohmann::json::array();
  for (const StepSeries& p : m.processes) {
    auto one = step_series_json(p, "rank");
    one["pid"] = p.pid;
    one["steps"] = nlohmann::json::array();
    for (const Step& st : p.steps) one["steps"].push_back(step_json(st));
    one["gaps"] = p.gaps.size();
    one["anchor_site"] = p.anchor_site;
    one["calls_dropped"] = p.calls_dropped;
    for (const SiteCount& c : p.sites) one["sites"].push_back({c.site, c.calls, c.steps_with});
    j.push_back(one);
  }
  return j.dump(1);
}

// Ranks are modelled on threads, each with its own call sites: the model is the one a single
// thread gives, and stack reads never overlap.
TEST(StepModel, ProcessesModelledOnThreadsGiveTheModelOfOneThread) {
  TurnTakingStacks s;
  four_ranks(s);
  HostContext host = collect_host_context(s, Window{});
  StepModel one = compute_steps(s, Window{}, host, kMinModelledBytes, {}, nullptr, 1);
  int one_reads = s.reads_;
  ASSERT_EQ(one.processes.size(), 4u);
  for (const StepSeries& p : one.processes) {
    EXPECT_EQ(p.cadence, Cadence::kSync) << p.pid;
    EXPECT_EQ(p.anchor_site, "py:/w/train.py:43") << p.pid;
    EXPECT_EQ(p.steps.size(), 39u) << p.pid;
  }
  StepModel four = compute_steps(s, Window{}, host, kMinModelledBytes, {}, nullptr, 4);
  EXPECT_EQ(model_json(four), model_json(one));
  EXPECT_EQ(s.reads_, 2 * one_reads);  // each process reads its own sites' stacks, either way
  EXPECT_FALSE(s.overlapped_);
}

// A source whose calls may be read on several threads (as a trace file's are once they are in
// memory): the step model then runs beside the rules, and stack attribution beside it.
class ConcurrentReads : public TurnTakingStacks {
 public:
  bool concurrent_call_reads(const Window&) override { return concurrent_; }
  void calls(const Window&, const EventFn& fn) override {  // sorted once, by the test
    for (const auto& e : calls_) fn(e);
  }
  bool concurrent_ = true;
};

// Held in memory, several ranks' calls are collected on threads, each reading every call and
// keeping its own processes': the model of one thread's collection. Where the threads together
// spend more than the model's budget (one collection would have stopped earlier), the calls are
// collected again on one thread: the same model, stopped at the same call.
TEST(StepModel, ProcessesCollectedOnThreadsGiveTheCollectionOfOneThread) {
  struct Counted : ConcurrentReads {
    void calls(const Window& w, const EventFn& fn) override {
      ++reads;
      ConcurrentReads::calls(w, fn);
    }
    std::atomic<int> reads{0};
  } s;
  four_ranks(s);
  std::stable_sort(s.calls_.begin(), s.calls_.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  HostContext host = collect_host_context(s, Window{});
  StepModel one = compute_steps(s, Window{}, host, kMinModelledBytes, {}, nullptr, 1);
  EXPECT_EQ(s.reads.exchange(0), 1);
  std::map<uint32_t, uint64_t> counts{{1, 280}, {2, 280}, {3, 280}, {4, 280}};
  StepModel four = compute_steps(s, Window{}, host, kMinModelledBytes, counts, nullptr, 4);
  EXPECT_EQ(s.reads.exchange(0), 4);  // a collection a thread
  EXPECT_EQ(model_json(four), model_json(one));
  // A budget of 400 items: one collection stops a third of the way in, each thread's would not.
  size_t small = 400 * 56;
  StepModel short_one = compute_steps(s, Window{}, host, small, {}, nullptr, 1);
  ASSERT_GT(short_one.processes.at(0).calls_dropped, 0u);
  s.reads = 0;
  StepModel short_four = compute_steps(s, Window{}, host, small, counts, nullptr, 4);
  EXPECT_EQ(s.reads.load(), 5);  // four, then one again
  EXPECT_EQ(model_json(short_four), model_json(short_one));
  // Read from the file (no calls held): one collection, whatever the threads.
  s.concurrent_ = false;
  s.reads = 0;
  EXPECT_EQ(model_json(compute_steps(s, Window{}, host, kMinModelledBytes, counts, nullptr, 4)),
            model_json(one));
  EXPECT_EQ(s.reads.load(), 1);
}

// The chains known before the step model is done get their stacks beside it: the same stacks
// as when they are attributed after it, and no two reads of the file at once: stacks, and the
// calls in flight that the rules read while the model runs (read beside a stack, the same
// connection hung in CI).
TEST(StepModel, StackAttributionBesideTheModelGivesTheSameStacksTakingTurns) {
  ConcurrentReads s;
  for (uint32_t pid = 1; pid <= 4; ++pid) {
    for (int i = 0; i < 60; ++i) {
      uint64_t t = uint64_t(i) * 10 * kMs + pid * 100 * kUs;
      for (int k = 0; k < 5; ++k) {
        // Every 8th step's first launch is slow: a tail for the tail-latency rule.
        uint64_t d = (k == 0 && i % 8 == 3) ? 3 * kMs : 8 * kUs;
        Event& e = s.call("cudaLaunchKernel", EventKind::kLaunch, t + uint64_t(k) * 4 * kMs / 5, d,
                          kRankStack + pid);
        e.pid = e.tid = pid;
      }
      Event& c =
          s.call("cudaStreamSynchronize", EventKind::kSync, t + 4 * kMs, 100 * kUs, kLossStack);
      c.pid = c.tid = pid;
    }
    s.frames_[kRankStack + pid] = {{true, "forward", "/w/model.py", int64_t(10 + pid), "", ""}};
  }
  s.frames_[kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
  std::stable_sort(s.calls_.begin(), s.calls_.end(),
                   [](const Event& x, const Event& y) { return x.ts_ns < y.ts_ns; });
  auto stacks_of = [](const Analysis& a) {
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    for (const Chain& c : a.chains)
      for (const ChainStack& cs : c.stacks) {
        std::vector<std::string> f = cs.frames;
        f.push_back(std::to_string(cs.calls) + " " + std::to_string(cs.worst_ns));
        out.emplace_back(c.id, f);
      }
    return out;
  };
  Analysis beside = analyze(s, Window{});
  EXPECT_FALSE(s.overlapped_);
  EXPECT_EQ(s.inflight_reads_.load(), 1);
  s.concurrent_ = false;  // the model on this thread, attribution after it
  Analysis after = analyze(s, Window{});
  auto got = stacks_of(beside);
  EXPECT_EQ(got, stacks_of(after));
  size_t tail_chains = 0;
  for (const Chain& c : beside.chains)
    if (c.rule == "tail_latency") {
      ++tail_chains;
      ASSERT_EQ(c.stacks.size(), 1u) << c.id;
      EXPECT_EQ(c.stacks[0].stack_id, kRankStack + c.pids.at(0)) << c.id;
    }
  EXPECT_EQ(tail_chains, 4u);
}

// Nothing periodic: 1 s windows, said so; no step rule runs on windows.
TEST(StepModel, NoCadenceFallsBackToWindows) {
  Source s;
  uint64_t t = 0, lcg = 12345;
  for (int i = 0; i < 60; ++i) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    t += (1ull << ((lcg >> 33) % 8)) * kMs;  // 1 to 128 ms apart, at random
    s.call("cudaLaunchKernel", EventKind::kLaunch, t, 8 * kUs);
    s.call("cudaStreamSynchronize", EventKind::kSync, t + 10 * kUs, 5 * kUs);
  }
  auto a = analyze(s, Window{});
  const auto& st = only(a);
  EXPECT_EQ(st.cadence, Cadence::kWindows);
  EXPECT_EQ(st.cadence_note.rfind("no periodic step: ", 0), 0u) << st.cadence_note;
  int64_t span = st.last_call_ns - st.first_call_ns;
  EXPECT_EQ(st.steps.size(), size_t((span + 999'999'999) / 1'000'000'000));
  EXPECT_TRUE(a.chains.empty()) << a.chains[0].summary;
}

// Found by a hostile-testing helper: one call of an ingero-go file moved to 1970 (timestamp 0)
// made the windows span 56 years: 1.7 billion bounds, bad_alloc after 2 GB (two years back:
// 45 s and 20 GB). More than kMaxEmptyWindows empty windows are one step with the window
// before them: the steps are the windows where calls are.
TEST(StepModel, WindowsAcrossAGapOfYearsAreTheWindowsWhereCallsAre) {
  constexpr uint64_t kS = 1'000'000'000;
  Source s;
  s.call("cudaLaunchKernel", EventKind::kLaunch, kMs, 8 * kUs);
  uint64_t t = 2 * 365 * 86400 * kS, lcg = 12345, first_late = 0;  // two years on
  for (int i = 0; i < 60; ++i) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    t += (1ull << ((lcg >> 33) % 8)) * kMs;
    if (!first_late) first_late = t;
    s.call("cudaLaunchKernel", EventKind::kLaunch, t, 8 * kUs);
    s.call("cudaStreamSynchronize", EventKind::kSync, t + 10 * kUs, 5 * kUs);
  }
  auto a = analyze(s, Window{});
  const auto& st = only(a);
  ASSERT_EQ(st.cadence, Cadence::kWindows);
  // The first window with its gap of two years, then the late calls' windows, one a second.
  const int64_t late_window = int64_t(kMs + (first_late - kMs) / kS * kS);
  size_t late_windows = size_t((st.last_call_ns - late_window + int64_t(kS) - 1) / int64_t(kS));
  EXPECT_EQ(st.steps.size(), 1 + late_windows);
  EXPECT_EQ(st.steps.front().start_ns, int64_t(kMs));
  EXPECT_EQ(st.steps.front().end_ns, late_window);
}

}  // namespace
}  // namespace ingero::engine

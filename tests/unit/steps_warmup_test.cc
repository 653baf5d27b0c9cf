// The warm-up prefix of the step model: leading steps slower than twice the median, counted
// without the time another task held the CPU. A noisy neighbour present from the start of a
// run is contention the rules must judge, not warm-up they wave through as LOW.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/analysis.h"
#include "engine/steps.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

struct Phase {
  int steps = 0;
  uint64_t length = 0;     // each step's duration
  uint64_t preempted = 0;  // of it, runnable while "hog" (pid 99) held the CPU
};

// A loop whose steps (bounded by the loss read's sync) follow `phases`: each step's host work,
// then an upload, 10 launches and the loss read, as in step_source::loop. Returns the steps'
// start times.
std::vector<uint64_t> run_phases(Source& s, const std::vector<Phase>& phases) {
  constexpr uint64_t kTail = 312 * kUs;  // upload to the loss sync's return
  std::vector<uint64_t> starts;
  uint64_t end = 8 * kMs + kTail;  // the first loss read's return: the first step starts here
  auto iteration = [&](uint64_t t) {
    s.call("cudaMemcpy", EventKind::kMemcpy, t, 20 * kUs, kUploadStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
    for (int k = 0; k < 10; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, t + 30 * kUs + uint64_t(k) * 10 * kUs,
             8 * kUs);
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, t + 200 * kUs, 10 * kUs, kLossStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, t + 212 * kUs, 100 * kUs, kLossStack);
  };
  iteration(end - kTail);
  s.offcpu(0, 10 * kUs, false, 1);  // the trace has scheduler events
  for (const Phase& p : phases)
    for (int i = 0; i < p.steps; ++i) {
      starts.push_back(end);
      if (p.preempted) s.offcpu(end + 1 * kMs, p.preempted, true, 0, 99);
      end += p.length;
      iteration(end - kTail);
    }
  s.frames_[kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
  s.frames_[kUploadStack] = {{true, "<module>", "/w/train.py", 35, "", ""}};
  return starts;
}

size_t warm(const StepSeries& st) {
  size_t n = 0;
  for (const Step& x : st.steps) n += x.warmup;
  return n;
}

// The first 15 steps take 22 ms instead of 10: 12 ms of each, a neighbour held the CPU. Judged
// by duration alone they were warm-up (22 > 2 x 10), and the contention with them. (Still a
// cadence: 75% of the steps are regular, and they hold 58% of the time.)
TEST(StepWarmup, StepsSlowedByANeighbourAreNotWarmUp) {
  Source s;
  auto starts = run_phases(s, {{15, 22 * kMs, 12 * kMs}, {45, 10 * kMs, 0}});
  auto a = analyze(s, Window{});
  const StepSeries& st = only(a);
  ASSERT_EQ(st.cadence, Cadence::kSync);
  ASSERT_EQ(st.steps.size(), 60u);
  EXPECT_EQ(uint64_t(st.steps.front().start_ns), starts.front());
  EXPECT_EQ(st.steps[0].preempted_ns, 12 * kMs);
  EXPECT_EQ(warm(st), 0u);
  EXPECT_EQ(st.summary.warmup_steps, 0u);
  EXPECT_EQ(uint64_t(st.warmup_end_ns), starts.front());
  // The neighbour is in the steady steps: 180 ms of 780 preempted.
  ASSERT_FALSE(st.summary.preemptors.empty());
  EXPECT_EQ(st.summary.preemptors[0].comm, "hog");
  EXPECT_NEAR(st.summary.preempted, 180.0 / 780.0, 1e-9);
  // And the rules judge it: the step-level contention chain names the neighbour.
  const Chain* contention = nullptr;
  for (const Chain& c : a.chains)
    if (c.id == "cpu_contention:steps:1") contention = &c;
  ASSERT_NE(contention, nullptr);
  EXPECT_EQ(contention->severity, Severity::kMedium);
  EXPECT_NE(contention->summary.find("preempted 23% of the step time, mostly by hog (pid 99)"),
            std::string::npos)
      << contention->summary;
}

// Slow on their own (autotuning, lazy init): the first 3 steps are warm-up, with or without a
// neighbour taking part of them, as long as what is left is still over twice the median.
TEST(StepWarmup, StepsSlowOnTheirOwnAreWarmUpWhateverElseTookTheCpu) {
  for (uint64_t preempted : {uint64_t(0), 12 * kMs}) {
    Source s;
    auto starts = run_phases(s, {{3, 40 * kMs, preempted}, {50, 10 * kMs, 0}});
    auto a = analyze(s, Window{});
    const StepSeries& st = only(a);
    ASSERT_EQ(st.steps.size(), 53u);
    EXPECT_EQ(warm(st), 3u) << preempted;
    EXPECT_TRUE(st.steps[2].warmup && !st.steps[3].warmup) << preempted;
    EXPECT_EQ(st.summary.warmup_steps, 3u) << preempted;
    EXPECT_EQ(uint64_t(st.warmup_end_ns), starts[3]) << preempted;
    EXPECT_EQ(st.summary.median_ns, 10 * kMs);
  }
}

// A fault is a fault in any phase. A caching allocator makes its slow cudaMallocs while the
// model loads; an out-of-memory at step 90 was judged by that op's slowest calls, all in the
// warm-up: "(warm-up)", LOW. Its slow calls as a latency finding are warm-up, as before.
TEST(StepWarmup, AFaultLateInTheRunIsNeverCalledWarmUp) {
  Source s;
  auto starts = run_phases(s, {{5, 40 * kMs, 0}, {100, 10 * kMs, 0}});
  for (int i = 0; i < 10; ++i)  // the allocator's first, slow allocations: in the warm-up
    s.call("cudaMalloc", EventKind::kAlloc, starts[0] + uint64_t(i) * 15 * kMs + kMs, 5 * kMs);
  for (int i = 10; i < 100; ++i)
    for (int k = 0; k < 2; ++k)
      s.call("cudaMalloc", EventKind::kAlloc, starts[size_t(i)] + uint64_t(k + 1) * kMs, 40 * kUs);
  for (int k = 0; k < 2; ++k) {
    Event& e =
        s.call("cudaMalloc", EventKind::kAlloc, starts[90] + 5 * kMs + uint64_t(k) * kMs, 30 * kUs);
    e.ret = 2;  // cudaErrorMemoryAllocation
    e.set(Field::kErrClass, uint64_t(hal::ErrorClass::kOutOfMemory));
  }
  auto a = analyze(s, Window{});
  ASSERT_EQ(warm(only(a)), 4u);  // the first of the five is the loop's start
  const Chain* oom = nullptr;
  for (const Chain& c : a.chains)
    if (c.rule == "gpu_oom") oom = &c;
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->severity, Severity::kHigh);
  EXPECT_FALSE(oom->warmup);
  EXPECT_EQ(oom->summary.find("warm-up"), std::string::npos) << oom->summary;
}

}  // namespace
}  // namespace ingero::engine

// How the step model splits the host's time outside GPU calls: on CPU where any thread making
// GPU calls ran, asleep (or preempted, or in I/O) where all of them were off their CPUs, and
// unknown where the trace has no scheduler events. A loop that launches and then sleeps is not
// "in its own code".
#include <gtest/gtest.h>

#include "engine/analysis.h"
#include "engine/result_json.h"
#include "engine/steps.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

constexpr int kSteps = 30;
constexpr uint64_t kStep = 10 * kMs;

// Bursts of 50 launches (8 us each, 10 us apart) every 10 ms and no sync: the GPU is never
// proven idle, so the summary gives the host's split.
void bursts(Source& s) {
  for (int i = 0; i < kSteps; ++i)
    for (int k = 0; k < 50; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, uint64_t(i) * kStep + uint64_t(k) * 10 * kUs,
             8 * kUs);
}

// Thread 1 asleep for 8 ms after each burst (it ends at 498 us).
void sleeps(Source& s, uint32_t tid = 1) {
  for (int i = 0; i < kSteps; ++i)
    s.offcpu(uint64_t(i) * kStep + 1 * kMs, 8 * kMs, false, 1, 0, tid);
}

TEST(StepHostTime, ALoopThatSleepsBetweenBurstsIsAsleepNotInItsOwnCode) {
  Source s;
  bursts(s);
  sleeps(s);
  auto a = analyze(s, Window{});
  const StepSeries& st = only(a);
  ASSERT_GE(st.steps.size(), 20u);
  const Step& x = st.steps[10];
  EXPECT_EQ(x.duration(), kStep);
  EXPECT_EQ(x.enqueue_ns, 50 * 8 * kUs);
  EXPECT_EQ(x.host_ns, kStep - 50 * 8 * kUs);
  EXPECT_EQ(x.host_time.sleep_ns, 8 * kMs);
  EXPECT_EQ(x.host_time.on_cpu_ns, x.host_ns - 8 * kMs);
  EXPECT_EQ(x.host_time.total(), x.host_ns);
  EXPECT_EQ(x.host_gap_ns, 0u);  // no sync: the GPU is never proven idle
  const std::string& text = st.summary.text;
  EXPECT_NE(text.find("enqueueing 4%, in other GPU calls 0%, in its own code 16%, asleep 80%"),
            std::string::npos)
      << text;
  nlohmann::json j = step_summary_json(st.summary);
  EXPECT_NEAR(j["host_time"]["sleep"].get<double>(), 0.8, 1e-9);
  EXPECT_NEAR(j["host_time"]["on_cpu"].get<double>(), 0.16, 1e-9);
}

// A second thread making GPU calls runs while the first sleeps: the host is busy, not asleep.
TEST(StepHostTime, TheHostIsAsleepOnlyWhereEveryThreadMakingCallsIs) {
  Source s;
  bursts(s);
  sleeps(s);
  for (int i = 0; i < kSteps; ++i)  // thread 2: one launch a step, never off its CPU
    s.call("cudaLaunchKernel", EventKind::kLaunch, uint64_t(i) * kStep + 5 * kMs, 8 * kUs).tid = 2;
  auto a = analyze(s, Window{});
  ASSERT_GE(only(a).steps.size(), 20u);
  const Step& x = only(a).steps[10];
  EXPECT_EQ(x.host_time.sleep_ns, 0u);
  EXPECT_EQ(x.host_time.on_cpu_ns, x.host_ns);

  // Thread 2 launching right after each burst, then asleep from 3 ms to 7 ms of the step: both
  // off their CPUs for 4 ms.
  Source both;
  bursts(both);
  sleeps(both);
  for (int i = 0; i < kSteps; ++i) {
    both.call("cudaLaunchKernel", EventKind::kLaunch, uint64_t(i) * kStep + 600 * kUs, 8 * kUs)
        .tid = 2;
    both.offcpu(uint64_t(i) * kStep + 3 * kMs, 4 * kMs, false, 1, 0, 2);
  }
  auto b = analyze(both, Window{});
  ASSERT_GE(only(b).steps.size(), 20u);
  const Step& y = only(b).steps[10];
  EXPECT_EQ(y.host_time.sleep_ns, 4 * kMs);
  EXPECT_EQ(y.host_time.total(), y.host_ns);
}

// The calling thread preempted outside its calls: preempted time of the host (it wanted its CPU);
// here the summary's story is the preemption, which it tells first.
TEST(StepHostTime, PreemptedTimeOfTheHostIsNamed) {
  Source s;
  bursts(s);
  for (int i = 0; i < kSteps; ++i) s.offcpu(uint64_t(i) * kStep + 1 * kMs, 3 * kMs, true, 0, 99);
  auto a = analyze(s, Window{});
  ASSERT_GE(only(a).steps.size(), 20u);
  const Step& x = only(a).steps[10];
  EXPECT_EQ(x.host_time.preempted_ns, 3 * kMs);
  EXPECT_EQ(x.host_time.sleep_ns, 0u);
  EXPECT_EQ(x.host_time.on_cpu_ns, x.host_ns - 3 * kMs);
  EXPECT_NE(only(a).summary.text.find(
                "a thread feeding the GPU preempted 30% of the step, by hog (pid 99)"),
            std::string::npos)
      << only(a).summary.text;
}

// No scheduler events: whether the host ran is not known, and the summary does not guess.
TEST(StepHostTime, WithoutSchedulerEventsTheHostsTimeIsOutsideGpuCallsNotItsOwnCode) {
  Source s;
  bursts(s);
  auto a = analyze(s, Window{});
  ASSERT_GE(only(a).steps.size(), 20u);
  const Step& x = only(a).steps[10];
  EXPECT_EQ(x.host_time.unknown_ns, x.host_ns);
  const std::string& text = only(a).summary.text;
  EXPECT_NE(text.find("outside GPU calls 96% (no scheduler events: running or not unknown)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("in its own code"), std::string::npos) << text;
}

// The scheduler was traced (the kernel's aggregates counted other processes' switches) and the
// process never left its CPU: no event of its own, and its host time is on its CPU, not
// unknown. Faults.DataLoaderBusyLoopWithoutSamplesIsLocatedBeforeTheUpload found no chain once
// in CI where its SCHED_FIFO busy loop made no context switch at all.
TEST(StepHostTime, AProcessThatNeverSwitchedOnATracedSchedulerRanThroughout) {
  Source s;
  bursts(s);
  ProcessActivity other;
  other.pid = 15;
  other.comm = "rcu_preempt";
  other.switches = 24;
  s.activity_[15] = other;
  auto a = analyze(s, Window{});
  ASSERT_GE(only(a).steps.size(), 20u);
  const Step& x = only(a).steps[10];
  EXPECT_EQ(x.host_time.on_cpu_ns, x.host_ns);
  EXPECT_EQ(x.host_time.unknown_ns, 0u);
  const std::string& text = only(a).summary.text;
  EXPECT_NE(text.find("in its own code 96%"), std::string::npos) << text;
  // Aggregates without a switch (a legacy file's page counts) say nothing of the scheduler.
  s.activity_[15].switches = 0;
  a = analyze(s, Window{});
  EXPECT_EQ(only(a).steps[10].host_time.unknown_ns, only(a).steps[10].host_ns);
}

// A process that only waits for fabric events (ibv_get_async_event) makes no GPU call: it has
// no GPU to be idle, and no steps.
TEST(StepHostTime, AProcessWithoutGpuCallsHasNoSteps) {
  Source s;
  for (int i = 0; i < 100; ++i)
    s.call("ibv_get_async_event", EventKind::kRdmaAsyncEvent, uint64_t(i) * kStep, 5 * kMs, 0,
           "rdma");
  auto a = analyze(s, Window{});
  ASSERT_EQ(a.steps.processes.size(), 1u);
  const StepSeries& st = only(a);
  EXPECT_TRUE(st.steps.empty());
  EXPECT_EQ(st.cadence, Cadence::kNone);
  EXPECT_EQ(st.summary.text, "") << st.summary.text;
  EXPECT_EQ(st.cadence_note, "no GPU calls: fabric events only");
}

}  // namespace
}  // namespace ingero::engine

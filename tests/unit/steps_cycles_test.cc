// Steps in cycles of round trips (engine/steps.cc, cycle_periodicity): a loop whose intervals
// are no cadence one by one, but are in a cycle of k.
#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "app/explain_report.h"
#include "engine/analysis.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

// `steps` iterations, the i-th of host(i) ns of host work, then an upload, 10 launches and a
// loss read (D2H copy + sync), as step_source::loop makes them.
void loop_of(Source& s, int steps, const std::function<uint64_t(int)>& host) {
  uint64_t t = 0;
  for (int i = 0; i < steps; ++i) {
    uint64_t u = t + host(i);
    s.call("cudaMemcpy", EventKind::kMemcpy, u, 20 * kUs, kUploadStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
    for (int k = 0; k < 10; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, u + 30 * kUs + uint64_t(k) * 10 * kUs,
             8 * kUs);
    uint64_t r = u + 200 * kUs;
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, r, 10 * kUs, kLossStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, r + 12 * kUs, 100 * kUs, kLossStack);
    t = r + 112 * kUs;
  }
  s.frames_[kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
  s.frames_[kUploadStack] = {{true, "<module>", "/w/train.py", 35, "", ""}};
  s.offcpu(0, 10 * kUs, false, 1);  // the trace has scheduler events
}

const Chain* rule(const Analysis& a, const std::string& name) {
  for (const auto& c : a.chains)
    if (c.rule == name) return &c;
  return nullptr;
}

// Found by a hostile-testing helper: every 4th batch waited 20 ms for data, the others 5 ms:
// 75% of the intervals regular by count, 43% by time, so no cadence, no step and no finding,
// though the stall took more than half the time. A cycle of 4 round trips is one step.
TEST(StepModel, ALoopWhoseEveryFourthBatchStallsStepsInCyclesOfFour) {
  Source s;
  loop_of(s, 200, [](int i) { return i % 4 == 3 ? 20 * kMs : 5 * kMs; });
  auto a = analyze(s, Window{});
  const StepSeries& st = only(a);
  ASSERT_EQ(st.cadence, Cadence::kSync) << st.cadence_note;
  EXPECT_EQ(st.cycle, 4u);
  EXPECT_EQ(st.cadence_note.rfind("one step per 4 blocking round trips (cudaMemcpyAsync "
                                  "at <module> (train.py:43), thread 1): their times repeat in a "
                                  "cycle of 4, not one by one (200 round trips)",
                                  0),
            0u)
      << st.cadence_note;
  EXPECT_EQ(st.summary.median_ns, 35 * kMs + 4 * 312 * kUs);
  const Chain* c = rule(a, "data_loader_starvation");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
}

// Gradient accumulation: 10 and 30 ms in turn, half the intervals each: one cycle of 2.
TEST(StepModel, AlternatingStepLengthsAreOneCycle) {
  Source s;
  loop_of(s, 120, [](int i) { return i % 2 ? 30 * kMs : 10 * kMs; });
  auto a = analyze(s, Window{});
  const StepSeries& st = only(a);
  ASSERT_EQ(st.cadence, Cadence::kSync) << st.cadence_note;
  EXPECT_EQ(st.cycle, 2u);
  EXPECT_EQ(st.summary.median_ns, 40 * kMs + 2 * 312 * kUs);
}

// A stall at random (one batch in four, on average) is no cycle: its cycles' lengths vary by
// how many stalls each holds. And a steady loop stays a cycle of one.
TEST(StepModel, AStallAtRandomIsNoCycleASteadyLoopACycleOfOne) {
  Source s;
  uint64_t lcg = 12345;
  loop_of(s, 200, [&](int) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (lcg >> 33) % 4 == 0 ? 20 * kMs : 5 * kMs;
  });
  auto a = analyze(s, Window{});
  EXPECT_NE(only(a).cadence, Cadence::kSync) << only(a).cadence_note;
  Source steady;
  loop_of(steady, 50, [](int) { return 8 * kMs; });
  auto b = analyze(steady, Window{});
  ASSERT_EQ(only(b).cadence, Cadence::kSync);
  EXPECT_EQ(only(b).cycle, 1u);
  EXPECT_EQ(only(b).cadence_note.rfind("one blocking round trip per step", 0), 0u);
}

// Found by a hostile-testing helper: 150 steps bounded by a sync, then 75 bounded by a copy
// at another line; the steps were the first loop's, and the second's 1.5 s, half the trace,
// were in no step without a word. Its calls are counted, and explain says where the steps end.
TEST(StepModel, ASecondLoopAfterTheStepsIsCountedAndSaid) {
  Source s;
  loop_of(s, 150, [](int) { return 10 * kMs; });
  uint64_t t = 0;
  for (const auto& e : s.calls_) t = std::max(t, e.ts_ns + e.dur_ns);
  for (int i = 0; i < 75; ++i) {  // the second loop: its step ends with a blocking copy
    uint64_t u = t + 20 * kMs;
    s.call("cudaMemcpy", EventKind::kMemcpy, u, 20 * kUs, kUploadStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
    for (int k = 0; k < 10; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, u + 30 * kUs + uint64_t(k) * 10 * kUs,
             8 * kUs);
    s.call("cudaMemcpy", EventKind::kMemcpy, u + 200 * kUs, 50 * kUs, kRowStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    t = u + 250 * kUs;
  }
  s.frames_[kRowStack] = {{true, "<module>", "/w/train.py", 60, "", ""}};
  auto a = analyze(s, Window{});
  const StepSeries& st = only(a);
  ASSERT_EQ(st.cadence, Cadence::kSync);
  EXPECT_EQ(st.anchor_site, "py:/w/train.py:43");
  EXPECT_EQ(st.calls_after_steps, 75u * 12);
  EXPECT_TRUE(st.after_steps_said());
  std::ostringstream out;
  app::print_report(out, a, {});
  EXPECT_NE(out.str().find(": its 900 later GPU calls, to "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(", are in no step (another loop, at another site; explain --from "),
            std::string::npos);
  // The steady loop's last moments are not a second phase.
  Source one;
  loop_of(one, 150, [](int) { return 10 * kMs; });
  EXPECT_FALSE(only(analyze(one, Window{})).after_steps_said());
}

}  // namespace
}  // namespace ingero::engine

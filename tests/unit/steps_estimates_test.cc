// The step model with calls seen at entry only, which read back with their op's mean duration:
// one slow timed launch lifts that mean past the time between launches, and an estimate must
// then neither swallow the thread's next calls nor keep the stream busy past the sync that
// drained it. As a data loader that starves the GPU looks: 8 ms of host work, an upload, ten
// launches 2 us apart read back 5 us long, the loss read back and a sync.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/analysis.h"
#include "engine/steps.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

constexpr int kSteps = 40;
constexpr uint64_t kStep = 10 * kMs, kHost = 8 * kMs;
constexpr uint64_t kSpacing = 2 * kUs, kEstimate = 5 * kUs;

// Step i's calls but its launches, from its upload at t.
void around_launches(Source& s, uint64_t t, uint64_t loss_at) {
  s.call("cudaMemcpy", EventKind::kMemcpy, t, 20 * kUs, kUploadStack)
      .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
  s.call("cudaMemcpyAsync", EventKind::kMemcpy, loss_at, kUs, kLossStack)
      .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
  s.call("cudaStreamSynchronize", EventKind::kSync, loss_at + kUs, 100 * kUs, kLossStack);
  s.frames_[kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
  s.frames_[kUploadStack] = {{true, "<module>", "/w/train.py", 35, "", ""}};
}

uint64_t upload_at(int i) { return uint64_t(i) * kStep + kHost; }

// The launches as rows: each untimed, at the estimate.
TEST(StepEstimates, AnUntimedCallEndsWhenItsThreadsNextCallBegins) {
  Source s;
  for (int i = 0; i < kSteps; ++i) {
    uint64_t t = upload_at(i), first = t + 30 * kUs;
    for (int k = 0; k < 10; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, first + uint64_t(k) * kSpacing, kEstimate)
          .timed = false;
    around_launches(s, t, first + 10 * kSpacing);  // the loss read 2 us after the last launch
  }
  s.offcpu(0, 10 * kUs, false, 1);
  auto a = analyze(s, Window{});
  const StepSeries& st = only(a);
  ASSERT_EQ(st.steps.size(), size_t(kSteps - 1));
  EXPECT_EQ(st.summary.launches_per_step, 10u);  // none taken for a call nested in another
  const Step& x = st.steps[10];
  EXPECT_EQ(x.launches, 10u);
  EXPECT_EQ(x.copies, 2u);
  // Each launch lasts until the next call of its thread: 2 us.
  EXPECT_EQ(x.enqueue_ns, 20 * kUs + 10 * kSpacing);
  // The sync returns 102 us after the last launch's start + 2 us; the GPU idles from there to
  // the next upload's return.
  uint64_t sync_end = 30 * kUs + 10 * kSpacing + kUs + 100 * kUs;
  EXPECT_EQ(x.host_gap_ns, kStep - sync_end);
  EXPECT_EQ(x.gpu_idle_ns, kStep - sync_end + 20 * kUs);
  EXPECT_GT(st.summary.gpu_idle, 0.98);
}

// The same launches folded into one run a step (the first timed, 1 us; the other nine seen at
// entry only): the run's real span is 20 us, the estimates add up to 46 us.
class FoldedLaunches : public Source {
 public:
  std::vector<CallRun> runs;
  void calls(const Window& w, const EventFn& fn) override {
    call_runs(w, fn, [&](const CallRun& r) { r.for_each_call(fn); });
  }
  void call_runs(const Window&, const EventFn& fn, const CallRunFn& run) override {
    std::stable_sort(calls_.begin(), calls_.end(),
                     [](const Event& x, const Event& y) { return x.ts_ns < y.ts_ns; });
    size_t r = 0;
    for (const Event& e : calls_) {
      for (; r < runs.size() && runs[r].ts_ns <= int64_t(e.ts_ns); ++r) run(runs[r]);
      fn(e);
    }
    for (; r < runs.size(); ++r) run(runs[r]);
  }
};

TEST(StepEstimates, AFoldedRunsEstimatesStayInsideTheRun) {
  FoldedLaunches s;
  for (int i = 0; i < kSteps; ++i) {
    uint64_t t = upload_at(i), first = t + 30 * kUs;
    CallRun r;
    r.ts_ns = int64_t(first);
    r.span_ns = 10 * kSpacing;
    r.calls = 10;
    r.untimed = 9;
    r.untimed_ns = kEstimate;
    r.timed_min_ns = r.timed_max_ns = kUs;
    r.sum_ns = kUs + 9 * kEstimate;
    r.min_ns = kUs;
    r.max_ns = kEstimate;
    r.pid = r.tid = 1;
    r.vendor = "nvidia";
    r.api = "cuda_runtime";
    r.op = "cudaLaunchKernel";
    r.kind = EventKind::kLaunch;
    r.stream = 0;
    s.runs.push_back(r);
    around_launches(s, t, first + 10 * kSpacing);
  }
  s.offcpu(0, 10 * kUs, false, 1);
  auto a = analyze(s, Window{});
  const StepSeries& st = only(a);
  ASSERT_EQ(st.steps.size(), size_t(kSteps - 1));
  EXPECT_EQ(st.summary.launches_per_step, 10u);
  const Step& x = st.steps[10];
  EXPECT_EQ(x.launches, 10u);
  // The sync drains the launches: the GPU idles from its return to the next upload's.
  uint64_t sync_end = 30 * kUs + 10 * kSpacing + kUs + 100 * kUs;
  EXPECT_EQ(x.host_gap_ns, kStep - sync_end);
  EXPECT_EQ(x.gpu_idle_ns, kStep - sync_end + 20 * kUs);
  EXPECT_GT(st.summary.gpu_idle, 0.98);
  // Spread, no call of a run starts after the run's end, and the run's counts stay its own.
  int64_t end = s.runs[0].ts_ns + int64_t(s.runs[0].span_ns);
  uint64_t n = 0, sum = 0;
  s.runs[0].for_each_call([&](const Event& e) {
    EXPECT_LE(int64_t(e.ts_ns), end);
    ++n;
    sum += e.dur_ns;
  });
  EXPECT_EQ(n, 10u);
  EXPECT_EQ(sum, s.runs[0].sum_ns);
  EXPECT_EQ(s.runs[0].last_start(), end);
}

}  // namespace
}  // namespace ingero::engine

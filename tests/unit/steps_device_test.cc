// The step model and the rules with device samples (NVML, amdgpu) on synthetic sources: a
// launch-bound loop measured 9% busy is a HIGH launch-bound chain naming its launch line; the
// same loop without device data says its GPU idle is a lower bound; whole-device samples,
// devices no process can be tied to, partial coverage; Xid errors as evidence and as a chain.
#include <gtest/gtest.h>

#include "engine/analysis.h"
#include "engine/device_busy.h"
#include "engine/result_json.h"
#include "serve/report/engine_json.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

constexpr uint64_t kLaunchStack = 30;
constexpr uint64_t kStep = 2'130 * kUs;  // 200 launches of 6 us every 10 us, then the loss read
constexpr int kSteps = 60;

// 200 small launches per step from one line, then a loss read: the host's launch rate sets the
// step time (it waits for the GPU ~1.5% of the step).
void launch_loop(Source& s, int steps = kSteps) {
  for (int i = 0; i < steps; ++i) {
    uint64_t t = uint64_t(i) * kStep;
    for (int k = 0; k < 200; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, t + uint64_t(k) * 10 * kUs, 6 * kUs,
             kLaunchStack);
    uint64_t r = t + 2'050 * kUs;
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, r, 10 * kUs, kLossStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, r + 12 * kUs, 20 * kUs, kLossStack);
  }
  s.frames_[kLossStack] = {{true, "<module>", "/w/loop.py", 12, "", ""}};
  s.frames_[kLaunchStack] = {
      {true, "<module>", "/w/loop.py", 9, "", ""},
      {true, "forward", "/usr/lib/python3/dist-packages/torch/x.py", 5, "", ""}};
}

// Samples every `period` (100 ms) covering `from` to `to` (ns from the trace's start) of pid
// (nullopt: the whole device) on nvml device `device`.
void samples(Source& s, std::optional<uint32_t> pid, double util, int64_t from, int64_t to,
             uint32_t device = 0, int64_t period = 100 * int64_t(kMs)) {
  for (int64_t t = from + period; t < to + period; t += period) {
    hal::DeviceSample x;
    x.ts_ns = t;
    x.period_ns = period;
    x.source = "nvml";
    x.device = device;
    x.uuid = "GPU-" + std::to_string(device);
    x.pid = pid;
    x.sm_util = util;
    s.devices_.push_back(x);
  }
}

const Chain* find_rule(const Analysis& a, const std::string& rule) {
  for (const Chain& c : a.chains)
    if (c.rule == rule) return &c;
  return nullptr;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(StepsDevice, LaunchBoundLoopMeasuredNinePercentBusyIsHighAndNamesTheLine) {
  Source s;
  launch_loop(s);
  samples(s, 1, 9, 0, kSteps * int64_t(kStep));
  auto a = analyze(s, Window{});
  const StepSummary& m = only(a).summary;
  EXPECT_TRUE(m.busy_measured);
  EXPECT_NEAR(m.gpu_busy, 0.09, 1e-9);
  EXPECT_TRUE(m.busy_per_process);
  EXPECT_EQ(m.busy_steps, m.steps);
  EXPECT_EQ(m.text.rfind("median step 2.1ms: GPU busy 9% (NVML): ", 0), 0u) << m.text;
  EXPECT_FALSE(has(m.text, "GPU idle")) << m.text;
  ASSERT_FALSE(a.chains.empty());
  const Chain& c = a.chains[0];
  EXPECT_EQ(c.rule, "launch_bound");
  EXPECT_EQ(c.severity, Severity::kHigh);
  EXPECT_TRUE(has(c.summary, "GPU busy 9% (NVML)")) << c.summary;
  EXPECT_TRUE(has(c.summary, "200 kernels per 2.1ms step")) << c.summary;
  EXPECT_TRUE(has(c.summary, "from <module> (loop.py:9)")) << c.summary;
  ASSERT_FALSE(c.stacks.empty());
  EXPECT_EQ(c.stacks[0].stack_id, kLaunchStack);
  EXPECT_EQ(c.stacks[0].calls, uint64_t(200) * m.steps);
  // The JSON every consumer reads carries the measurement, and the bound by its name.
  auto j = step_summary_json(m);
  EXPECT_NEAR(j["gpu_busy"].get<double>(), 0.09, 1e-9);
  EXPECT_EQ(j["gpu_busy_source"], "nvml");
  EXPECT_EQ(j["gpu_busy_scope"], "process");
  EXPECT_TRUE(j.contains("gpu_idle_lower_bound"));
  EXPECT_FALSE(j.contains("gpu_idle"));
  EXPECT_NEAR(step_json(only(a).steps[10])["gpu_busy"].get<double>(), 0.09, 1e-6);
}

// The report's and dashboard's GPU-busy lane: each point's measured share, time-weighted over
// a group of steps, null where no device sample covers them.
TEST(StepsDevice, TheReportLaneCarriesTheMeasuredShare) {
  StepSeries s;
  s.pid = 1;
  for (int i = 0; i < 4; ++i) {
    Step st;
    st.start_ns = i * 10;
    st.end_ns = i * 10 + (i == 1 ? 30 : 10);
    st.gpu_busy = i < 2 ? float(i == 0 ? 0.5 : 0.1) : -1;
    s.steps.push_back(st);
  }
  auto one = serve::report::step_series_json(s, "n", "trainer", 0, 100);
  EXPECT_EQ(one["points"]["gpu_busy"].dump(), "[0.5,0.1,null,null]");
  // Two steps a point: (0.5 x 10 + 0.1 x 30) / 40.
  auto two = serve::report::step_series_json(s, "n", "trainer", 0, 2);
  EXPECT_EQ(two["points"]["gpu_busy"].dump(), "[0.2,null]");
}

TEST(StepsDevice, WithoutDeviceDataTheIdleIsALowerBoundAndNeverHigh) {
  Source s;
  launch_loop(s);
  auto a = analyze(s, Window{});
  const StepSummary& m = only(a).summary;
  EXPECT_FALSE(m.busy_measured);
  EXPECT_FALSE(m.device_data);
  EXPECT_EQ(m.text.rfind("median step 2.1ms: GPU idle \u2265 ", 0), 0u) << m.text;
  EXPECT_TRUE(has(m.text, "% (no device data: lower bound): ")) << m.text;
  EXPECT_FALSE(has(m.text, "GPU idle 0%")) << m.text;
  const Chain* c = find_rule(a, "launch_bound");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->severity, Severity::kHigh);
  EXPECT_TRUE(has(c->summary, "from <module> (loop.py:9)")) << c->summary;
  for (const Chain& x : a.chains)
    for (const auto& t : x.timeline) EXPECT_FALSE(has(t.detail, "GPU idle 0%")) << t.detail;
  auto j = step_summary_json(m);
  EXPECT_TRUE(j["gpu_busy"].is_null());
  EXPECT_TRUE(step_json(only(a).steps[10])["gpu_busy"].is_null());
}

TEST(StepsDevice, WholeDeviceSamplesMeasureWhenTheProcessHasNone) {
  Source s;
  launch_loop(s);
  samples(s, std::nullopt, 40, 0, kSteps * int64_t(kStep));
  auto a = analyze(s, Window{});
  const StepSummary& m = only(a).summary;
  EXPECT_TRUE(m.busy_measured);
  EXPECT_FALSE(m.busy_per_process);
  EXPECT_TRUE(has(m.text, ": GPU busy 40% (NVML, whole device): ")) << m.text;
  // Idle 60% measured: a launch-bound step whose GPU is idle >= 50% is HIGH.
  const Chain* c = find_rule(a, "launch_bound");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
}

TEST(StepsDevice, MeasuredIdleBandsTheLaunchBoundSeverity) {
  for (auto [util, want] : {std::pair{70.0, Severity::kMedium}, std::pair{80.0, Severity::kLow}}) {
    Source s;
    launch_loop(s);
    samples(s, 1, util, 0, kSteps * int64_t(kStep));
    auto a = analyze(s, Window{});
    const Chain* c = find_rule(a, "launch_bound");
    ASSERT_NE(c, nullptr) << util;
    EXPECT_EQ(c->severity, want) << util;
  }
  // The GPU measured busy 95% is not waiting for the launches: no launch-bound chain.
  Source s;
  launch_loop(s);
  samples(s, 1, 95, 0, kSteps * int64_t(kStep));
  auto a = analyze(s, Window{});
  EXPECT_EQ(find_rule(a, "launch_bound"), nullptr);
}

TEST(StepsDevice, SeveralDevicesAndNoSampleOfTheProcessMeasureNothing) {
  Source s;
  launch_loop(s);
  samples(s, std::nullopt, 40, 0, kSteps * int64_t(kStep), 0);
  samples(s, std::nullopt, 60, 0, kSteps * int64_t(kStep), 1);
  auto a = analyze(s, Window{});
  const StepSummary& m = only(a).summary;
  EXPECT_FALSE(m.busy_measured);
  EXPECT_TRUE(has(m.text, "GPU idle \u2265 ")) << m.text;
  EXPECT_TRUE(has(m.text, "(2 devices sampled, none known to be pid 1's: lower bound)")) << m.text;
}

TEST(StepsDevice, SamplesCoveringAThirdOfTheStepsLeaveTheBound) {
  Source s;
  launch_loop(s);
  samples(s, 1, 9, 0, kSteps * int64_t(kStep) / 3, 0, int64_t(kMs));
  auto a = analyze(s, Window{});
  const StepSummary& m = only(a).summary;
  EXPECT_FALSE(m.busy_measured);
  EXPECT_GT(m.busy_steps, 0u);
  EXPECT_LT(m.busy_steps, m.steps / 2);
  EXPECT_TRUE(has(m.text, "(device data covers " + std::to_string(m.busy_steps) + " of " +
                              std::to_string(m.steps) + " steps: lower bound)"))
      << m.text;
}

// A host-bound loop (on-CPU gaps 15% of the step: LOW by gap share) whose GPU is measured idle
// 70% is HIGH.
TEST(StepsDevice, HostBoundStepMeasuredMostlyIdleIsHigh) {
  for (bool measured : {false, true}) {
    Source s;
    // Each 10 ms step: 1.5 ms of host work, an upload, 10 launches, the loss read whose sync
    // waits 8 ms: on-CPU gaps are ~18% of the step.
    for (int i = 0; i < 50; ++i) {
      uint64_t t = uint64_t(i) * 10 * kMs + 1'500 * kUs;
      s.call("cudaMemcpy", EventKind::kMemcpy, t, 20 * kUs, kUploadStack)
          .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
      for (int k = 0; k < 10; ++k)
        s.call("cudaLaunchKernel", EventKind::kLaunch, t + 30 * kUs + uint64_t(k) * 10 * kUs,
               8 * kUs);
      s.call("cudaMemcpyAsync", EventKind::kMemcpy, t + 200 * kUs, 10 * kUs, kLossStack)
          .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
      s.call("cudaStreamSynchronize", EventKind::kSync, t + 212 * kUs, 8 * kMs, kLossStack);
    }
    s.frames_[kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
    s.frames_[kUploadStack] = {{true, "<module>", "/w/train.py", 35, "", ""}};
    s.offcpu(0, 10 * kUs, false, 1);  // the trace has scheduler events
    if (measured) samples(s, 1, 30, 0, 50 * int64_t(10 * kMs));
    auto a = analyze(s, Window{});
    const Chain* c = find_rule(a, "host_bound");
    if (!c) c = find_rule(a, "data_loader_starvation");
    ASSERT_NE(c, nullptr) << measured;
    EXPECT_EQ(c->severity, measured ? Severity::kHigh : Severity::kLow) << c->summary;
  }
}

TEST(StepsDevice, XidDuringAStallIsAHighChainAndEvidence) {
  Source s;
  launch_loop(s);
  // Step 40 stalls for 30 ms; the GPU reports Xid 79 inside it.
  for (auto& e : s.calls_)
    if (e.ts_ns >= 40 * kStep) e.ts_ns += 30 * kMs;
  samples(s, 1, 9, 0, kSteps * int64_t(kStep) + int64_t(30 * kMs));
  hal::DeviceEvent x;
  x.ts_ns = int64_t(40 * kStep + 10 * kMs);
  x.source = "nvml";
  x.device = 0;
  x.uuid = "GPU-0";
  x.kind = "xid";
  x.code = 79;
  x.detail = "Xid 79 (GPU has fallen off the bus)";
  s.device_events_.push_back(x);
  auto a = analyze(s, Window{});
  const Chain* c = find_rule(a, "device_error");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_TRUE(has(c->summary, "GPU 0 (GPU-0) reported Xid 79 (GPU has fallen off the bus)"))
      << c->summary;
  EXPECT_TRUE(has(c->summary,
                  "trainer (pid 1) stalled: its step at that time took 32.1ms, 15x "
                  "its median"))
      << c->summary;
  EXPECT_EQ(c->pids, std::vector<uint32_t>{1});
  const Chain* l = find_rule(a, "launch_bound");
  ASSERT_NE(l, nullptr);
  bool evidence = false;
  for (const auto& t : l->timeline)
    evidence |= t.layer == "DEVICE" && has(t.detail, "GPU 0 (GPU-0): Xid 79");
  EXPECT_TRUE(evidence);
}

TEST(StepsDevice, XidWithoutAStallIsLow) {
  Source s;
  launch_loop(s);
  samples(s, 1, 9, 0, kSteps * int64_t(kStep));
  hal::DeviceEvent x;
  x.ts_ns = int64_t(20 * kStep);
  x.source = "nvml";
  x.kind = "xid";
  x.code = 13;
  x.detail = "Xid 13 (Graphics Engine Exception)";
  s.device_events_.push_back(x);
  auto a = analyze(s, Window{});
  const Chain* c = find_rule(a, "device_error");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kLow);
  EXPECT_TRUE(has(c->summary, "no stall of a traced process lines up with it")) << c->summary;
  EXPECT_TRUE(has(c->fixes[0], "compute-sanitizer")) << c->fixes[0];
}

// The sampler's own process lost a third of the way in (NVML crashed in it): the samples stop
// there, so the steps are bounded, not measured (under half covered), and the chains of the
// processes on its devices say where the figures stopped, naming the source, not a GPU; no
// device_error chain.
TEST(StepsDevice, ALostSamplerIsEvidenceOfItsSourceNotAGpuError) {
  Source s;
  launch_loop(s);
  samples(s, 1, 9, 0, kSteps / 3 * int64_t(kStep), /*device=*/1, /*period=*/int64_t(kStep));
  hal::DeviceEvent x;
  x.ts_ns = int64_t(kSteps / 3 * kStep);
  x.source = "nvml";
  x.kind = "sampler_lost";
  x.code = 11;
  x.detail =
      "libnvidia-ml.so.1 crashed (SIGSEGV) during a poll: no device figures from here on (it "
      "ran in a process of its own: the trace goes on)";
  s.device_events_.push_back(x);
  auto a = analyze(s, Window{});
  EXPECT_EQ(find_rule(a, "device_error"), nullptr);
  const Chain* l = find_rule(a, "launch_bound");
  ASSERT_NE(l, nullptr);
  int evidence = 0;
  for (const auto& t : l->timeline)
    if (t.layer == "DEVICE") {
      ++evidence;
      EXPECT_EQ(t.detail.rfind("NVML: libnvidia-ml.so.1 crashed (SIGSEGV) during a poll", 0), 0u)
          << t.detail;
    }
  EXPECT_EQ(evidence, 1);
  EXPECT_TRUE(has(l->summary, "lower bound")) << l->summary;
}

TEST(StepsDevice, DeviceBusyCoversAStepByTheSamplesOverlappingIt) {
  DeviceBusy d;
  auto add = [&](std::optional<uint32_t> pid, int64_t ts, int64_t period, double util) {
    hal::DeviceSample x;
    x.ts_ns = ts;
    x.period_ns = period;
    x.source = "amdgpu";
    x.device = 1;
    x.pid = pid;
    x.sm_util = util;
    d.add(x);
  };
  add(7, 100, 100, 20);  // (0, 100]
  add(7, 200, 100, 60);  // (100, 200]
  add(std::nullopt, 400, 200, 50);
  d.done();
  auto m = d.measure(7, 50, 150);  // half at 20%, half at 60%
  ASSERT_TRUE(m);
  EXPECT_NEAR(m->busy, 0.40, 1e-9);
  EXPECT_TRUE(m->per_process);
  EXPECT_EQ(m->source, "amdgpu");
  // Covered by less than half by the process's own samples: the device's.
  m = d.measure(7, 190, 390);
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->per_process);
  EXPECT_NEAR(m->busy, 0.50, 1e-9);
  EXPECT_FALSE(d.measure(7, 500, 600));
  EXPECT_EQ(d.devices_of(7), std::vector<std::string>{"amdgpu:1"});
  EXPECT_EQ(d.devices_of(8), std::vector<std::string>{"amdgpu:1"});  // the only device
}

}  // namespace
}  // namespace ingero::engine

// The device side channel's Prometheus series: exact values from known samples, no series for an
// absent figure, per-process series only with the opt-in (bounded, retired), promtool's verdict,
// and the measured-busy step histogram beside the lower-bound one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "serve/metrics/metrics.h"
#include "tests/support/exposition.h"
#include "tests/support/sink_inputs.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::serve {
namespace {

using test::mentions;
using test::sample;

hal::DeviceSample device(int64_t ts) {
  hal::DeviceSample s;
  s.ts_ns = ts;
  s.period_ns = 100'000'000;
  s.source = "nvml";
  s.device = 0;
  s.uuid = "GPU-0";
  s.sm_util = 9;
  s.mem_util = 30;
  s.mem_used = 1 << 30;
  s.mem_total = 80ull << 30;
  s.sm_clock_mhz = 1980;
  s.power_mw = 250'500;
  s.temperature_c = 41;
  s.throttle_reasons = 0x4 | 0x40;
  s.ecc_corrected = 3;
  s.ecc_uncorrected = 0;
  return s;
}

hal::DeviceSample proc(int64_t ts, uint32_t pid, double util) {
  return test::gpu_process_sample(ts, pid, util);
}

const std::string kDev = R"(source="nvml",uuid="GPU-0")";

Metrics::ProcessLabels labels(uint32_t pid) {
  return {"trainer" + std::to_string(pid), "3f4e5d6c7b8a", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"};
}

TEST(GpuMetrics, DeviceSeriesExactAndAbsentFiguresHaveNone) {
  Metrics m(false);
  EXPECT_FALSE(mentions(m.exposition(), "ingero_gpu_utilization_ratio"));  // no device: none
  EXPECT_TRUE(m.on_device_samples({device(1'000'000'000), proc(1'000'000'000, 42, 9)}));
  hal::DeviceSample later = device(1'100'000'000);
  later.ecc_corrected = 5;
  EXPECT_TRUE(m.on_device_samples({later}));
  EXPECT_TRUE(
      m.on_device_events({{1'100'000'000, "nvml", 0, "GPU-0", "xid", 79, "Xid 79"},
                          {1'100'000'000, "nvml", 0, "GPU-0", "ecc_corrected", 2, "2 corrected"},
                          {1'200'000'000, "nvml", 0, "", "sampler_lost", 11, "crashed"}}));
  std::string t = m.exposition();
  // prometheus-cpp sorts labels by name: gpu, source, uuid.
  const std::string l = R"({gpu="0",)" + kDev;
  EXPECT_DOUBLE_EQ(sample(t, "ingero_gpu_utilization_ratio" + l + "}"), 0.09);
  EXPECT_DOUBLE_EQ(sample(t, "ingero_gpu_memory_utilization_ratio" + l + "}"), 0.30);
  EXPECT_EQ(sample(t, "ingero_gpu_memory_used_bytes" + l + "}"), double(1 << 30));
  EXPECT_EQ(sample(t, "ingero_gpu_memory_total_bytes" + l + "}"), double(80ull << 30));
  EXPECT_EQ(sample(t, "ingero_gpu_sm_clock_hertz" + l + "}"), 1.98e9);
  EXPECT_DOUBLE_EQ(sample(t, "ingero_gpu_power_watts" + l + "}"), 250.5);
  EXPECT_EQ(sample(t, "ingero_gpu_temperature_celsius" + l + "}"), 41);
  EXPECT_EQ(
      sample(t, R"(ingero_gpu_clocks_event_reason{gpu="0",reason="sw_power_cap",)" + kDev + "}"),
      1);
  EXPECT_EQ(sample(t, R"(ingero_gpu_clocks_event_reason{gpu="0",reason="hw_thermal_slowdown",)" +
                          kDev + "}"),
            1);
  EXPECT_EQ(
      sample(t, R"(ingero_gpu_clocks_event_reason{gpu="0",reason="hw_slowdown",)" + kDev + "}"), 0);
  EXPECT_EQ(
      sample(t,
             R"(ingero_gpu_ecc_errors_total{gpu="0",source="nvml",type="corrected",uuid="GPU-0"})"),
      5);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_ecc_errors_total{gpu="0",source="nvml",type="uncorrected",uuid="GPU-0"})"),
      0);
  EXPECT_EQ(
      sample(t, R"(ingero_gpu_device_events_total{code="79",gpu="0",kind="xid",)" + kDev + "}"), 1);
  // The sampler's own event names no GPU (not GPU 0).
  EXPECT_EQ(sample(t, R"(ingero_gpu_device_events_total{code="",gpu="",kind="sampler_lost",)"
                      R"(source="nvml",uuid=""})"),
            1);
  // No memory clock in the samples: no series, not a 0.
  EXPECT_FALSE(mentions(t, "ingero_gpu_memory_clock_hertz{"));
  // Per-process series only with --prometheus-per-process.
  EXPECT_FALSE(mentions(t, "ingero_gpu_process_utilization_ratio{"));
}

TEST(GpuMetrics, PerProcessSeriesAreLabelledBoundedAndRetired) {
  Metrics m(true);
  m.set_process_labels(labels);
  EXPECT_TRUE(m.on_device_samples({device(1'000'000'000), proc(1'000'000'000, 42, 9)}));
  std::string t = m.exposition();
  EXPECT_DOUBLE_EQ(
      sample(
          t,
          R"(ingero_gpu_process_utilization_ratio{comm="trainer42",container_id="3f4e5d6c7b8a",gpu="0",pid="42",pod_uid="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",)" +
              kDev + "}"),
      0.09);
  EXPECT_TRUE(mentions(t, "ingero_gpu_process_memory_used_bytes{"));
  EXPECT_FALSE(mentions(t, "ingero_gpu_process_memory_utilization_ratio{"));  // absent figure
  // 600 processes on one device: 512 get series.
  std::vector<hal::DeviceSample> many;
  for (uint32_t pid = 1000; pid < 1600; ++pid) many.push_back(proc(2'000'000'000, pid, 1));
  EXPECT_TRUE(m.on_device_samples(many));
  t = m.exposition();
  size_t n = 0;
  std::istringstream in(t);
  for (std::string line; std::getline(in, line);)
    n += line.rfind("ingero_gpu_process_utilization_ratio{", 0) == 0;
  EXPECT_EQ(n, Metrics::kMaxProcesses);
  // Two minutes without a sample: gone.
  EXPECT_TRUE(m.on_device_samples({device(2'000'000'000 + Metrics::kExitedRetentionNs)}));
  EXPECT_FALSE(mentions(m.exposition(), "ingero_gpu_process_utilization_ratio{"));
}

TEST(GpuMetrics, StepBusyHistogramHoldsOnlyMeasuredSteps) {
  Metrics m(false);
  EXPECT_TRUE(m.on_steps({{0.016, 0.0, 0.09}, {0.016, 0.05, -1}, {0.02, 0.0, 0.95}}));
  std::string t = m.exposition();
  EXPECT_EQ(sample(t, "ingero_step_gpu_busy_ratio_count"), 2);
  EXPECT_EQ(sample(t, R"(ingero_step_gpu_busy_ratio_bucket{le="0.1"})"), 1);
  EXPECT_EQ(sample(t, "ingero_step_gpu_idle_ratio_count"), 3);
}

TEST(GpuMetrics, ExpositionPassesPromtool) {
  const char* promtool = "/usr/bin/promtool";
  if (access(promtool, X_OK) != 0) {
    if (test::running_in_ci())
      FAIL() << "CI=true but promtool is missing (Debian package prometheus)";
    GTEST_SKIP() << "*** SKIPPED: promtool not installed (apt-get install prometheus) ***";
  }
  Metrics m(true);
  m.set_process_labels(labels);
  EXPECT_TRUE(m.on_device_samples({device(1'000'000'000), proc(1'000'000'000, 42, 9)}));
  EXPECT_TRUE(m.on_device_events({{1'100'000'000, "nvml", 0, "GPU-0", "xid", 79, "Xid 79"}}));
  EXPECT_TRUE(m.on_steps({{0.016, 0.0, 0.09}}));
  std::string path = test::temp_path("gpu.prom");
  std::ofstream(path) << m.exposition();
  std::string out, err;
  int rc = test::run_command({"/bin/sh", "-c", std::string(promtool) + " check metrics < " + path},
                             &out, &err);
  EXPECT_EQ(rc, 0) << out << err;
  EXPECT_EQ(out + err, "");
}

}  // namespace
}  // namespace ingero::serve

// Prometheus series and their labels: per-process mode (its bounds, its retirement, the
// families that never carry a process) and kernel names (the top kernels, "other", the label's
// form and bounds).
#include <gtest/gtest.h>

#include <string>

#include "serve/metrics/metrics.h"
#include "tests/support/exposition.h"
#include "tests/support/sink_inputs.h"

namespace ingero::serve {
namespace {

using test::call;
using test::sample;
using test::series_count;

TEST(Metrics, FiftyShortLivedProcessesDoNotGrowTheLabelSets) {
  Metrics m(false);
  for (uint32_t pid = 1000; pid < 1050; ++pid) {
    m.observe(call("nvidia", "cuda_runtime", hal::EventKind::kAlloc, "cudaMalloc", 10'000, 2, pid));
    m.observe(call("nvidia", "cuda_runtime", hal::EventKind::kSync, "cudaDeviceSynchronize", 10'000,
                   0, pid));
    hal::Event exit;
    exit.kind = hal::EventKind::kProcessExit;
    exit.pid = pid;
    m.observe(exit);
  }
  std::string t = m.exposition();
  EXPECT_EQ(series_count(t, "ingero_gpu_api_calls_total"), 2u);
  EXPECT_EQ(series_count(t, "ingero_gpu_api_call_duration_seconds_count"), 2u);
  EXPECT_EQ(series_count(t, "ingero_gpu_api_errors_total"), 1u);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_calls_total{api="cuda_runtime",kind="alloc",op="cudaMalloc",vendor="nvidia"})"),
      50);
}

// Per-process mode labels a call's counts with its process; its errors and its kernels'
// launches never: their series stay one per error and one per kernel, whatever the processes.
TEST(Metrics, PerProcessModeLeavesErrorsAndKernelsWithoutAProcess) {
  Metrics m(true);
  m.set_kernel_series(2);
  for (uint32_t pid : {100u, 200u}) {
    ASSERT_TRUE(m.on_kernel_name(
        {pid, 0x10, "void mul<float>(float*)", "mul", hal::KernelNameSource::kRegistration, 0}));
    auto failed =
        call("nvidia", "cuda_runtime", hal::EventKind::kAlloc, "cudaMalloc", 1'000, 2, pid);
    failed.set(hal::Field::kErrClass, uint64_t(hal::ErrorClass::kOther));
    m.observe(failed);
  }
  // `n` launches of the kernel by each process.
  auto launches = [&](int n) {
    for (uint32_t pid : {100u, 200u}) {
      auto e = call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 4'000, 0,
                    pid);
      e.set(hal::Field::kFunc, 0x10);
      for (int i = 0; i < n; ++i) m.observe(e);
    }
  };
  ASSERT_TRUE(m.on_tick(1'000'000'000));  // no launch yet: no series
  launches(2);                            // into `other`
  ASSERT_TRUE(m.on_tick(2'000'000'000));  // the kernel's series, from now on
  launches(1);
  std::string t = m.exposition();
  EXPECT_EQ(series_count(t, "ingero_gpu_api_errors_total"), 1u);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_errors_total{api="cuda_runtime",code="2",op="cudaMalloc",vendor="nvidia"})"),
      2);
  const std::string k = "ingero_kernel_launches_total";
  EXPECT_EQ(series_count(t, k), 3u);
  EXPECT_EQ(sample(t, k + R"({kernel="mul<float>"})"), 2);
  EXPECT_EQ(sample(t, k + R"({kernel="other"})"), 4);
  // The calls themselves are by process.
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_calls_total{api="cuda_runtime",comm="train.py",kind="launch",op="cudaLaunchKernel",pid="200",vendor="nvidia"})"),
      3);
}

TEST(Metrics, PerProcessSeriesAreCappedAndRetiredAfterExit) {
  Metrics m(true);
  const uint32_t n = Metrics::kMaxProcesses + 10;
  for (uint32_t pid = 1; pid <= n; ++pid)
    m.observe(
        call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 1'000, 0, pid));
  std::string t = m.exposition();
  // kMaxProcesses own series, and the overflow shares one.
  EXPECT_EQ(series_count(t, "ingero_gpu_api_calls_total"), Metrics::kMaxProcesses + 1);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_calls_total{api="cuda_runtime",comm="other",kind="launch",op="cudaLaunchKernel",pid="other",vendor="nvidia"})"),
      10);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_calls_total{api="cuda_runtime",comm="train.py",kind="launch",op="cudaLaunchKernel",pid="7",vendor="nvidia"})"),
      1);
  // 50 of them exit at t=1s; their series survive the retention window, then go.
  for (uint32_t pid = 1; pid <= 50; ++pid) {
    hal::Event exit;
    exit.kind = hal::EventKind::kProcessExit;
    exit.pid = pid;
    exit.ts_ns = 1'000'000'000;
    m.observe(exit);
  }
  m.retire_exited(1'000'000'000 + Metrics::kExitedRetentionNs - 1);
  EXPECT_EQ(series_count(m.exposition(), "ingero_gpu_api_calls_total"), Metrics::kMaxProcesses + 1);
  m.retire_exited(1'000'000'000 + Metrics::kExitedRetentionNs);
  t = m.exposition();
  EXPECT_EQ(series_count(t, "ingero_gpu_api_calls_total"), Metrics::kMaxProcesses + 1 - 50);
  EXPECT_EQ(t.find("pid=\"7\""), std::string::npos);
  // Freed slots go to new processes again.
  m.observe(
      call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 1'000, 0, 9999));
  EXPECT_EQ(
      sample(
          m.exposition(),
          R"(ingero_gpu_api_calls_total{api="cuda_runtime",comm="train.py",kind="launch",op="cudaLaunchKernel",pid="9999",vendor="nvidia"})"),
      1);
}

// Launches by kernel: the K most launched kernels at a refresh get a series (kept for good,
// counting from then on), the others share "other", launches of unnamed functions "unnamed";
// the family's sum is every launch, and names are summed over processes.
TEST(Metrics, KernelLaunchesKeepTheTopKernelsAndOther) {
  Metrics m(false);
  m.set_kernel_series(2);
  auto named = [&](uint32_t pid, uint64_t func, const char* name) {
    ASSERT_TRUE(m.on_kernel_name({pid, func, name, name, hal::KernelNameSource::kRegistration, 0}));
  };
  named(100, 0x10, "void mul<float>(float*, float*, int)");
  named(100, 0x20, "void add<float>(float*, float*, int)");
  named(100, 0x30, "fill(float*)");
  named(200, 0x99, "void mul<float>(float*, float*, int)");  // another process, the same kernel
  auto launch = [&](uint32_t pid, uint64_t func, int n) {
    auto e =
        call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 4'000, 0, pid);
    e.set(hal::Field::kFunc, func);
    for (int i = 0; i < n; ++i) m.observe(e);
  };
  launch(100, 0x10, 30);
  launch(200, 0x99, 10);
  launch(100, 0x20, 20);
  launch(100, 0x30, 5);
  launch(100, 0xdead, 3);  // no name
  const std::string k = "ingero_kernel_launches_total";
  std::string before = m.exposition();
  EXPECT_EQ(sample(before, k + R"({kernel="other"})"), 65);
  EXPECT_EQ(sample(before, k + R"({kernel="unnamed"})"), 3);
  EXPECT_EQ(series_count(before, k), 2u);
  ASSERT_TRUE(m.on_tick(1'000'000'000));  // the tracer's tick, once a second, gives them
  launch(100, 0x10, 1);
  launch(100, 0x20, 2);
  launch(100, 0x30, 4);
  // fill overtakes nobody: the two series stay given, and no third comes.
  launch(100, 0x30, 100);
  m.refresh_kernel_series();
  std::string after = m.exposition();
  EXPECT_EQ(series_count(after, k), 4u);
  EXPECT_EQ(sample(after, k + R"({kernel="mul<float>"})"), 1);
  EXPECT_EQ(sample(after, k + R"({kernel="add<float>"})"), 2);
  EXPECT_EQ(sample(after, k + R"({kernel="other"})"), 65 + 104);
  EXPECT_EQ(sample(after, k + R"({kernel="unnamed"})"), 3);
  // No series at all with K = 0.
  Metrics none(false);
  none.set_kernel_series(0);
  ASSERT_TRUE(none.on_kernel_name({1, 0x10, "k", "k", hal::KernelNameSource::kRegistration, 0}));
  auto e = call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 1, 0, 1);
  e.set(hal::Field::kFunc, 0x10);
  none.observe(e);
  none.refresh_kernel_series();
  EXPECT_EQ(series_count(none.exposition(), k), 2u);
  EXPECT_EQ(sample(none.exposition(), k + R"({kernel="other"})"), 1);
}

// Launches counted before a kernel is given its own series stay in `other`, collected or not in
// between.
TEST(Metrics, LaunchesBeforeAKernelsSeriesStayInOtherUncollected) {
  Metrics m(false);
  m.set_kernel_series(1);
  ASSERT_TRUE(
      m.on_kernel_name({100, 0x10, "gemm", "gemm", hal::KernelNameSource::kRegistration, 0}));
  auto e = call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 0, 0);
  e.set(hal::Field::kFunc, 0x10);
  for (int i = 0; i < 5; ++i) m.observe(e);
  m.refresh_kernel_series();
  for (int i = 0; i < 3; ++i) m.observe(e);
  std::string t = m.exposition();
  const std::string k = "ingero_kernel_launches_total";
  EXPECT_EQ(sample(t, k + R"({kernel="gemm"})"), 3);
  EXPECT_EQ(sample(t, k + R"({kernel="other"})"), 5);
}

// A label is the short name, bounded.
TEST(Metrics, KernelLabelsAreShortAndBounded) {
  Metrics m(false);
  std::string huge = "void k<" + std::string(500, 'x') + ">(int)";
  ASSERT_TRUE(m.on_kernel_name({1, 0x10, huge, huge, hal::KernelNameSource::kRegistration, 0}));
  auto e = call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 1, 0, 1);
  e.set(hal::Field::kFunc, 0x10);
  m.observe(e);
  m.refresh_kernel_series();
  m.observe(e);
  std::string label = "k<" + std::string(Metrics::kMaxKernelLabel - 5, 'x') + "...";
  EXPECT_EQ(label.size(), Metrics::kMaxKernelLabel);
  EXPECT_EQ(sample(m.exposition(), "ingero_kernel_launches_total{kernel=\"" + label + "\"}"), 1);
}
}  // namespace
}  // namespace ingero::serve

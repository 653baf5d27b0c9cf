// The failed_calls rule (engine/rules_failed_calls.cc) on synthetic traces: which calls count
// as failures, the severity, the first failure, and the launches in flight at a device fault.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "app/builtin_backends.h"
#include "app/demo_scenarios.h"
#include "backends/cuda/cuda_errors.h"
#include "step_source.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::engine {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;
using step_source::kMs;
using step_source::kUs;

// Names codes as the CUDA backend does, where `named` (a trace's reader given the backends).
class Source : public step_source::Source {
 public:
  bool named = true;
  std::vector<KernelNameInfo> kernels;
  std::optional<hal::ErrorCode> error_code(std::string_view api, int64_t ret) override {
    return named ? backends::cuda::error_code(api, ret) : std::nullopt;
  }
  std::vector<KernelNameInfo> kernel_names(const std::optional<std::string>&) override {
    return kernels;
  }
  std::set<uint32_t> tracer;
  std::set<uint32_t> tracer_pids(const std::optional<std::string>&) override { return tracer; }
  std::map<uint32_t, ProcessInfo> processes() override {
    return {{1, {1, "trainer", ""}}, {2, {2, "evaluator", ""}}, {9, {9, "ingero", ""}}};
  }
  Event& launch(uint64_t ts, uint64_t func) {
    Event& e = call("cudaLaunchKernel", EventKind::kLaunch, ts, 0);
    e.timed = false;
    e.has_ret = false;
    e.set(Field::kFunc, func);
    return e;
  }
  Event& sync(uint64_t ts, int64_t ret, uint64_t stack = 0) {
    Event& e = call("cudaStreamSynchronize", EventKind::kSync, ts, 50 * kUs, stack);
    e.ret = ret;
    return e;
  }
};

KernelNameInfo kernel(uint64_t func, std::string name) {
  KernelNameInfo k;
  k.pid = 1;
  k.func = func;
  k.name = std::move(name);
  return k;
}

const Chain* failed(const Analysis& a) {
  for (const auto& c : a.chains)
    if (c.rule == "failed_calls") return &c;
  return nullptr;
}

TEST(FailedCalls, AStickyFaultNamesItsFirstFailureAndTheLaunchesInFlight) {
  Source s;
  s.kernels = {kernel(0xa1, "void scale<float>(float*, float, int)"),
               kernel(0xa2, "gather(int const*, float*)")};
  for (int i = 0; i < 3; ++i) s.launch(uint64_t(i) * kMs, 0xa1);
  s.sync(3 * kMs, 0);
  s.launch(4 * kMs, 0xa1);
  s.launch(5 * kMs, 0xa2);
  s.launch(6 * kMs, 0xa3);  // no name
  s.sync(7 * kMs, 700, 42);
  s.frames_[42] = {{true, "step", "/w/train.py", 88, "", ""}};
  for (int i = 0; i < 4; ++i) s.sync(8 * kMs + uint64_t(i) * kMs, 700);
  s.call("cudaFree", EventKind::kFree, 20 * kMs, kUs).ret = 0;  // a free may still succeed

  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_EQ(c->op, "cudaStreamSynchronize");
  EXPECT_EQ(c->pids, std::vector<uint32_t>{1});
  EXPECT_EQ(c->window_start, int64_t(7 * kMs));
  EXPECT_EQ(c->window_end, int64_t(11 * kMs));
  EXPECT_EQ(c->summary,
            "trainer (pid 1)'s GPU context failed: cudaStreamSynchronize returned "
            "cudaErrorIllegalAddress (700), and 4 of the 5 calls that returned after it failed");
  ASSERT_EQ(c->timeline.size(), 3u);
  EXPECT_EQ(c->timeline[0].detail,
            "first failure: cudaStreamSynchronize returned cudaErrorIllegalAddress (700)");
  EXPECT_EQ(c->timeline[1].detail,
            "in flight: 3 launches since the last cudaStreamSynchronize that returned success (" +
                format_wall(int64_t(3 * kMs + 50 * kUs)) +
                "); scale<float>, gather, function 0xa3");
  EXPECT_EQ(c->timeline[2].detail, "1 of the 5 calls that returned after it succeeded");
  EXPECT_NE(c->explanation.find("cudaErrorIllegalAddress (700) from 5 calls of "
                                "cudaStreamSynchronize"),
            std::string::npos)
      << c->explanation;
  ASSERT_EQ(c->stacks.size(), 1u);
  EXPECT_EQ(c->stacks[0].counts, StackCounts::kFirstFailure);
  EXPECT_EQ(c->stacks[0].frames, std::vector<std::string>{"[Python] /w/train.py:88 in step()"});
  EXPECT_NE(c->fixes[0].find("CUDA_LAUNCH_BLOCKING=1"), std::string::npos);
}

TEST(FailedCalls, TheLastLaunchesAreNamedWhereMoreWereInFlight) {
  Source s;
  for (int i = 0; i < 20; ++i) s.launch(uint64_t(i) * kUs, 0x100 + uint64_t(i));
  s.sync(kMs, 719);
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->timeline[1].detail,
            "in flight: 20 launches since the trace began; the last 8: function 0x10c, function "
            "0x10d, function 0x10e, function 0x10f, function 0x110, function 0x111, function "
            "0x112, function 0x113");
  // The fault is the last call: nothing returned after it, and the summary says nothing of it.
  EXPECT_EQ(c->summary,
            "trainer (pid 1)'s GPU context failed: cudaStreamSynchronize returned "
            "cudaErrorLaunchFailure (719)");
}

TEST(FailedCalls, NotReadyAnswersAndOutOfMemoryAreNoFailureOfThisRule) {
  Source s;
  for (int i = 0; i < 50; ++i) {
    Event& q = s.call("cudaStreamSynchronize", EventKind::kSync, uint64_t(i) * kMs, kUs);
    q.ret = 600;  // as a query's answer: still running
    q.set(Field::kErrClass, uint64_t(hal::ErrorClass::kNotReady));
  }
  Event& m = s.call("cudaMalloc", EventKind::kAlloc, 60 * kMs, kUs);
  m.ret = 2;
  m.set(Field::kErrClass, uint64_t(hal::ErrorClass::kOutOfMemory));
  Analysis a = analyze(s, Window{});
  EXPECT_EQ(failed(a), nullptr);
  bool oom = false;
  for (const auto& c : a.chains) oom |= c.rule == "gpu_oom";
  EXPECT_TRUE(oom);
  // Nor an error in the op's statistics: "not ready" is an answer.
  for (const auto& st : a.stats.per_process)
    if (st.key.op == "cudaStreamSynchronize") {
      EXPECT_EQ(st.errors, 0u);
    }
}

// 1,000 copies that returned, some with cudaErrorInvalidValue: the share sets the severity.
Severity severity_with(int failures) {
  Source s;
  for (int i = 0; i < 1000; ++i) {
    Event& e = s.call("cudaMemcpyAsync", EventKind::kMemcpy, uint64_t(i) * kMs, 5 * kUs);
    e.ret = i < failures ? 1 : 0;
  }
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  return c ? c->severity : Severity(-1);
}

TEST(FailedCalls, TheShareOfCallsThatFailedSetsTheSeverityOfInvalidCalls) {
  EXPECT_EQ(severity_with(0), Severity(-1));
  EXPECT_EQ(severity_with(1), Severity::kLow);
  EXPECT_EQ(severity_with(49), Severity::kLow);
  EXPECT_EQ(severity_with(50), Severity::kMedium);
  EXPECT_EQ(severity_with(499), Severity::kMedium);
  EXPECT_EQ(severity_with(500), Severity::kHigh);
}

TEST(FailedCalls, WithoutNamesTheStoredClassAndTheNumberAreUsed) {
  Source s;
  s.named = false;
  for (int i = 0; i < 3; ++i) {
    Event& e = s.call("cudaMalloc", EventKind::kAlloc, uint64_t(i) * kMs, kUs);
    e.ret = 35;
    e.set(Field::kErrClass, uint64_t(hal::ErrorClass::kNoDevice));
  }
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_EQ(c->summary,
            "trainer (pid 1) could not use a GPU: 3 of 3 GPU calls failed, the first cudaMalloc "
            "returned error 35");
}

// Launches seen at entry only have no result: "3 of 3 GPU calls failed" read as all of a
// process's calls where 5 more were made (helper-76). The count says whose result was read.
TEST(FailedCalls, CallsWithoutAResultAreNotCountedAsReturned) {
  Source s;
  uint64_t t = 0;
  for (int i = 0; i < 3; ++i) s.call("cudaMalloc", EventKind::kAlloc, t += kMs, kUs).ret = 35;
  for (int i = 0; i < 5; ++i) {
    Event& e = s.call("cudaLaunchKernel", EventKind::kLaunch, t += kMs, 0);
    e.has_ret = false;
    e.timed = false;
  }
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->summary,
            "trainer (pid 1) could not use a GPU: 3 of the 3 GPU calls whose result was read "
            "failed, the first cudaMalloc returned cudaErrorInsufficientDriver (35)");
  EXPECT_NE(c->explanation.find(" 5 calls have no result to read (launches seen at entry only, "
                                "--launch-timing; calls unfinished at the end)."),
            std::string::npos)
      << c->explanation;
}

TEST(FailedCalls, NoDeviceNamesEveryCodeAndItsOps) {
  Source s;
  uint64_t t = 0;
  for (const char* op : {"cudaMalloc", "cudaMemcpy", "cudaFree", "cudaMemset", "cudaMalloc"})
    s.call(op, EventKind::kAlloc, t += kMs, kUs).ret = 35;
  s.call("cuMemAlloc", EventKind::kAlloc, t += kMs, kUs, 0, "cuda_driver").ret = 34;
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->summary,
            "trainer (pid 1) could not use a GPU: 6 of 6 GPU calls failed, the first cudaMalloc "
            "returned cudaErrorInsufficientDriver (35)");
  EXPECT_EQ(c->explanation.substr(0, c->explanation.find(". ")),
            "Failed: cudaErrorInsufficientDriver (35) from 5 calls of cudaFree, cudaMalloc, "
            "cudaMemcpy, cudaMemset; CUDA_ERROR_STUB_LIBRARY (34) from 1 call of cuMemAlloc");
}

// Found by a hostile-testing helper: a vendor other than AMD (a backend added later) got
// NVIDIA's fixes: nvidia-smi, CUDA_VISIBLE_DEVICES. Each vendor's fixes name its own tools, and
// another's none.
TEST(FailedCalls, AnotherVendorsFixesNameNoOtherVendorsTools) {
  for (const char* vendor : {"nvidia", "amd", "myvendor"}) {
    SCOPED_TRACE(vendor);
    for (auto cls : {hal::ErrorClass::kNoDevice, hal::ErrorClass::kDeviceFault}) {
      Source s;
      s.named = false;
      for (int i = 0; i < 3; ++i) {
        Event& e = s.call("myMalloc", EventKind::kAlloc, uint64_t(i + 1) * kMs, kUs);
        e.vendor = vendor;
        e.ret = 7;
        e.set(Field::kErrClass, uint64_t(cls));
      }
      Analysis a = analyze(s, Window{});
      const Chain* c = failed(a);
      ASSERT_NE(c, nullptr);
      std::string fixes;
      for (const auto& f : c->fixes) fixes += f + "\n";
      const std::string v = vendor;
      const std::string own = v == "nvidia" ? "CUDA" : v == "amd" ? "rocm" : "the vendor's";
      EXPECT_NE(fixes.find(own), std::string::npos) << fixes;
      std::vector<std::string> foreign = {"nvidia", "CUDA", "compute-sanitizer",
                                          "rocm",   "AMD_", "HIP_"};
      for (const auto& tool : foreign) {
        bool mine = (v == "nvidia" &&
                     (tool == "nvidia" || tool == "CUDA" || tool == "compute-sanitizer")) ||
                    (v == "amd" && (tool == "rocm" || tool == "AMD_" || tool == "HIP_"));
        if (!mine) {
          EXPECT_EQ(fixes.find(tool), std::string::npos) << tool << ": " << fixes;
        }
      }
    }
  }
}

// An invalid argument first, then a fault: the fault leads (every later call fails after it),
// and the chain says calls had failed before it.
TEST(FailedCalls, AFaultLeadsWhereAnInvalidCallFailedFirst) {
  Source s;
  s.call("cudaMemcpyAsync", EventKind::kMemcpy, kMs, 5 * kUs).ret = 1;
  s.sync(2 * kMs, 0);
  s.launch(3 * kMs, 0xa1);
  s.sync(5 * kMs, 700);
  s.sync(6 * kMs, 700);
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->op, "cudaStreamSynchronize");
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_EQ(c->window_start, int64_t(5 * kMs));
  EXPECT_EQ(c->summary,
            "trainer (pid 1)'s GPU context failed: cudaStreamSynchronize returned "
            "cudaErrorIllegalAddress (700), and 1 of the 1 calls that returned after it failed");
  EXPECT_NE(c->explanation.find("after 1 call that returned success"), std::string::npos)
      << c->explanation;
  EXPECT_NE(c->explanation.find("Calls had failed before it, from " + format_wall(int64_t(kMs))),
            std::string::npos)
      << c->explanation;
  EXPECT_EQ(c->timeline[1].detail,
            "in flight: 1 launch since the last cudaStreamSynchronize that returned success (" +
                format_wall(int64_t(2 * kMs + 50 * kUs)) + "); function 0xa1");
}

// The device-fault demo (ingero demo device-fault): a gather kernel faults at step 150, its
// loss read reports it, and the chain names the kernels in flight, a repeated one once.
TEST(FailedCalls, TheDeviceFaultDemoNamesItsKernelsInFlight) {
  std::string path = test::temp_path("device-fault.db");
  {
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE(app::write_demo("device-fault", **w));
    ASSERT_TRUE((*w)->finish({}));
  }
  auto reader = store::TraceReader::open(path, {}, app::builtin_error_codes());
  ASSERT_TRUE(reader);
  store::SqlTraceSource src(**reader);
  Analysis a = analyze(src, Window{});
  ASSERT_FALSE(a.chains.empty());
  const Chain& c = a.chains[0];
  EXPECT_EQ(c.rule, "failed_calls");
  EXPECT_EQ(c.severity, Severity::kHigh);
  EXPECT_EQ(c.summary,
            "python3 (pid 7373)'s GPU context failed: cudaMemcpyAsync returned "
            "cudaErrorIllegalAddress (700), and 43 of the 43 calls that returned after it failed");
  ASSERT_EQ(c.timeline.size(), 3u);
  EXPECT_NE(c.timeline[1].detail.find("; the last 8: gather_rows<float> \u00d7 7, mse_loss"),
            std::string::npos)
      << c.timeline[1].detail;
  EXPECT_EQ(c.timeline[1].detail.rfind("in flight: 12 launches since the last "
                                       "cudaStreamSynchronize that returned success (",
                                       0),
            0u)
      << c.timeline[1].detail;
  ASSERT_EQ(c.stacks.size(), 1u);
  EXPECT_EQ(c.stacks[0].frames[0], "[Python] /home/user/train.py:80 in train_step()");
}

// One failure is no share: a call that failed at exit is LOW, not half the process failing.
// A hundred failures are MEDIUM however small their share.
TEST(FailedCalls, AFewFailuresAreLowAndAHundredAreMedium) {
  auto with = [](int calls, int failures) {
    Source s;
    for (int i = 0; i < calls; ++i)
      s.call("cudaFree", EventKind::kFree, uint64_t(i) * kUs, 100).ret = i < failures ? 4 : 0;
    Analysis a = analyze(s, Window{});
    const Chain* c = failed(a);
    return c ? c->severity : Severity(-1);
  };
  EXPECT_EQ(with(1, 1), Severity::kLow);  // cudaErrorCudartUnloading, its only call
  EXPECT_EQ(with(9, 9), Severity::kLow);
  EXPECT_EQ(with(10, 10), Severity::kHigh);
  EXPECT_EQ(with(10'000, 99), Severity::kLow);
  EXPECT_EQ(with(10'000, 100), Severity::kMedium);
}

// In flight is per stream: a sync that succeeded on one stream leaves the other's work queued,
// and graph launches and collectives are work too. A device sync that fails names every
// stream's.
TEST(FailedCalls, WorkInFlightIsEachStreamsAndEveryKind) {
  Source s;
  s.kernels = {kernel(0xa1, "embed(float*)")};
  for (int i = 0; i < 3; ++i) s.launch(uint64_t(i) * kUs, 0xa1).set(Field::kStream, 0xA);
  s.call("ncclAllReduce", EventKind::kCollective, 10 * kUs, 5 * kUs, 0, "nccl")
      .set(Field::kStream, 0xB);
  s.call("cudaGraphLaunch", EventKind::kGraphLaunch, 20 * kUs, 3 * kUs).set(Field::kStream, 0xB);
  s.sync(30 * kUs, 0).set(Field::kStream, 0xA);  // stream A's work is done
  s.sync(200 * kUs, 700).set(Field::kStream, 0xB);
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->timeline[1].detail,
            "in flight: 2 calls that queued GPU work since the trace began; ncclAllReduce, "
            "cudaGraphLaunch");
  // The same, but the failing wait is the device's: every stream's work.
  Source d;
  d.kernels = s.kernels;
  for (int i = 0; i < 3; ++i) d.launch(uint64_t(i) * kUs, 0xa1).set(Field::kStream, 0xA);
  d.call("ncclAllReduce", EventKind::kCollective, 10 * kUs, 5 * kUs, 0, "nccl")
      .set(Field::kStream, 0xB);
  Event& dev = d.call("cudaDeviceSynchronize", EventKind::kSync, 200 * kUs, 50 * kUs);
  dev.clear(Field::kStream);
  dev.ret = 719;
  Analysis b = analyze(d, Window{});
  const Chain* e = failed(b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->timeline[1].detail,
            "in flight: 4 calls that queued GPU work since each stream's last wait that returned "
            "success; embed \u00d7 3, ncclAllReduce");
}

// Each process its chain, the tracer none; a window that is not the trace says so.
TEST(FailedCalls, OneChainAProcessNoneForTheTracerAndAWindowSaysSo) {
  Source s;
  s.tracer = {9};
  for (uint32_t pid : {1u, 2u, 9u}) {
    Event& e = s.call("cudaMalloc", EventKind::kAlloc, 5 * kMs + pid, kUs);
    e.pid = e.tid = pid;
    e.ret = 100;
  }
  s.launch(3 * kMs, 0xa1);
  s.sync(6 * kMs, 700);
  Analysis a = analyze(s, Window{});
  std::map<uint32_t, std::string> by_pid;
  for (const auto& c : a.chains)
    if (c.rule == "failed_calls") by_pid[c.pids.at(0)] = c.summary;
  ASSERT_EQ(by_pid.size(), 2u);
  EXPECT_EQ(by_pid[2],
            "evaluator (pid 2) could not use a GPU: 1 of 1 GPU calls failed, the first cudaMalloc "
            "returned cudaErrorNoDevice (100)");
  // pid 1: the fault (sync 700) outweighs its allocation's earlier cudaErrorNoDevice.
  EXPECT_EQ(by_pid[1].rfind("trainer (pid 1)'s GPU context failed: cudaStreamSynchronize", 0), 0u)
      << by_pid[1];
  // From 2 ms on only: "in the window", and since when it counts (this source gives every call
  // whatever the window; a file's reader gives the window's).
  Window w;
  w.from_ns = int64_t(2 * kMs);
  Analysis b = analyze(s, w);
  const Chain* c = nullptr;
  for (const auto& x : b.chains)
    if (x.rule == "failed_calls" && x.pids == std::vector<uint32_t>{1}) c = &x;
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->explanation.find("The first cudaErrorIllegalAddress (700) in the window at "),
            std::string::npos)
      << c->explanation;
  EXPECT_EQ(c->timeline[1].detail, "in flight: 1 launch since the window began; function 0xa1");
}

// An AMD process's fault: ROCm's fixes.
TEST(FailedCalls, AnAmdFaultGetsRocmsFixes) {
  Source s;
  Event& e = s.call("hipStreamSynchronize", EventKind::kSync, kMs, kUs, 0, "hip");
  e.vendor = "amd";
  e.ret = 700;
  s.named = false;
  e.set(Field::kErrClass, uint64_t(hal::ErrorClass::kDeviceFault));
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->summary,
            "trainer (pid 1)'s GPU context failed: hipStreamSynchronize returned "
            "error 700");
  EXPECT_EQ(c->fixes.at(0),
            "Rerun with AMD_SERIALIZE_KERNEL=3 so that the launch that faults is the call that "
            "fails");
  ASSERT_EQ(c->stacks.size(), 0u);
  EXPECT_STREQ(stack_counts_name(StackCounts::kFirstFailure), "first_failure");
}

// A library that returns garbage: every call a code of its own. The pass keeps 64 codes and
// counts the rest, in one pass, and the chain still says how many failed.
TEST(FailedCalls, ACodeForEveryCallIsCountedWithoutKeepingEach) {
  Source s;
  s.named = false;
  constexpr int kCalls = 100'000;
  for (int i = 0; i < kCalls; ++i)
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, uint64_t(i) * kUs, 100, 0).ret = 1'000'000 + i;
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_EQ(c->summary,
            "100,000 of 100,000 GPU calls of trainer (pid 1) failed, the first cudaMemcpyAsync "
            "returned error 1000000");
  EXPECT_EQ(c->explanation.substr(0, c->explanation.find(". ")),
            "Failed: error 1000000 from 1 call of cudaMemcpyAsync; error 1000001 from 1 call of "
            "cudaMemcpyAsync; error 1000002 from 1 call of cudaMemcpyAsync; error 1000003 from 1 "
            "call of cudaMemcpyAsync; 99,996 more with other codes");
}

// Steps of 40 ms (warm-up) then of 10 ms; the first two allocate, and fail with no device.
TEST(FailedCalls, AFailureInTheWarmUpKeepsItsSeverity) {
  Source s;
  uint64_t t = 0;
  for (int i = 0; i < 45; ++i) {
    t += i < 5 ? 40 * kMs : 10 * kMs;
    uint64_t at = t - 400 * kUs;
    Event& up = s.call("cudaMemcpy", EventKind::kMemcpy, at, 20 * kUs, step_source::kUploadStack);
    up.set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
    // Allocations only while it warms up, each failing.
    if (i < 2) s.call("cudaMalloc", EventKind::kAlloc, at - 2 * kMs, 30 * kUs).ret = 100;
    for (int k = 0; k < 10; ++k)
      s.call("cudaLaunchKernel", EventKind::kLaunch, at + 30 * kUs + uint64_t(k) * 10 * kUs,
             8 * kUs);
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, at + 200 * kUs, 10 * kUs, step_source::kLossStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, at + 212 * kUs, 100 * kUs,
           step_source::kLossStack);
  }
  s.frames_[step_source::kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
  Analysis a = analyze(s, Window{});
  const Chain* c = failed(a);
  ASSERT_NE(c, nullptr);
  // Its window lies in the warm-up, which would cap another rule's chain at LOW.
  ASSERT_EQ(a.steps.processes.size(), 1u);
  EXPECT_LE(c->window_end, step_source::only(a).warmup_end_ns);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_FALSE(c->warmup);
  EXPECT_EQ(c->summary.find("warm-up"), std::string::npos) << c->summary;
}

}  // namespace
}  // namespace ingero::engine

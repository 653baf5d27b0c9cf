// The device side channel without a GPU: the NVML sampler over the stand-in libnvidia-ml.so.1
// (tests/fake_vendor/fake_nvml.c, scripted through FAKE_NVML_SCRIPT), with and without its
// optional functions, refusing nvmlInit, and absent; the amdgpu sampler over a fake sysfs tree
// and fake /proc/PID/fdinfo files. Exact figures throughout; an absent figure is nullopt.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/builtin_backends.h"
#include "app/device_poller.h"
#include "backends/amdgpu/amdgpu_backend.h"
#include "backends/nvml/nvml_backend.h"
#include "backends/nvml/nvml_sampler.h"
#include "capture/host_info.h"
#include "test_paths.h"
#include "tests/support/fake_nvml.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const std::string& kPartial = kFakeNvmlPartial;
const std::string& kFull = kFakeNvmlFull;

hal::DeviceSamplerOptions nvml_options(const std::string& lib) {
  hal::DeviceSamplerOptions o;
  o.nvml_library = lib;
  o.poll_ns = 100'000'000;
  return o;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

int64_t wall() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr const char* kDevice =
    "device uuid=GPU-fake-0 name=Fake_H100 gpu=9 mem=30 used=1073741824 total=85899345920 "
    "sm_clock=1980 mem_clock=2619 power=- temp=45 reasons=0x24 ecc_unc=0 ecc_cor=3\n";

TEST(NvmlSampler, MissingOptionalFunctionsLeaveTheirFiguresAbsent) {
  fake_nvml_script(std::string(kDevice) + "proc device=0 pid=4242 sm=9 mem=2 used=123456\n");
  auto s = backends::nvml::NvmlSampler::open(nvml_options(kPartial));
  ASSERT_TRUE(s) << s.error().message;
  const auto& i = (*s)->info();
  EXPECT_EQ(i.source, "nvml");
  EXPECT_EQ(i.library, kPartial + " (driver 999.0-fake)");
  EXPECT_EQ(i.devices, std::vector<std::string>{"0: Fake H100 (GPU-fake-0)"});
  EXPECT_EQ(i.figures, (std::vector<std::string>{"utilisation", "per-process utilisation", "memory",
                                                 "clocks", "temperature", "Xid events"}));
  EXPECT_EQ(i.absent, (std::vector<std::string>{
                          "per-process memory (nvmlDeviceGetComputeRunningProcesses_v3 missing)",
                          "throttle reasons (nvmlDeviceGetCurrentClocksEventReasons missing)",
                          "power (Not Supported (NVML error 3))",
                          "ECC totals (nvmlDeviceGetTotalEccErrors missing)"}));
  EXPECT_TRUE(i.events);
  int64_t t0 = wall();
  auto v = (*s)->poll(t0, {});
  ASSERT_EQ(v.size(), 2u);
  const hal::DeviceSample& d = v[0];
  EXPECT_EQ(d.ts_ns, t0);
  EXPECT_EQ(d.period_ns, 100'000'000);
  EXPECT_EQ(d.uuid, "GPU-fake-0");
  EXPECT_FALSE(d.pid);
  EXPECT_EQ(d.sm_util, 9.0);
  EXPECT_EQ(d.mem_util, 30.0);
  EXPECT_EQ(d.mem_used, 1073741824u);
  EXPECT_EQ(d.mem_total, 85899345920u);
  EXPECT_EQ(d.sm_clock_mhz, 1980u);
  EXPECT_EQ(d.mem_clock_mhz, 2619u);
  EXPECT_EQ(d.temperature_c, 45);
  EXPECT_FALSE(d.power_mw);
  EXPECT_FALSE(d.throttle_reasons);
  EXPECT_FALSE(d.ecc_uncorrected);
  const hal::DeviceSample& p = v[1];
  EXPECT_EQ(p.pid, 4242u);
  EXPECT_EQ(p.sm_util, 9.0);
  EXPECT_EQ(p.mem_util, 2.0);
  EXPECT_EQ(p.period_ns, 100'000'000);  // its first sample: one poll period
  EXPECT_LE(std::llabs(p.ts_ns - t0), 1'000'000'000);
  EXPECT_FALSE(p.mem_used);  // no running-processes function
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  auto w = (*s)->poll(wall(), {});
  ASSERT_EQ(w.size(), 2u);
  // At 10 Hz the slow figures come once a second: the second poll has utilisation only.
  EXPECT_EQ(w[0].sm_util, 9.0);
  EXPECT_FALSE(w[0].mem_used);
  EXPECT_FALSE(w[0].temperature_c);
  // Its second sample covers the time since the first, to the microsecond NVML stamps.
  EXPECT_NEAR(double(w[1].period_ns), double(w[1].ts_ns - p.ts_ns), 1000.0);
  EXPECT_GE(w[1].period_ns, 30'000'000);
}

// NVML stamps per-process samples with the CPU's wall clock; the poll's clock is the trace's
// (CLOCK_MONOTONIC shifted once at its start), which a step of the wall clock since does not
// move. With the trace's clock 10 s behind the wall clock, a sample NVML stamped "now" is
// stamped at the poll's now, not 10 s after it (and a step under the 60 s sanity bound would
// otherwise stand).
TEST(NvmlSampler, PerProcessSamplesAreStampedOnThePollsClock) {
  fake_nvml_script(std::string(kDevice) +
                   "proc device=0 pid=4242 sm=9 mem=2 used=123456\n"
                   "xid device=0 code=79 after_ms=300\n");
  auto s = backends::nvml::NvmlSampler::open(nvml_options(kFull));
  ASSERT_TRUE(s) << s.error().message;
  constexpr int64_t kBehind = 10'000'000'000;
  int64_t t0 = wall() - kBehind;
  auto v = (*s)->poll(t0, {});
  ASSERT_EQ(v.size(), 2u);
  ASSERT_EQ(v[1].pid, 4242u);
  EXPECT_LE(std::llabs(v[1].ts_ns - t0), 1'000'000'000) << v[1].ts_ns - t0;
  // An Xid, received on the sampler's own thread after the poll: on the same clock.
  std::vector<hal::DeviceEvent> events;
  for (int i = 0; i < 300 && events.empty(); ++i) {
    events = (*s)->take_events();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_GE(events[0].ts_ns - t0, 0);
  EXPECT_LE(events[0].ts_ns - t0, 4'000'000'000) << events[0].ts_ns - t0;
}

TEST(NvmlSampler, EveryFigureEccRisesAndXidEvents) {
  fake_nvml_script(std::string(kDevice) +
                   "proc device=0 pid=4242 sm=9 mem=2 used=123456\n"
                   "proc device=0 pid=5353 sm=0 mem=0 used=777\n"
                   "ecc device=0 after_ms=150 unc=2 cor=0\n"
                   "xid device=0 code=79 after_ms=0\n");
  // Polled once a second: every poll reads the slow figures (memory, ECC) too.
  hal::DeviceSamplerOptions o = nvml_options(kFull);
  o.poll_ns = 1'000'000'000;
  auto s = backends::nvml::NvmlSampler::open(o);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(contains((*s)->info().figures, "per-process memory"));
  EXPECT_TRUE(contains((*s)->info().figures, "throttle reasons"));
  EXPECT_TRUE(contains((*s)->info().figures, "ECC totals"));
  auto v = (*s)->poll(wall(), {});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].throttle_reasons, 0x24u);
  EXPECT_EQ(v[0].ecc_uncorrected, 0u);
  EXPECT_EQ(v[0].ecc_corrected, 3u);
  EXPECT_EQ(v[1].pid, 4242u);
  EXPECT_EQ(v[1].mem_used, 123456u);  // joined to its utilisation sample
  // 5353 has a sample too (sm 0 is a figure, not an absence).
  EXPECT_EQ(v[2].pid, 5353u);
  EXPECT_EQ(v[2].sm_util, 0.0);
  EXPECT_EQ(v[2].mem_used, 777u);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto w = (*s)->poll(wall(), {});
  EXPECT_EQ(w[0].ecc_uncorrected, 2u);
  std::vector<hal::DeviceEvent> events;
  for (int i = 0; i < 200 && events.size() < 2; ++i) {
    auto e = (*s)->take_events();
    events.insert(events.end(), e.begin(), e.end());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(events.size(), 2u);
  std::sort(events.begin(), events.end(),
            [](const auto& x, const auto& y) { return x.kind > y.kind; });
  EXPECT_EQ(events[0].kind, "xid");
  EXPECT_EQ(events[0].code, 79);
  EXPECT_EQ(events[0].uuid, "GPU-fake-0");
  EXPECT_EQ(events[0].detail, "Xid 79 (GPU has fallen off the bus)");
  EXPECT_EQ(events[1].kind, "ecc_uncorrected");
  EXPECT_EQ(events[1].code, 2);
  EXPECT_EQ(events[1].detail, "2 uncorrected ECC errors (volatile count now 2)");
}

TEST(NvmlSampler, RefusedInitAndAbsentLibraryAreReportedByCheckAndOpenNothing) {
  fake_nvml_script("init 9\n");
  auto s = backends::nvml::NvmlSampler::open(nvml_options(kPartial));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)");
  auto lines = backends::make_nvml_backend(kPartial)->check("/sys");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].name, "nvml");
  EXPECT_EQ(lines[0].status, hal::CheckLine::Status::kOptional);
  EXPECT_EQ(lines[0].value, "unavailable");
  EXPECT_EQ(lines[0].detail.rfind("nvmlInit_v2 failed: Driver Not Loaded (NVML error 9): GPU busy "
                                  "is not measured",
                                  0),
            0u)
      << lines[0].detail;
  // The tracer's poller: no sampler, one note, nothing to poll.
  auto b = backends::make_nvml_backend(kPartial);
  app::DevicePoller poller({b.get()}, nvml_options(kPartial));
  EXPECT_FALSE(poller.active());
  EXPECT_EQ(poller.notes(),
            std::vector<std::string>{"nvml: nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)"});
  poller.start();  // a no-op: no thread
  poller.poll_once(wall());
  EXPECT_TRUE(poller.take().samples.empty());

  auto none = backends::make_nvml_backend("/nonexistent/libnvidia-ml.so.1")->check("/sys");
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].detail.rfind("/nonexistent/libnvidia-ml.so.1 not found (", 0), 0u)
      << none[0].detail;
}

// A driver that never answers nvmlInit_v2 (a GPU fallen off the bus): the open gives up after
// its limit, says why, and neither check nor the tracer's poller is held.
TEST(NvmlSampler, AnInitThatNeverReturnsIsGivenUpAfterItsLimit) {
  fake_nvml_script("init hang\n" + std::string(kDevice));
  setenv("INGERO_NVML_INIT_LIMIT_MS", "300", 1);
  auto t0 = std::chrono::steady_clock::now();
  auto s = backends::nvml::NvmlSampler::open(nvml_options(kPartial));
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "nvmlInit_v2 did not return within 0 s (a GPU or driver that no longer answers: "
            "nvidia-smi hangs too)");
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(10));
  auto lines = backends::make_nvml_backend(kPartial)->check("/sys");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].status, hal::CheckLine::Status::kOptional);
  EXPECT_EQ(lines[0].detail.rfind("nvmlInit_v2 did not return within", 0), 0u) << lines[0].detail;
  unsetenv("INGERO_NVML_INIT_LIMIT_MS");
}

// A library that says it has 4 billion devices is broken, not walked; a driver version that
// fills its buffer is read to the buffer's end, not past it.
TEST(NvmlSampler, ABrokenCountOrAnUnendedStringIsHeldToItsBounds) {
  fake_nvml_script("count 4000000000\n" + std::string(kDevice));
  auto s = backends::nvml::NvmlSampler::open(nvml_options(kPartial));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "nvmlDeviceGetCount_v2 says 4000000000 devices, more than any host has (a broken "
            "library?)");
  fake_nvml_script("driver_fill\n" + std::string(kDevice));
  auto f = backends::nvml::NvmlSampler::open(nvml_options(kPartial));
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ((*f)->info().library, kPartial + " (driver " + std::string(80, 'V') + ")");
}

// A driver that sees no usable device says so, not "; ; gives nothing" with advice about
// per-process figures.
TEST(NvmlSampler, NoUsableDeviceIsSaidPlainly) {
  fake_nvml_script("# no device\n");
  auto lines = backends::make_nvml_backend(kPartial)->check("/sys");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].status, hal::CheckLine::Status::kOptional);
  EXPECT_EQ(lines[0].value, "0 devices");
  EXPECT_EQ(lines[0].detail,
            kPartial +
                " (driver 999.0-fake); no device answered: GPU busy is not "
                "measured; explain gives GPU idle as a lower bound from the syncs");
  EXPECT_EQ(lines[0].fix, "see `nvidia-smi`: the driver sees no usable GPU");
}

TEST(NvmlSampler, CheckSaysWhatItGives) {
  fake_nvml_script(kDevice);
  auto lines = backends::make_nvml_backend(kPartial)->check("/sys");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].status, hal::CheckLine::Status::kPass);
  EXPECT_EQ(lines[0].value, "1 device");
  EXPECT_EQ(lines[0].detail,
            kPartial +
                " (driver 999.0-fake); 0: Fake H100 (GPU-fake-0); gives utilisation, per-process "
                "utilisation, memory, clocks, temperature, Xid events; absent: per-process memory "
                "(nvmlDeviceGetComputeRunningProcesses_v3 missing), throttle reasons "
                "(nvmlDeviceGetCurrentClocksEventReasons missing), power (Not Supported (NVML "
                "error 3)), ECC totals (nvmlDeviceGetTotalEccErrors missing)");
}

// The poller's thread polls every period and keeps what it read for the event loop.
TEST(NvmlSampler, PollerThreadPollsEveryPeriod) {
  fake_nvml_script(std::string(kDevice) + "proc device=0 pid=4242 sm=9 mem=2\n");
  auto b = backends::make_nvml_backend(kPartial);
  hal::DeviceSamplerOptions o = nvml_options(kPartial);
  o.poll_ns = 20'000'000;
  app::DevicePoller poller({b.get()}, o);
  ASSERT_TRUE(poller.active());
  poller.start();
  while (poller.polls() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto batch = poller.take();
  size_t whole = 0, mine = 0;
  for (const auto& x : batch.samples) (x.pid ? mine : whole)++;
  EXPECT_GE(whole, 5u);
  EXPECT_EQ(mine, whole);  // one per-process sample a poll
  EXPECT_EQ(batch.dropped, 0u);
}

// The poller's thread stamps its polls on the clock it is given (the session's): with that
// clock 10 s behind the wall clock, every sample, whole-device and per-process, is near its
// now, not the wall clock's.
TEST(NvmlSampler, PollerThreadStampsOnTheSessionsClock) {
  fake_nvml_script(std::string(kDevice) + "proc device=0 pid=4242 sm=9 mem=2\n");
  auto b = backends::make_nvml_backend(kPartial);
  hal::DeviceSamplerOptions o = nvml_options(kPartial);
  o.poll_ns = 20'000'000;
  constexpr int64_t kBehind = 10'000'000'000;
  capture::TraceClock clock{capture::mono_to_wall_offset_ns() - kBehind};
  app::DevicePoller poller({b.get()}, o, clock);
  ASSERT_TRUE(poller.active());
  int64_t from = clock.now();
  poller.start();
  while (poller.polls() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  poller.stop();
  int64_t to = clock.now();
  auto batch = poller.take();
  ASSERT_GE(batch.samples.size(), 6u);
  for (const auto& x : batch.samples) {
    EXPECT_GE(x.ts_ns, from - 1'000'000'000) << x.pid.value_or(0);
    EXPECT_LE(x.ts_ns, to) << x.pid.value_or(0);
  }
}

struct FakeAmd {
  std::string root = temp_path("amd");
  std::string sys = root + "/sys", proc = root + "/proc";
  FakeAmd() {
    std::string d = sys + "/class/drm/card0/device";
    put_file(d + "/gpu_busy_percent", "37\n");
    put_file(d + "/mem_busy_percent", "12\n");
    put_file(d + "/mem_info_vram_used", "1048576\n");
    put_file(d + "/mem_info_vram_total", "17179869184\n");
    put_file(d + "/uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n");
    put_file(d + "/product_name", "AMD Instinct MI210\n");
    put_file(d + "/hwmon/hwmon3/power1_average", "123456000\n");
    put_file(d + "/hwmon/hwmon3/temp1_input", "51000\n");
    put_file(d + "/hwmon/hwmon3/freq1_input", "1700000000\n");
    put_file(d + "/hwmon/hwmon3/freq2_input", "1600000000\n");
    put_file(sys + "/class/drm/card0-DP-1/status", "connected\n");      // a connector
    put_file(sys + "/class/drm/card1/device/uevent", "DRIVER=i915\n");  // another driver
    put_file(proc + "/777/fdinfo/0", "pos:\t0\nflags:\t02\n");
    fdinfo(5'000'000);
  }
  // The process's render node, open twice (a dup'd fd: the same client).
  void fdinfo(uint64_t compute_ns) {
    std::string text =
        "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\n"
        "drm-client-id:\t9\ndrm-engine-gfx:\t1000000 ns\ndrm-engine-compute:\t" +
        std::to_string(compute_ns) +
        " ns\ndrm-engine-dma:\t900000000 ns\ndrm-memory-vram:\t2048 KiB\n";
    put_file(proc + "/777/fdinfo/5", text);
    put_file(proc + "/777/fdinfo/6", text);
  }
};

TEST(AmdgpuSampler, CardFiguresAndPerProcessFromFdinfo) {
  FakeAmd f;
  auto b = backends::make_amdgpu_backend();
  hal::DeviceSamplerOptions o;
  o.sysfs_root = f.sys;
  o.procfs_root = f.proc;
  auto s = b->open_device_sampler(o);
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(*s);
  EXPECT_EQ((*s)->info().devices, std::vector<std::string>{"0: AMD Instinct MI210 (0000:03:00.0)"});
  auto v = (*s)->poll(1'000'000'000, {777});
  ASSERT_EQ(v.size(), 2u);
  const auto& d = v[0];
  EXPECT_EQ(d.source, "amdgpu");
  EXPECT_EQ(d.device, 0u);
  EXPECT_EQ(d.uuid, "0000:03:00.0");
  EXPECT_EQ(d.sm_util, 37.0);
  EXPECT_EQ(d.mem_util, 12.0);
  EXPECT_EQ(d.mem_used, 1048576u);
  EXPECT_EQ(d.mem_total, 17179869184u);
  EXPECT_EQ(d.power_mw, 123456u);
  EXPECT_EQ(d.temperature_c, 51);
  EXPECT_EQ(d.sm_clock_mhz, 1700u);
  EXPECT_EQ(d.mem_clock_mhz, 1600u);
  EXPECT_FALSE(d.throttle_reasons);
  // The first reading of the process: its memory; busy time needs a second.
  EXPECT_EQ(v[1].pid, 777u);
  EXPECT_FALSE(v[1].sm_util);
  EXPECT_EQ(v[1].mem_used, 2048u * 1024);
  f.fdinfo(5'000'000 + 25'000'000);  // 25 ms of compute in the next 100 ms
  auto w = (*s)->poll(1'100'000'000, {777});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].period_ns, 100'000'000);
  EXPECT_EQ(w[1].pid, 777u);
  EXPECT_EQ(w[1].period_ns, 100'000'000);
  EXPECT_DOUBLE_EQ(*w[1].sm_util, 25.0);  // the dup'd fd is not counted twice; dma is no shader
  EXPECT_EQ(w[1].mem_used, 2048u * 1024);
  // A process that is gone, or was never a DRM client: nothing.
  auto x = (*s)->poll(1'200'000'000, {888});
  EXPECT_EQ(x.size(), 1u);

  auto lines = b->check(f.sys);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].name, "amdgpu");
  EXPECT_EQ(lines[0].status, hal::CheckLine::Status::kPass);
  EXPECT_EQ(lines[0].value, "1 device");
  EXPECT_EQ(lines[0].detail.rfind("0: AMD Instinct MI210 (0000:03:00.0); gives utilisation, "
                                  "memory utilisation, memory, clocks, power, temperature, ",
                                  0),
            0u)
      << lines[0].detail;
}

TEST(AmdgpuSampler, NoCardIsNoSamplerAndAnOptionalCheckLine) {
  std::string root = temp_path("noamd");
  put_file(root + "/class/drm/card0/device/uevent", "DRIVER=i915\n");
  auto b = backends::make_amdgpu_backend();
  hal::DeviceSamplerOptions o;
  o.sysfs_root = root;
  auto s = b->open_device_sampler(o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "no amdgpu card under " + root + "/class/drm");
  auto lines = b->check(root);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].status, hal::CheckLine::Status::kOptional);
}

TEST(DeviceLabels, ContainerAndPodFromTheCgroupPath) {
  auto l = app::labels_from_cgroup(
      "/kubepods.slice/kubepods-burstable.slice/"
      "kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/"
      "cri-containerd-3f4e5d6c7b8a99887766554433221100aabbccddeeff00112233445566778899.scope");
  EXPECT_EQ(l.container_id, "3f4e5d6c7b8a");
  EXPECT_EQ(l.pod_uid, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
  auto d = app::labels_from_cgroup("/system.slice/docker-0123456789abcdef0123.scope");
  EXPECT_EQ(d.container_id, "0123456789ab");
  EXPECT_EQ(d.pod_uid, "");
  auto none = app::labels_from_cgroup("/user.slice/user-1000.slice/session-2.scope");
  EXPECT_EQ(none.container_id, "");
  EXPECT_EQ(none.pod_uid, "");
}

}  // namespace
}  // namespace ingero::test

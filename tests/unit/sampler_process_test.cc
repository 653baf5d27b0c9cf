// A device sampler in a process of its own (hal/sampler_process.h): NVML run by the ingero
// binary's hidden `__nvml-sampler` command over the stand-in libnvidia-ml.so.1, answering as it
// does in process; a library that crashes or hangs while opening or polling, and children that
// exit, write garbage or cannot be started, each said in exact words while the caller goes on;
// and the answers' bytes, whole and damaged.
#include "hal/sampler_process.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/device_poller.h"
#include "backends/nvml/nvml_backend.h"
#include "backends/nvml/nvml_child.h"
#include "backends/nvml/nvml_sampler.h"
#include "hal/device_wire.h"
#include "test_paths.h"
#include "tests/support/fake_nvml.h"
#include "tests/support/subprocess.h"

namespace ingero::test {
namespace {

constexpr const char* kDevice =
    "device uuid=GPU-fake-0 name=Fake_H100 gpu=9 mem=30 used=1073741824 total=85899345920 "
    "sm_clock=1980 mem_clock=2619 power=- temp=45 reasons=0x24 ecc_unc=0 ecc_cor=3\n"
    "proc device=0 pid=4242 sm=7 mem=2 used=123456\n";

hal::SamplerProcessOptions nvml_process(const std::string& lib) {
  hal::SamplerProcessOptions o;
  o.argv = backends::nvml::sampler_argv(INGERO_BIN, lib, 100'000'000);
  o.source = "nvml";
  o.library = lib;
  o.open_call = "nvmlInit_v2";
  return o;
}

int64_t wall() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// This process's children named `comm` (the sampler names itself ingero-nvml).
int children_named(const std::string& comm) {
  return int(test::children_named(getpid(), comm).size());
}

TEST(DeviceWire, EveryFigureAndEveryAbsenceComeBackAsTheyWent) {
  hal::DeviceSample a;
  a.ts_ns = 1'700'000'000'123'456'789;
  a.period_ns = -5;  // any integer, as sent
  a.source = "nvml";
  a.device = 7;
  a.uuid = "GPU-8b3c";
  a.sm_util = 9.25;
  a.mem_used = 1ull << 40;
  a.temperature_c = -3;
  a.throttle_reasons = 0x24;
  a.ecc_uncorrected = 0;
  hal::DeviceSample b;
  b.source = "amdgpu";
  b.pid = 4242;
  b.mem_util = 0.0;
  b.mem_total = 80;
  b.sm_clock_mhz = 1980;
  b.mem_clock_mhz = 2619;
  b.power_mw = 300000;
  b.ecc_corrected = 3;
  hal::DeviceEvent e{.ts_ns = 5,
                     .source = "nvml",
                     .device = 1,
                     .uuid = "GPU-1",
                     .kind = "xid",
                     .code = 79,
                     .detail = "Xid 79"};
  hal::DeviceSamplerInfo info{.source = "nvml",
                              .library = "libnvidia-ml.so.1 (driver 580)",
                              .devices = {"0: H100", "1: H100"},
                              .figures = {"utilisation"},
                              .absent = {},
                              .events = true};
  std::string bytes;
  hal::device_wire::put_info(bytes, info);
  hal::device_wire::put_samples(bytes, {a, b});
  hal::device_wire::put_events(bytes, {e});
  hal::device_wire::put_pids(bytes, {1, 4294967295u});
  std::string_view in = bytes;
  hal::DeviceSamplerInfo info2;
  std::vector<hal::DeviceSample> samples;
  std::vector<hal::DeviceEvent> events;
  std::vector<uint32_t> pids;
  ASSERT_TRUE(hal::device_wire::get_info(in, info2));
  ASSERT_TRUE(hal::device_wire::get_samples(in, samples));
  ASSERT_TRUE(hal::device_wire::get_events(in, events));
  ASSERT_TRUE(hal::device_wire::get_pids(in, pids));
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(info2.library, info.library);
  EXPECT_EQ(info2.devices, info.devices);
  EXPECT_EQ(info2.figures, info.figures);
  EXPECT_TRUE(info2.absent.empty());
  EXPECT_TRUE(info2.events);
  ASSERT_EQ(samples.size(), 2u);
  const auto& x = samples[0];
  EXPECT_EQ(x.ts_ns, a.ts_ns);
  EXPECT_EQ(x.period_ns, -5);
  EXPECT_EQ(x.source, "nvml");
  EXPECT_EQ(x.device, 7u);
  EXPECT_EQ(x.uuid, "GPU-8b3c");
  EXPECT_EQ(x.sm_util, 9.25);
  EXPECT_EQ(x.mem_used, 1ull << 40);
  EXPECT_EQ(x.temperature_c, -3);
  EXPECT_EQ(x.throttle_reasons, 0x24u);
  EXPECT_EQ(x.ecc_uncorrected, 0u);  // present and zero, not absent
  EXPECT_FALSE(x.pid);
  EXPECT_FALSE(x.mem_util);
  EXPECT_FALSE(x.mem_total);
  EXPECT_FALSE(x.sm_clock_mhz);
  EXPECT_FALSE(x.power_mw);
  EXPECT_FALSE(x.ecc_corrected);
  const auto& y = samples[1];
  EXPECT_EQ(y.pid, 4242u);
  EXPECT_EQ(y.mem_util, 0.0);
  EXPECT_EQ(y.mem_total, 80u);
  EXPECT_EQ(y.sm_clock_mhz, 1980u);
  EXPECT_EQ(y.mem_clock_mhz, 2619u);
  EXPECT_EQ(y.power_mw, 300000u);
  EXPECT_EQ(y.ecc_corrected, 3u);
  EXPECT_FALSE(y.sm_util);
  EXPECT_FALSE(y.temperature_c);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].ts_ns, 5);
  EXPECT_EQ(events[0].device, 1u);
  EXPECT_EQ(events[0].uuid, "GPU-1");
  EXPECT_EQ(events[0].kind, "xid");
  EXPECT_EQ(events[0].code, 79);
  EXPECT_EQ(events[0].detail, "Xid 79");
  EXPECT_EQ(pids, (std::vector<uint32_t>{1, 4294967295u}));
}

// Bytes cut anywhere, counts and lengths larger than what follows, unknown presence bits and
// a device over 32 bits: each refused, none read as a figure.
TEST(DeviceWire, CutOrDamagedAnswersAreRefused) {
  hal::DeviceSample s;
  s.source = "nvml";
  s.uuid = "GPU-0";
  s.sm_util = 50;
  s.pid = 9;
  std::string whole;
  hal::device_wire::put_samples(whole, {s, s});
  for (size_t n = 0; n < whole.size(); ++n) {
    std::string_view in(whole.data(), n);
    std::vector<hal::DeviceSample> out;
    EXPECT_FALSE(hal::device_wire::get_samples(in, out)) << "cut at " << n;
  }
  std::vector<hal::DeviceSample> out;
  std::string_view huge_count = "\xff\xff\xff\xff\x0f";
  EXPECT_FALSE(hal::device_wire::get_samples(huge_count, out));
  std::string text;
  std::string_view long_text = "\x09short";
  EXPECT_FALSE(hal::device_wire::get_text(long_text, text));
  std::string unknown_bit;
  hal::device_wire::put_samples(unknown_bit, {hal::DeviceSample{}});
  // count, ts, period, source "", device 0, uuid "", bits: set bit 12 (unknown).
  ASSERT_EQ(unknown_bit, std::string("\x01\x00\x00\x00\x00\x00\x00", 7));
  unknown_bit = std::string("\x01\x00\x00\x00\x00\x00\x80\x20", 8);
  std::string_view u = unknown_bit;
  EXPECT_FALSE(hal::device_wire::get_samples(u, out));
  std::string wide_device = std::string("\x01\x00\x00\x00\x80\x80\x80\x80\x10\x00\x00", 11);
  std::string_view w = wide_device;
  EXPECT_FALSE(hal::device_wire::get_samples(w, out));
  std::string_view eleven_byte_varint = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01";
  int64_t v;
  EXPECT_FALSE(hal::device_wire::get_int(eleven_byte_varint, v));
  std::string_view past_64_bits = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02";
  EXPECT_FALSE(hal::device_wire::get_int(past_64_bits, v));
  std::string_view all_64_bits = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01";
  EXPECT_TRUE(hal::device_wire::get_int(all_64_bits, v));
  // Figures outside their type (a pid over 32 bits, a temperature over int32): refused, not cut.
  std::string wide_pid = std::string("\x01\x00\x00\x00\x00\x00\x01\x80\x80\x80\x80\x10", 12);
  std::string_view wp = wide_pid;
  EXPECT_FALSE(hal::device_wire::get_samples(wp, out));
  std::string hot = std::string("\x01\x00\x00\x00\x00\x00\x80\x02\x80\x80\x80\x80\x10", 13);
  std::string_view h = hot;
  EXPECT_FALSE(hal::device_wire::get_samples(h, out));
  // A count the bytes left could not hold at 6 bytes a sample.
  std::string two = std::string("\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 12);
  std::string_view t2 = two;
  EXPECT_FALSE(hal::device_wire::get_samples(t2, out));
  std::string one_more = two + std::string(1, '\0');
  std::string_view t3 = one_more;
  EXPECT_TRUE(hal::device_wire::get_samples(t3, out));
  EXPECT_EQ(out.size(), 2u);
}

// The same figures through the sampler's own process as in this one: info, a device sample's
// every figure, a process's sample; its CPU time reported; closing it ends the process.
TEST(SamplerProcess, AnswersAsTheLibraryDoesInProcess) {
  fake_nvml_script(kDevice);
  hal::DeviceSamplerOptions in_process;
  in_process.nvml_library = kFakeNvmlPartial;
  auto direct = backends::nvml::NvmlSampler::open(in_process);
  ASSERT_TRUE(direct) << direct.error().message;
  auto s = hal::open_sampler_process(nvml_process(kFakeNvmlPartial));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(children_named("ingero-nvml"), 1);
  const auto& i = (*s)->info();
  const auto& d = (*direct)->info();
  EXPECT_EQ(i.source, d.source);
  EXPECT_EQ(i.library, kFakeNvmlPartial + " (driver 999.0-fake)");
  EXPECT_EQ(i.devices, d.devices);
  EXPECT_EQ(i.figures, d.figures);
  EXPECT_EQ(i.absent, d.absent);
  EXPECT_EQ(i.events, d.events);
  int64_t t0 = wall();
  auto v = (*s)->poll(t0, {4242});
  auto u = (*direct)->poll(t0, {4242});
  ASSERT_EQ(v.size(), 2u);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(v[0].ts_ns, t0);
  EXPECT_EQ(v[0].period_ns, u[0].period_ns);
  EXPECT_EQ(v[0].uuid, "GPU-fake-0");
  EXPECT_EQ(v[0].sm_util, 9.0);
  EXPECT_EQ(v[0].mem_util, 30.0);
  EXPECT_EQ(v[0].mem_used, 1073741824u);
  EXPECT_EQ(v[0].mem_total, 85899345920u);
  EXPECT_EQ(v[0].sm_clock_mhz, 1980u);
  EXPECT_EQ(v[0].mem_clock_mhz, 2619u);
  EXPECT_EQ(v[0].temperature_c, 45);
  EXPECT_FALSE(v[0].power_mw);
  EXPECT_EQ(v[1].pid, 4242u);
  EXPECT_EQ(v[1].sm_util, 7.0);
  EXPECT_EQ(v[1].mem_util, 2.0);
  EXPECT_TRUE((*s)->take_events().empty());
  auto* own = dynamic_cast<hal::SelfPacedSampler*>(s->get());
  ASSERT_NE(own, nullptr);
  EXPECT_GT(own->cpu_ns(), 0);
  EXPECT_EQ(own->answers(), 1u);
  EXPECT_EQ(dynamic_cast<hal::SelfPacedSampler*>(direct->get()), nullptr);
  s->reset();
  EXPECT_EQ(children_named("ingero-nvml"), 0);
}

// A library that crashes while it is polled: that poll and every later one return nothing, one
// event says what happened, and the caller goes on.
TEST(SamplerProcess, ACrashDuringAPollIsOneEventAndTheCallerGoesOn) {
  no_core_dumps();
  fake_nvml_script(std::string(kDevice) + "poll crash after_ms=300\n");
  auto s = hal::open_sampler_process(nvml_process(kFakeNvmlPartial));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ((*s)->poll(wall(), {}).size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  int64_t t1 = wall();
  EXPECT_TRUE((*s)->poll(t1, {}).empty());
  auto events = (*s)->take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "sampler_lost");
  EXPECT_EQ(events[0].source, "nvml");
  EXPECT_EQ(events[0].ts_ns, t1);
  EXPECT_EQ(events[0].code, 11);
  EXPECT_EQ(events[0].detail,
            kFakeNvmlPartial +
                " crashed (SIGSEGV) during a poll: no device figures from here on (it ran in a "
                "process of its own: the trace goes on)");
  EXPECT_EQ(children_named("ingero-nvml"), 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE((*s)->poll(wall(), {}).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  EXPECT_TRUE((*s)->take_events().empty());
}

// This process's threads named `comm`.
int threads_named(const std::string& comm) {
  int n = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(t.path() / "comm");
    std::string name;
    if (std::getline(f, name) && name == comm) ++n;
  }
  return n;
}

// As the tracer runs it: started, the process polls on its own clock and sends each answer
// unasked; no thread of the poller wakes for it; take() collects every answer, stamped on the
// session's clock; a poll asked at the end comes after them.
TEST(SamplerProcess, StartedItPollsOnItsOwnAndTheCallerOnlyCollects) {
  fake_nvml_script(kDevice);
  auto nvml = backends::make_nvml_backend(kFakeNvmlPartial, INGERO_BIN);
  hal::DeviceSamplerOptions o;
  o.poll_ns = 100'000'000;
  hal::TraceClock clock{.mono_to_wall_ns = -5'000'000'000};  // the session's, 5 s behind
  app::DevicePoller poller({nvml.get()}, o, clock);
  ASSERT_TRUE(poller.active());
  int64_t t0 = clock.now();
  poller.start();
  EXPECT_EQ(threads_named("ingero-gpu-poll"), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  auto b = poller.take();
  int64_t t1 = clock.now();
  std::vector<int64_t> stamps;
  for (const auto& x : b.samples)
    if (!x.pid) stamps.push_back(x.ts_ns);
  ASSERT_FALSE(stamps.empty());
  EXPECT_EQ(stamps.size(), poller.polls());  // one device sample an answer
  EXPECT_TRUE(std::is_sorted(stamps.begin(), stamps.end()));
  EXPECT_GE(stamps.front(), t0);
  EXPECT_LE(stamps.back(), t1);
  EXPECT_TRUE(b.events.empty());
  EXPECT_GT(poller.process_cpu_ns(), 0);
  poller.stop();
  int64_t t2 = clock.now();
  poller.poll_once(t2);
  auto end = poller.take();
  // The asked poll's sample, after those sent unasked before it (one sent while it was asked
  // may follow it).
  size_t asked = end.samples.size();
  for (size_t i = 0; i < end.samples.size(); ++i)
    if (!end.samples[i].pid && end.samples[i].ts_ns == t2) asked = i;
  ASSERT_LT(asked, end.samples.size());
  for (size_t i = 0; i < asked; ++i) EXPECT_LE(end.samples[i].ts_ns, t2);
}

// Started, a process that crashes or stops sending is found by take(): one event, and nothing
// after it. Silence is judged by when it last polled, never by when its answers were read.
TEST(SamplerProcess, StartedItIsLostWhenItCrashesOrFallsSilent) {
  no_core_dumps();
  for (const char* what : {"crash", "hang"}) {
    fake_nvml_script(std::string(kDevice) + "poll " + what + " after_ms=150\n");
    setenv("INGERO_NVML_POLL_LIMIT_MS", "300", 1);
    auto nvml = backends::make_nvml_backend(kFakeNvmlPartial, INGERO_BIN);
    hal::DeviceSamplerOptions o;
    o.poll_ns = 100'000'000;
    app::DevicePoller poller({nvml.get()}, o);  // opened here, with the limit
    unsetenv("INGERO_NVML_POLL_LIMIT_MS");
    poller.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    auto b = poller.take();
    // A take that reads answers waiting since before the silence judges it at the next one.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto next = poller.take();
    for (auto& e : next.events) b.events.push_back(e);
    EXPECT_TRUE(next.samples.empty()) << what;
    EXPECT_FALSE(b.samples.empty()) << what;
    ASSERT_EQ(b.events.size(), 1u) << what;
    EXPECT_EQ(b.events[0].kind, "sampler_lost");
    EXPECT_EQ(b.events[0].detail,
              kFakeNvmlPartial +
                  (what == std::string("crash")
                       ? " crashed (SIGSEGV) during a poll"
                       : " sent no figures for 400 ms (a GPU or driver that no longer answers); "
                         "its sampler process was stopped") +
                  ": no device figures from here on (it ran in a process of its own: the trace "
                  "goes on)");
    EXPECT_EQ(children_named("ingero-nvml"), 0);
    poller.poll_once(0);
    auto after = poller.take();
    EXPECT_TRUE(after.samples.empty());
    EXPECT_TRUE(after.events.empty());
  }
}

// A poll that never returns is given up after its limit, and the process is killed.
TEST(SamplerProcess, AHungPollIsStoppedAfterItsLimit) {
  fake_nvml_script(std::string(kDevice) + "poll hang after_ms=150\n");
  auto o = nvml_process(kFakeNvmlPartial);
  o.poll_limit_ns = 400'000'000;
  auto s = hal::open_sampler_process(o);
  ASSERT_TRUE(s) << s.error().message;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE((*s)->poll(wall(), {}).empty());
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(400));
  EXPECT_LT(took, std::chrono::seconds(5));
  auto events = (*s)->take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].code, 0);
  EXPECT_EQ(events[0].detail,
            kFakeNvmlPartial +
                " did not answer a poll within 400 ms (a GPU or driver that no longer answers); "
                "its sampler process was stopped: no device figures from here on (it ran in a "
                "process of its own: the trace goes on)");
  EXPECT_EQ(children_named("ingero-nvml"), 0);
}

// A library that crashes inside nvmlInit_v2 is an error to the caller, who lives on: `check`
// says it, through the backend.
TEST(SamplerProcess, ACrashWhileOpeningIsAnErrorNotADeath) {
  no_core_dumps();
  fake_nvml_script("init crash\n");
  auto s = hal::open_sampler_process(nvml_process(kFakeNvmlPartial));
  ASSERT_FALSE(s);
  const std::string said = kFakeNvmlPartial +
                           " crashed inside nvmlInit_v2 (SIGSEGV; a broken driver library); it "
                           "ran in a process of its own: nothing else is affected";
  EXPECT_EQ(s.error().message, said);
  auto lines = backends::make_nvml_backend(kFakeNvmlPartial, INGERO_BIN)->check("/sys");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].status, hal::CheckLine::Status::kOptional);
  EXPECT_EQ(lines[0].value, "unavailable");
  EXPECT_EQ(lines[0].detail.rfind(said + ": GPU busy is not measured", 0), 0u) << lines[0].detail;
  // A refusal is the library's own words, as in process.
  fake_nvml_script("init 9\n");
  auto r = hal::open_sampler_process(nvml_process(kFakeNvmlPartial));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)");
  EXPECT_EQ(children_named("ingero-nvml"), 0);
}

// Children that are not a sampler: one that exits, one that writes garbage (killed), one that
// says nothing within the limit (killed), a program that does not exist.
TEST(SamplerProcess, ChildrenThatDoNotAnswerAreSaidAndEnded) {
  hal::SamplerProcessOptions o;
  o.source = "nvml";
  o.library = "libX";
  o.open_call = "init";
  o.argv = {"/bin/sh", "-c", "exit 3"};
  auto a = hal::open_sampler_process(o);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message,
            "libX's sampler process exited with status 3 before it answered; it ran in a "
            "process of its own: nothing else is affected");
  o.argv = {"/bin/sh", "-c", "printf garbage >&3; exec sleep 30"};
  auto b = hal::open_sampler_process(o);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message,
            "libX's sampler process sent a malformed answer; it ran in a process of its own: "
            "nothing else is affected");
  o.argv = {"/bin/sh", "-c", "exec sleep 30"};
  o.open_limit_ns = 300'000'000;
  auto t0 = std::chrono::steady_clock::now();
  auto c = hal::open_sampler_process(o);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "libX did not open within 300 ms; its sampler process was stopped; it ran in a "
            "process of its own: nothing else is affected");
  EXPECT_EQ(children_named("sleep"), 0);
  o.argv = {"/nonexistent/ingero"};
  auto d = hal::open_sampler_process(o);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().message,
            "cannot start the sampler process /nonexistent/ingero: No such file or directory");
}

}  // namespace
}  // namespace ingero::test

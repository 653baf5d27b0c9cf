// Launches at one trap (capture/launch_nesting.h): a runtime launch and the driver launch it
// makes are one event, before and after the runtime's own launch probes are detached.
#include "capture/launch_nesting.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/trace_db.h"

namespace ingero::capture {
namespace {

constexpr uint32_t kPid = 4242, kTid = 4243;
constexpr uint64_t kApp = 0x5000, kRuntimeText = 0x1000;

// A process whose maps hold a runtime, a driver and the program; a launch probe in each
// library (ids 0: the runtime's cudaLaunchKernel, 1: the driver's cuLaunchKernel).
struct Fixture {
  std::string proc = test::temp_path("proc");
  hal::LocalHost host{proc};
  hal::ProbeTable table;
  hal::ProbeSpec rt_spec{.symbol = "cudaLaunchKernel", .kind = hal::EventKind::kLaunch};
  hal::ProbeSpec drv_spec{.symbol = "cuLaunchKernel", .kind = hal::EventKind::kLaunch};
  std::unique_ptr<LaunchNesting> nesting;
  std::vector<std::string> proven;
  std::vector<hal::Event> out;

  Fixture() {
    std::filesystem::create_directories(proc + "/" + std::to_string(kPid));
    std::ofstream(proc + "/" + std::to_string(kPid) + "/maps")
        << "1000-2000 r-xp 00000000 00:00 0 /fake/libcudart.so.13\n"
           "3000-4000 r-xp 00000000 00:00 0 /fake/libcuda.so.1\n"
           "5000-6000 r-xp 00000000 00:00 0 /fake/app\n";
    table.add({.spec = &rt_spec,
               .match = {.vendor = "nvidia", .api = "cuda_runtime", .layer = 1},
               .library = "/fake/libcudart.so.13",
               .symbol = "cudaLaunchKernel"});
    table.add({.spec = &drv_spec,
               .match = {.vendor = "nvidia", .api = "cuda_driver"},
               .library = "/fake/libcuda.so.1",
               .symbol = "cuLaunchKernel"});
    nesting = std::make_unique<LaunchNesting>(host, table);
    nesting->on_proven = [this](const std::string& lib) { proven.push_back(lib); };
  }
  hal::Event launch(uint32_t probe, uint64_t caller) {
    hal::Event ev;
    ev.pid = kPid;
    ev.tid = kTid;
    ev.kind = hal::EventKind::kLaunch;
    ev.timed = false;
    ev.caller = caller;
    ev.op = probe ? "cuLaunchKernel" : "cudaLaunchKernel";
    return ev;
  }
  LaunchNesting::Fate runtime() {
    auto ev = launch(0, kApp + 0x10);
    return nesting->on_launch(0, ev, out);
  }
  // Launches that nest, until the runtime is proven; what they made is dropped.
  void prove() {
    for (uint64_t i = 0; i <= LaunchNesting::kProofLaunches; ++i) {
      ASSERT_EQ(runtime(), LaunchNesting::Fate::kHeld);
      ASSERT_EQ(driver(), LaunchNesting::Fate::kFolded);
    }
    nesting->flush(out, true);
    ASSERT_EQ(proven, std::vector<std::string>{"/fake/libcudart.so.13"});
    out.clear();
  }
  LaunchNesting::Fate driver() {
    auto ev = launch(1, kRuntimeText + 0x40);
    auto f = nesting->on_launch(1, ev, out);
    if (f == LaunchNesting::Fate::kEmit) out.push_back(ev);
    return f;
  }
};

using Fate = LaunchNesting::Fate;

// The runtime is proven once its launches nested 2,000 times in a row; its probes go then. A
// runtime launch entered just before they went may have been read, held and released at the
// end of a read cycle before its driver launch was read: that driver launch, the thread's next
// record, is counted in it, not as a launch of its own (LaunchDetach.* saw 3,012 launches of
// 3,011 when the reader went on reading while the probes were detached).
TEST(LaunchNesting, ADriverLaunchOfARuntimeLaunchReleasedAtACyclesEndIsCountedOnce) {
  Fixture f;
  f.prove();
  if (HasFatalFailure()) return;

  // The last runtime launch before the probes went, released at the end of the cycle after the
  // one it was read in; then its driver launch.
  ASSERT_EQ(f.runtime(), Fate::kHeld);
  f.nesting->flush(f.out);
  EXPECT_TRUE(f.out.empty());
  f.nesting->flush(f.out);
  ASSERT_EQ(f.out.size(), 1u);
  EXPECT_EQ(f.out[0].op, "cudaLaunchKernel");
  EXPECT_EQ(f.driver(), Fate::kFolded);
  EXPECT_EQ(f.out.size(), 1u);

  // From then on a driver launch made from the runtime's text is the runtime's launch.
  EXPECT_EQ(f.driver(), Fate::kEmit);
  ASSERT_EQ(f.out.size(), 2u);
  EXPECT_EQ(f.out[1].op, "cudaLaunchKernel");
  EXPECT_EQ(f.out[1].nested, 1u);
  EXPECT_EQ(f.driver(), Fate::kEmit);
  EXPECT_EQ(f.out.size(), 3u);
  EXPECT_EQ(f.nesting->counters().renamed, 2u);
}

// A launch made straight into the driver (cuDNN's private runtime, cublasLt: the program's
// text calls cuLaunchKernel) made no driver launch of its own. Released at the end of a read
// cycle, it does not take the thread's next launch, a runtime launch after the detach (a
// driver launch from the runtime's text), for one it made: on an H200, ResNet-18 lost 40 of
// its 264 runtime launches a step so, each one after a cuDNN convolution.
TEST(LaunchNesting, ARuntimeLaunchAfterADirectDriverLaunchReleasedAtACyclesEndIsItsOwn) {
  Fixture f;
  f.prove();
  if (HasFatalFailure()) return;

  auto direct = f.launch(1, kApp + 0x20);
  ASSERT_EQ(f.nesting->on_launch(1, direct, f.out), Fate::kHeld);
  f.nesting->flush(f.out);
  f.nesting->flush(f.out);
  ASSERT_EQ(f.out.size(), 1u);
  EXPECT_EQ(f.out[0].op, "cuLaunchKernel");
  EXPECT_EQ(f.out[0].nested, 0u);

  EXPECT_EQ(f.driver(), Fate::kEmit);
  ASSERT_EQ(f.out.size(), 2u);
  EXPECT_EQ(f.out[1].op, "cudaLaunchKernel");
  EXPECT_EQ(f.out[1].nested, 1u);
  EXPECT_EQ(f.nesting->counters().renamed, 1u);
}

// The same within a read cycle: the direct driver launch is still held when the thread's next
// launch, a driver launch from the runtime's text after the detach, is read. It made none, so
// that one is the runtime's own launch, not counted in it: the stand-in's ResNet-18 mix
// (bench/lookup_loop.c, `mix`) lost the first runtime launch after each step's direct launches,
// 2,899 of 792,000 in 3,000 steps, silently.
TEST(LaunchNesting, ARuntimeLaunchAfterAHeldDirectDriverLaunchIsItsOwn) {
  Fixture f;
  f.prove();
  if (HasFatalFailure()) return;
  uint64_t folded = f.nesting->counters().folded;

  for (int step = 0; step < 3; ++step) {
    auto direct = f.launch(1, kApp + 0x20);
    ASSERT_EQ(f.nesting->on_launch(1, direct, f.out), Fate::kHeld);
    EXPECT_EQ(f.driver(), Fate::kEmit);
    EXPECT_EQ(f.driver(), Fate::kEmit);
  }
  f.nesting->flush(f.out, true);
  ASSERT_EQ(f.out.size(), 9u);
  for (size_t i = 0; i < 9; i += 3) {
    EXPECT_EQ(f.out[i].op, "cuLaunchKernel") << i;
    EXPECT_EQ(f.out[i].nested, 0u) << i;
    for (size_t k = i + 1; k < i + 3; ++k) {
      EXPECT_EQ(f.out[k].op, "cudaLaunchKernel") << k;
      EXPECT_EQ(f.out[k].nested, 1u) << k;
    }
  }
  EXPECT_EQ(f.nesting->counters().renamed, 6u);
  EXPECT_EQ(f.nesting->counters().folded, folded);
}

// A record of another kind between the released launch and the driver launch: the driver
// launch is not that launch's (it would have come first), and is the runtime's own.
TEST(LaunchNesting, AnotherRecordOfTheThreadEndsTheWait) {
  Fixture f;
  f.prove();
  if (HasFatalFailure()) return;
  ASSERT_EQ(f.runtime(), Fate::kHeld);
  f.nesting->flush(f.out);
  f.nesting->flush(f.out);
  f.nesting->before_call(kTid, f.out);
  EXPECT_EQ(f.driver(), Fate::kEmit);
  EXPECT_EQ(f.out.size(), 2u);
}

// Where a launch was made from is looked up once per mapping, and looked up again once another
// library's launch probes are seen: a driver launch made from the runtime's text before the
// runtime sent any launch (its mapping then named no runtime) does not hide the runtime from
// the driver launches after it.
TEST(LaunchNesting, ARuntimeSeenAfterItsTextWasLookedUpIsFoundThere) {
  Fixture f;
  EXPECT_EQ(f.driver(), Fate::kHeld);   // no runtime known yet: a launch of its own, held
  EXPECT_EQ(f.runtime(), Fate::kHeld);  // the runtime's first launch releases it
  ASSERT_EQ(f.out.size(), 1u);
  EXPECT_EQ(f.out[0].op, "cuLaunchKernel");
  EXPECT_EQ(f.driver(), Fate::kFolded);  // made from the runtime's text: counted in its launch
  f.nesting->flush(f.out, true);
  ASSERT_EQ(f.out.size(), 2u);
  EXPECT_EQ(f.out[1].op, "cudaLaunchKernel");
  EXPECT_EQ(f.out[1].nested, 1u);
  EXPECT_EQ(f.nesting->counters().folded, 1u);
}

// Where a launch was made from cannot be placed (its process's maps were gone when its records
// were read), a launch is taken for the one the launch held for its thread made only if that
// one's library is the layer above (hal::LibraryMatch::layer): a driver launch after a runtime
// launch. A runtime launch after a driver launch is a launch of its own.
TEST(LaunchNesting, ByOrderOnlyALowerLayersLaunchFoldsIntoAnUpperOnes) {
  Fixture f;
  constexpr uint64_t kUnmapped = 0x9000;
  auto drv = f.launch(1, kUnmapped);
  EXPECT_EQ(f.nesting->on_launch(1, drv, f.out), Fate::kHeld);
  auto rt = f.launch(0, kUnmapped);
  EXPECT_EQ(f.nesting->on_launch(0, rt, f.out), Fate::kHeld);  // itself, not in the driver's
  ASSERT_EQ(f.out.size(), 1u);
  EXPECT_EQ(f.out[0].op, "cuLaunchKernel");
  EXPECT_EQ(f.out[0].nested, 0u);
  auto made = f.launch(1, kUnmapped);  // the driver launch the runtime launch made
  EXPECT_EQ(f.nesting->on_launch(1, made, f.out), Fate::kFolded);
  f.nesting->flush(f.out, true);
  ASSERT_EQ(f.out.size(), 2u);
  EXPECT_EQ(f.out[1].op, "cudaLaunchKernel");
  EXPECT_EQ(f.out[1].nested, 1u);
  EXPECT_EQ(f.nesting->counters().folded_by_order, 1u);
}

// A runtime launch read at the end of a read cycle, whose driver launch (written microseconds
// later) is read in the next cycle: the launch is held across that cycle's end and counts it.
// Released at the first cycle's end, it went out without its nested call, which was then taken
// for one already counted (TraceCuda.RuntimeLaunchesCountOnceDirectDriverLaunchesCount read 39
// nested calls of 40, once in a CI run).
TEST(LaunchNesting, ALaunchReadAtACyclesEndCountsTheDriverLaunchReadInTheNext) {
  Fixture f;
  ASSERT_EQ(f.runtime(), Fate::kHeld);
  f.nesting->flush(f.out);  // the cycle it was read in ends
  EXPECT_TRUE(f.out.empty());
  EXPECT_EQ(f.driver(), Fate::kFolded);
  f.nesting->flush(f.out);
  ASSERT_EQ(f.out.size(), 1u);
  EXPECT_EQ(f.out[0].op, "cudaLaunchKernel");
  EXPECT_EQ(f.out[0].nested, 1u);
  // Held no longer than the cycle after the one it was read in.
  ASSERT_EQ(f.runtime(), Fate::kHeld);
  f.nesting->flush(f.out);
  f.nesting->flush(f.out);
  ASSERT_EQ(f.out.size(), 2u);
  EXPECT_EQ(f.out[1].nested, 0u);
  // At the session's end, everything at once.
  ASSERT_EQ(f.runtime(), Fate::kHeld);
  f.nesting->flush(f.out, true);
  EXPECT_EQ(f.out.size(), 3u);
}

// Without uprobe sessions a launch is timed in a window where the thread's gap since its last
// timed launch ran out (bpf/call_paths.h): between a runtime launch's entry and its driver
// launch's, the runtime launch goes untimed and the driver launch it makes is timed. Folded
// into the runtime launch, its timing is the launch's, to the driver call's return; a failed
// driver call's code is the driver's, not the runtime's, and its launch stays untimed.
TEST(LaunchNesting, ADriverLaunchsTimingIsTheUntimedRuntimeLaunchsItFoldsInto) {
  Fixture f;
  auto rt = f.launch(0, kApp + 0x10);
  rt.ts_ns = 1'000;
  ASSERT_EQ(f.nesting->on_launch(0, rt, f.out), Fate::kHeld);
  auto drv = f.launch(1, kRuntimeText + 0x40);
  drv.ts_ns = 1'300;
  drv.dur_ns = 2'000;
  drv.timed = true;
  drv.has_ret = true;
  drv.off_cpu_ns = 700;
  drv.switches = 1;
  EXPECT_EQ(f.nesting->on_launch(1, drv, f.out), Fate::kFolded);

  auto failed_rt = f.launch(0, kApp + 0x10);
  failed_rt.ts_ns = 5'000;
  ASSERT_EQ(f.nesting->on_launch(0, failed_rt, f.out), Fate::kHeld);
  auto failed = drv;
  failed.ts_ns = 5'100;
  failed.ret = 1;  // CUDA_ERROR_INVALID_VALUE
  EXPECT_EQ(f.nesting->on_launch(1, failed, f.out), Fate::kFolded);
  f.nesting->flush(f.out, true);

  ASSERT_EQ(f.out.size(), 2u);
  EXPECT_TRUE(f.out[0].timed);
  EXPECT_TRUE(f.out[0].has_ret);
  EXPECT_EQ(f.out[0].ret, 0);
  EXPECT_EQ(f.out[0].dur_ns, 2'300u);  // from the runtime's entry to the driver's return
  EXPECT_EQ(f.out[0].off_cpu_ns, 700u);
  EXPECT_EQ(f.out[0].switches, 1u);
  EXPECT_EQ(f.out[0].nested, 1u);
  EXPECT_FALSE(f.out[1].timed);
  EXPECT_FALSE(f.out[1].has_ret);
  EXPECT_EQ(f.out[1].dur_ns, 0u);
  EXPECT_EQ(f.out[1].nested, 1u);
  EXPECT_EQ(f.nesting->counters().timed_by_driver, 1u);
}

}  // namespace
}  // namespace ingero::capture

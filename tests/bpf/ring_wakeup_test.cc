// The reader is woken only while it waits (bpf/shared.bpf.h: ingero_wakeup_flags). A wake-up
// is an irq_work, raised by a self-IPI: in a VM, an exit per wake-up. While the reader was
// draining the rings, the programs asked for one at every 16th launch of a thread whenever more
// than 256 KiB was queued: ~40 ns a launch on bench/launch_cost.sh.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

#include "probe/bpf_session.h"
#include "probe/ring_reader.h"
#include "tests/bpf/self_probe.h"
#include "tests/support/trace_db.h"

// What the test probes, as a launch: a function of this binary.
extern "C" __attribute__((noinline, used, visibility("default"))) int ingero_test_wakeup_launch(
    int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace ingero::test {
namespace {

// This CPU's count of irq_work interrupts (/proc/interrupts, "IWI").
uint64_t irq_work_interrupts(int cpu) {
  std::ifstream in("/proc/interrupts");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string name;
    s >> name;
    if (name != "IWI:") continue;
    uint64_t v = 0;
    for (int i = 0; i <= cpu && (s >> v); ++i) {
    }
    return v;
  }
  return 0;
}

struct Probed {
  std::unique_ptr<hal::BpfSession> session;
  std::vector<hal::Link> links;
  std::unique_ptr<hal::RingReader> reader;
  uint64_t records = 0;
};

// ingero's call program on ingero_test_wakeup_launch, as an untimed launch (one record a call at
// entry, one in 32 timed); a 4 MiB calls ring, which 20,000 launches do not fill.
void attach(Probed& p) {
  hal::BpfConfig cfg;
  cfg.rings = {1u << 22, 1u << 16, 1u << 16};
  cfg.stacks = false;
  auto session = hal::BpfSession::open(cfg);
  ASSERT_TRUE(session) << session.error().message;
  p.session = std::move(*session);
  constexpr hal::ProbeSpec kLaunch{.symbol = "ingero_test_wakeup_launch",
                                   .kind = hal::EventKind::kLaunch};
  std::string why;
  p.links = attach_to_self(*p.session, kLaunch, &why);
  ASSERT_FALSE(p.links.empty()) << why;
  uint64_t* records = &p.records;
  auto reader = hal::RingReader::create(p.session->calls_fd(), -1, -1,
                                        [records](const void*, size_t) { ++*records; });
  ASSERT_TRUE(reader) << reader.error().message;
  p.reader = std::move(*reader);
  p.reader->set_busy_flag(p.session->reader_busy_flag());
}

void launch(int n) {
  volatile int sink = 0;
  for (int i = 0; i < n; ++i) sink = ingero_test_wakeup_launch(i);
  (void)sink;
}

// 20,000 launches queue ~3.4 MiB: past 256 KiB, each 16th launch of the thread asks whether to
// wake the reader. Asked while the reader is busy, the answer is no: no irq_work is raised.
// Asked while it waits, it is woken once: the launch that wakes it marks it busy, and the ones
// after it raise nothing until the reader waits again (~1,150 wake-ups before, one at each
// check past the threshold).
TEST(RingWakeup, AWaitingReaderIsWokenOnceAndNeverWhileBusy) {
  REQUIRE_BPF();
  int cpu = sched_getcpu();
  ASSERT_GE(cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  Probed p;
  attach(p);
  if (HasFatalFailure()) return;
  launch(1);  // the thread's first record carries its name, and wakes the reader at once
  ASSERT_TRUE(p.reader->drain());

  volatile uint32_t* busy = p.session->reader_busy_flag();
  *busy = 1;
  uint64_t before = irq_work_interrupts(cpu);
  launch(20'000);
  uint64_t while_busy = irq_work_interrupts(cpu) - before;
  ASSERT_TRUE(p.reader->drain());

  *busy = 0;
  before = irq_work_interrupts(cpu);
  launch(20'000);
  uint64_t while_waiting = irq_work_interrupts(cpu) - before;
  EXPECT_EQ(*busy, 1u) << "the launch that woke the reader did not mark it busy";
  ASSERT_TRUE(p.reader->drain());
  EXPECT_EQ(p.records, 40'001u);
  // Busy: none of ours. Waiting: ours, once (the CPU's other irq_work, if any, is a handful).
  EXPECT_LE(while_busy, 10u);
  EXPECT_GE(while_waiting, 1u);
  EXPECT_LE(while_waiting, 10u);
}

// poll() clears the flag while it waits and sets it once woken; a reader waiting with a long
// timeout is woken by the programs as soon as more than 256 KiB is queued.
TEST(RingWakeup, AWaitingReaderIsWokenAndMarksItselfBusy) {
  REQUIRE_BPF();
  Probed p;
  attach(p);
  if (HasFatalFailure()) return;
  launch(1);
  ASSERT_TRUE(p.reader->drain());
  volatile uint32_t* busy = p.session->reader_busy_flag();
  *busy = 1;
  auto t0 = std::chrono::steady_clock::now();
  auto polled = std::async(std::launch::async, [&] { return p.reader->poll(30'000); });
  while (*busy != 0) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10))
        << "poll() did not clear the flag while it waited";
    usleep(1000);
  }
  launch(20'000);
  auto n = polled.get();
  auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*busy, 1u);
  // Woken, not timed out: 30 s is the timeout.
  EXPECT_LT(waited, std::chrono::seconds(20));
  ASSERT_TRUE(p.reader->drain());
  EXPECT_EQ(p.records, 20'001u);
}

}  // namespace
}  // namespace ingero::test

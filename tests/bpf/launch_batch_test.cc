// Untimed launches gathered in their CPU's batch (bpf/launch_batch.h), on real probes: a batch
// goes to the ring when a record of its own thread must (its first launch, a timed call), when
// user space ships it (BpfSession::ship_launch_batches), and when its CPU switches tasks (the
// scheduler's switch program, attached in the second test only).
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "bpf/ingero_records.h"
#include "hal/call_record.h"
#include "kernelside/host_programs.h"
#include "probe/ring_reader.h"
#include "tests/bpf/self_probe.h"
#include "tests/support/trace_db.h"

// A launch API's shape: six register arguments, three on the stack (cuLaunchKernel's).
extern "C" __attribute__((noinline, used, visibility("default"))) uint64_t ingero_test_batched9(
    uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t s0,
    uint64_t s1, uint64_t s2) {
  asm volatile("" ::: "memory");
  return a0 + a1 + a2 + a3 + a4 + a5 + s0 + s1 + s2;
}

namespace ingero::test {
namespace {

// Keeps the calling thread on the CPU it runs on, so that its launches share one batch.
class PinnedHere {
 public:
  PinnedHere() {
    sched_getaffinity(0, sizeof(old_), &old_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof(one), &one);
  }
  ~PinnedHere() { sched_setaffinity(0, sizeof(old_), &old_); }

 private:
  cpu_set_t old_;
};

// What the ring held, each record as the launches it carries (a call record: one).
struct Record {
  uint32_t type = 0;
  std::vector<uint64_t> first_args;  // each launch's first argument, in order
};

// A session with launches in batches, the probe on ingero_test_batched9, and its calls ring read
// into `ring`; with `host`, the scheduler's programs attached too.
struct Batched {
  std::unique_ptr<hal::BpfSession> session;
  std::vector<hal::Link> links;
  std::unique_ptr<kernelside::HostPrograms> host;
  std::unique_ptr<hal::RingReader> reader;
  std::vector<Record> ring;

  void open(uint32_t launch_timing_every, bool with_host) {
    hal::BpfConfig cfg;
    cfg.rings = {1u << 16, 1u << 16, 1u << 16};
    cfg.host_context = true;
    cfg.launch_batches = true;
    cfg.launch_timing_every = launch_timing_every;
    auto s = hal::BpfSession::open(cfg);
    ASSERT_TRUE(s) << s.error().message;
    session = std::move(*s);
    ASSERT_TRUE(session->launch_batches());
    if (with_host) {
      host = std::make_unique<kernelside::HostPrograms>(*session);
      for (const auto& [program, st] : host->attach()) ASSERT_TRUE(st) << program;
    }
    const hal::ProbeSpec spec{.symbol = "ingero_test_batched9",
                              .kind = hal::EventKind::kLaunch,
                              .args = {.stack_words = 3},
                              .fields = {{hal::Field::kStream, hal::reg(5)}}};
    std::string why;
    links = attach_to_self(*session, spec, &why);
    ASSERT_FALSE(links.empty()) << why;
    auto r = hal::RingReader::create(session->calls_fd(), -1, -1,
                                     [this](const void* d, size_t size) { keep(d, size); });
    ASSERT_TRUE(r) << r.error().message;
    reader = std::move(*r);
  }
  void keep(const void* d, size_t size) {
    Record r;
    std::memcpy(&r.type, d, sizeof(r.type));
    auto one = [&](const void* l, size_t n) {
      hal::CallRecord c;
      ASSERT_TRUE(hal::unpack_call(l, n, c));
      r.first_args.push_back(c.regs[0]);
    };
    if (r.type == INGERO_REC_LAUNCH_BATCH)
      EXPECT_TRUE(hal::for_each_batched_launch(d, size, one));
    else
      one(d, size);
    ring.push_back(r);
  }
  void read() { ASSERT_TRUE(reader->drain()); }
};

void launch(uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; ++i)
    EXPECT_EQ(ingero_test_batched9(i, 1, 2, 3, 4, 5, 6, 7, 8), 36 + i);
}

// The scheduler's switch program is not attached: nothing ships a batch but its thread's own
// records and user space.
TEST(LaunchBatches, WaitInTheirCPUsBatchUntilARecordOfTheirThreadOrUserSpaceShipsThem) {
  REQUIRE_BPF();
  Batched b;
  b.open(/*launch_timing_every=*/4, /*with_host=*/false);  // launches 0 and 4 are timed
  if (HasFatalFailure()) return;
  auto& ring = b.ring;
  {
    PinnedHere pinned;
    launch(0, 7);
    b.read();
    // Launch 0 timed; 1-3 batched, shipped before launch 4's own record; 5 and 6 wait.
    ASSERT_EQ(ring.size(), 3u);
    EXPECT_EQ(ring[0].type, uint32_t(INGERO_REC_CALL));
    EXPECT_EQ(ring[0].first_args, (std::vector<uint64_t>{0}));
    EXPECT_EQ(ring[1].type, uint32_t(INGERO_REC_LAUNCH_BATCH));
    EXPECT_EQ(ring[1].first_args, (std::vector<uint64_t>{1, 2, 3}));
    EXPECT_EQ(ring[2].type, uint32_t(INGERO_REC_CALL));
    EXPECT_EQ(ring[2].first_args, (std::vector<uint64_t>{4}));
    // A batch younger than asked stays; then it goes.
    auto young = b.session->ship_launch_batches(uint64_t(60) * 1'000'000'000);
    ASSERT_TRUE(young) << young.error().message;
    EXPECT_EQ(*young, 0);
    b.read();
    EXPECT_EQ(ring.size(), 3u);
    auto all = b.session->ship_launch_batches(0);
    ASSERT_TRUE(all) << all.error().message;
    EXPECT_EQ(*all, 1);
    b.read();
  }
  ASSERT_EQ(ring.size(), 4u);
  EXPECT_EQ(ring[3].type, uint32_t(INGERO_REC_LAUNCH_BATCH));
  EXPECT_EQ(ring[3].first_args, (std::vector<uint64_t>{5, 6}));
  auto s = b.session->stats();
  EXPECT_EQ(s[INGERO_STAT_CALLS], 7u);
  EXPECT_EQ(s[INGERO_STAT_LAUNCH_BATCHES], 2u);
  EXPECT_EQ(s[INGERO_STAT_UNTIMED], 5u);
  EXPECT_EQ(s[INGERO_STAT_RINGBUF_DROPS], 0u);
  // Nothing waits any more.
  auto none = b.session->ship_launch_batches(0);
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0);
}

// With the scheduler's switch program: a thread that sleeps after its launches leaves its CPU,
// and its launches are on the ring before it runs again, with nothing for user space to ship.
TEST(LaunchBatches, GoToTheRingWhenTheirThreadLeavesTheCPU) {
  REQUIRE_BPF();
  Batched b;
  b.open(/*launch_timing_every=*/0, /*with_host=*/true);  // none timed
  if (HasFatalFailure()) return;
  {
    PinnedHere pinned;
    launch(0, 6);
    usleep(2000);  // off the CPU: the switch ships the batch
  }
  b.read();
  // The thread's first launch carries its name and goes at once; the other five waited for a
  // switch (the sleep's, or one before it where the thread was preempted).
  ASSERT_GE(b.ring.size(), 2u);
  EXPECT_EQ(b.ring[0].first_args, (std::vector<uint64_t>{0}));
  std::vector<uint64_t> after;
  for (size_t i = 0; i < b.ring.size(); ++i) {
    EXPECT_EQ(b.ring[i].type, uint32_t(INGERO_REC_LAUNCH_BATCH)) << i;
    if (i) after.insert(after.end(), b.ring[i].first_args.begin(), b.ring[i].first_args.end());
  }
  EXPECT_EQ(after, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  auto none = b.session->ship_launch_batches(0);
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0) << "nothing left for user space";
  auto s = b.session->stats();
  EXPECT_EQ(s[INGERO_STAT_CALLS], 6u);
  EXPECT_EQ(s[INGERO_STAT_LAUNCH_BATCHES], uint64_t(b.ring.size()));
}

}  // namespace
}  // namespace ingero::test

// The ring buffer consumer (probe/bpf_ring.h) over memory laid out as the kernel lays out a
// BPF ring: records in order, whole where they run past the end of the data, none while one
// ahead of them is still being written, discarded ones skipped, and the consumer's position
// moved past every record read.
#include "probe/bpf_ring.h"

#include <gtest/gtest.h>
#include <linux/bpf.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "probe/bpf_session.h"

namespace ingero::hal {
namespace {

// A producer writing records as the kernel does, into a data area of `size` bytes.
struct FakeRing {
  explicit FakeRing(uint64_t size) : data(size) {
    view.consumer_pos = &consumer;
    view.producer_pos = &producer;
    view.data = data.data();
    view.size = size;
  }
  // Reserves and writes a record; returns where its header is. `flags` stay on the header
  // (BPF_RINGBUF_BUSY_BIT: not committed yet).
  uint64_t produce(const std::string& payload, uint32_t flags = 0) {
    uint64_t at = producer;
    uint64_t total = (payload.size() + BPF_RINGBUF_HDR_SZ + 7) & ~uint64_t(7);
    EXPECT_LE(at + total - consumer, data.size()) << "the test overfilled its ring";
    uint32_t hdr[2] = {uint32_t(payload.size()) | flags, 0};
    std::memcpy(&data[at & (data.size() - 1)], hdr, sizeof hdr);
    for (size_t i = 0; i < payload.size(); ++i)
      data[(at + BPF_RINGBUF_HDR_SZ + i) & (data.size() - 1)] = uint8_t(payload[i]);
    producer += total;
    return at;
  }
  void set_header(uint64_t at, uint32_t len) {
    std::memcpy(&data[at & (data.size() - 1)], &len, sizeof len);
  }
  int consume(std::vector<std::string>& got) {
    return consume_ring(view, scratch, [&](const void* d, size_t n) {
      got.emplace_back(static_cast<const char*>(d), n);
    });
  }
  std::vector<uint8_t> data;
  uint64_t consumer = 0, producer = 0;
  RingView view;
  std::vector<uint8_t> scratch;
};

TEST(BpfRing, ARecordRunningPastTheEndComesWhole) {
  FakeRing r(64);
  std::vector<std::string> got;
  ASSERT_EQ(r.produce(std::string(36, 'a')), 0u);  // 48 bytes with its header
  ASSERT_EQ(r.consume(got), 1);
  ASSERT_EQ(r.produce("0123456789abcdefghij"), 48u);  // header at 48, payload 56..75: wraps
  ASSERT_EQ(r.produce("xy"), 80u);
  ASSERT_EQ(r.consume(got), 2);
  EXPECT_EQ(got, (std::vector<std::string>{std::string(36, 'a'), "0123456789abcdefghij", "xy"}));
  EXPECT_EQ(r.consumer, r.producer);
  EXPECT_EQ(r.consumer, 96u);
}

TEST(BpfRing, NothingIsReadPastARecordStillBeingWritten) {
  FakeRing r(256);
  std::vector<std::string> got;
  r.produce("one");
  uint64_t busy = r.produce("two", BPF_RINGBUF_BUSY_BIT);
  r.produce("three");
  EXPECT_EQ(r.consume(got), 1);
  EXPECT_EQ(got, std::vector<std::string>{"one"});
  EXPECT_EQ(r.consumer, busy);  // the producer may reuse "one"'s space, not "two"'s
  r.set_header(busy, 3);        // committed
  EXPECT_EQ(r.consume(got), 2);
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(r.consumer, r.producer);
}

TEST(BpfRing, DiscardedRecordsAreSkippedAndTheirSpaceGivenBack) {
  FakeRing r(256);
  std::vector<std::string> got;
  r.produce("kept");
  r.produce("thrown away", BPF_RINGBUF_DISCARD_BIT);
  r.produce("kept too");
  EXPECT_EQ(r.consume(got), 2);
  EXPECT_EQ(got, (std::vector<std::string>{"kept", "kept too"}));
  EXPECT_EQ(r.consumer, r.producer);
}

// The space read is given back a sixteenth of the ring at a time while a pass reads, then
// whole when it ends: not after every record, whose write the producer's next reservation would
// read from the reader's CPU.
TEST(BpfRing, SpaceIsGivenBackASixteenthAtATimeAndWholeAtTheEnd) {
  FakeRing r(1024);
  ASSERT_EQ(release_step(1024), 64u);
  for (int i = 0; i < 64; ++i) r.produce(std::string(8, char('a' + i % 26)));  // 16 bytes each
  std::vector<uint64_t> seen;
  EXPECT_EQ(
      consume_ring(r.view, r.scratch, [&](const void*, size_t) { seen.push_back(r.consumer); }),
      64);
  std::vector<uint64_t> want;
  for (uint64_t i = 0; i < 64; ++i) want.push_back(i * 16 / 64 * 64);
  EXPECT_EQ(seen, want);
  EXPECT_EQ(r.consumer, 1024u);
  // A pass that stops at a record still being written gives back what it read before it.
  r.produce("done");
  uint64_t busy = r.produce("busy", BPF_RINGBUF_BUSY_BIT);
  std::vector<std::string> got;
  EXPECT_EQ(r.consume(got), 1);
  EXPECT_EQ(r.consumer, busy);
}

// Many records of every size through a small ring, produced and consumed in bursts: each one
// arrives once, whole and in order, wherever it fell.
TEST(BpfRing, TenThousandRecordsThroughARingOf256BytesArriveInOrder) {
  FakeRing r(256);
  std::mt19937 rng(7);
  std::vector<std::string> sent, got;
  size_t wrapped = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string p = std::to_string(i) + ":";
    p.resize(p.size() + rng() % 90, char('a' + i % 26));
    uint64_t total = (p.size() + BPF_RINGBUF_HDR_SZ + 7) & ~uint64_t(7);
    if (r.producer + total - r.consumer > r.data.size()) r.consume(got);
    uint64_t at = r.produce(p);
    if ((at & 255) + BPF_RINGBUF_HDR_SZ + p.size() > 256) ++wrapped;
    sent.push_back(p);
    if (rng() % 4 == 0) r.consume(got);
  }
  r.consume(got);
  EXPECT_EQ(got, sent);
  EXPECT_GT(wrapped, 1000u);  // the case this is about, often
}

// cli.md, --ringbuf-mb: by default the calls ring is 1 MiB per CPU, rounded up to a power of
// two, between 8 and 64 MiB; the stack and host rings a quarter of it, between 2 and 16 MiB. A
// size given scales the others the same way.
TEST(BpfRing, TheRingsAreSizedByTheCpusOrTheSizeGiven) {
  constexpr uint32_t kMiB = 1u << 20;
  struct Case {
    int cpus;
    uint32_t mb, calls, rest;
  };
  for (const Case& c : std::vector<Case>{{1, 0, 8, 2},
                                         {2, 0, 8, 2},
                                         {12, 0, 16, 4},
                                         {32, 0, 32, 8},
                                         {96, 0, 64, 16},
                                         {512, 0, 64, 16},
                                         {2, 1, 1, 2},
                                         {2, 256, 256, 16},
                                         {2, 1024, 1024, 16}}) {
    RingSizes r = ring_sizes(c.cpus, c.mb);
    EXPECT_EQ(r.calls, c.calls * kMiB) << c.cpus << " CPUs, " << c.mb << " MiB";
    EXPECT_EQ(r.aux, c.rest * kMiB) << c.cpus << " CPUs, " << c.mb << " MiB";
    EXPECT_EQ(r.host, c.rest * kMiB) << c.cpus << " CPUs, " << c.mb << " MiB";
  }
}

}  // namespace
}  // namespace ingero::hal

// An untimed launch's record on the calls ring (bpf/call_emit.h: launch_at_entry): it reserves
// its short header (ingero_launch_rec), six register words, at most three stack words and its
// caller (120 bytes: 168 when room was kept for six stack words, 144 with the call record's
// header), and a launch recipe with more stack words takes the general path with every word
// kept, in a call record.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bpf/ingero_records.h"
#include "hal/call_record.h"
#include "probe/ring_reader.h"
#include "tests/bpf/self_probe.h"
#include "tests/support/trace_db.h"

// A launch API's shape: six register arguments, three on the stack (cuLaunchKernel's).
extern "C" __attribute__((noinline, used, visibility("default"))) uint64_t ingero_test_launch9(
    uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t s0,
    uint64_t s1, uint64_t s2) {
  asm volatile("" ::: "memory");
  return a0 + a1 + a2 + a3 + a4 + a5 + s0 + s1 + s2;
}

// One with six on the stack.
extern "C" __attribute__((noinline, used, visibility("default"))) uint64_t ingero_test_launch12(
    uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t s0,
    uint64_t s1, uint64_t s2, uint64_t s3, uint64_t s4, uint64_t s5) {
  asm volatile("" ::: "memory");
  return a0 + a1 + a2 + a3 + a4 + a5 + s0 + s1 + s2 + s3 + s4 + s5;
}

namespace ingero::test {
namespace {

struct Shipped {
  std::vector<std::vector<uint8_t>> records;
};

// Attaches a launch recipe of `stack_words` to `symbol`, runs `calls` and returns the records.
template <class F>
void launches(const char* symbol, uint8_t stack_words, F&& calls, Shipped& out) {
  auto session = open_small_session();
  ASSERT_TRUE(session) << session.error().message;
  const hal::ProbeSpec spec{.symbol = symbol,
                            .kind = hal::EventKind::kLaunch,
                            .args = {.stack_words = stack_words},
                            .fields = {{hal::Field::kStream, hal::reg(5)}}};
  std::string why;
  auto links = attach_to_self(**session, spec, &why);
  ASSERT_FALSE(links.empty()) << why;
  auto reader =
      hal::RingReader::create((*session)->calls_fd(), -1, -1, [&](const void* d, size_t size) {
        auto* p = static_cast<const uint8_t*>(d);
        out.records.emplace_back(p, p + size);
      });
  ASSERT_TRUE(reader) << reader.error().message;
  calls();
  ASSERT_TRUE((*reader)->drain());
}

uint32_t type(const std::vector<uint8_t>& rec) {
  uint32_t t = 0;
  std::memcpy(&t, rec.data(), sizeof(t));
  return t;
}

hal::CallRecord unpacked(const std::vector<uint8_t>& rec) {
  hal::CallRecord r;
  EXPECT_TRUE(hal::unpack_call(rec.data(), rec.size(), r));
  return r;
}

// Four launches, call k's first argument k: the thread's first is timed, the next three (one in
// 32 is) are not, and carry every register word and `nstack` stack words, stack word j of
// call k being stack(j, k), in records of type `untimed`.
template <class Stack>
void expect_untimed(const Shipped& s, uint8_t nstack, uint32_t untimed, Stack&& stack) {
  ASSERT_EQ(s.records.size(), 4u);
  EXPECT_EQ(type(s.records[0]), uint32_t(INGERO_REC_CALL)) << "the thread's first is timed";
  for (size_t k = 1; k < 4; ++k) {
    EXPECT_EQ(type(s.records[k]), untimed) << k;
    hal::CallRecord r = unpacked(s.records[k]);
    EXPECT_TRUE(r.hdr.flags & INGERO_CALL_ENTRY_ONLY) << k;
    ASSERT_EQ(r.hdr.nregs, 6) << k;
    ASSERT_EQ(r.hdr.nstack, nstack) << k;
    EXPECT_EQ(r.regs[0], k);
    EXPECT_EQ(r.regs[5], 5u);
    for (uint64_t j = 0; j < nstack; ++j) EXPECT_EQ(r.stack[j], stack(j, k)) << k;
  }
}

TEST(LaunchRecords, AnUntimedLaunchReservesOnlyItsHeaderWordsAndCaller) {
  REQUIRE_BPF();
  Shipped s;
  launches(
      "ingero_test_launch9", 3,
      [] {
        for (uint64_t i = 0; i < 4; ++i)
          EXPECT_EQ(ingero_test_launch9(i, 1, 2, 3, 4, 5, 100 + i, 200 + i, 300 + i), 615 + 4 * i);
      },
      s);
  expect_untimed(s, 3, INGERO_REC_LAUNCH, [](uint64_t j, uint64_t k) { return 100 * (j + 1) + k; });
  for (size_t k = 1; k < s.records.size(); ++k) {
    hal::CallRecord r = unpacked(s.records[k]);
    EXPECT_EQ(r.hdr.flags & INGERO_CALL_IDENT, 0) << k;
    EXPECT_TRUE(r.hdr.flags & INGERO_CALL_CALLER) << k;
    EXPECT_NE(r.caller, 0u) << k;
    EXPECT_EQ(r.caller, unpacked(s.records[1]).caller) << "one call site";
    EXPECT_EQ(s.records[k].size(), size_t(120)) << k;
    EXPECT_EQ(s.records[k].size(), sizeof(ingero_launch_rec) + 8 * (6 + 3) + 8) << k;
  }
}

TEST(LaunchRecords, ALaunchWithMoreStackWordsKeepsThemAll) {
  REQUIRE_BPF();
  Shipped s;
  launches(
      "ingero_test_launch12", 6,
      [] {
        for (uint64_t i = 0; i < 4; ++i)
          ingero_test_launch12(i, 1, 2, 3, 4, 5, 10 + i, 20 + i, 30 + i, 40 + i, 50 + i, 60 + i);
      },
      s);
  expect_untimed(s, 6, INGERO_REC_CALL, [](uint64_t j, uint64_t k) { return 10 * (j + 1) + k; });
}

}  // namespace
}  // namespace ingero::test

// A thread's memo of the call sites it took stacks from (bpf/stacks.bpf.c: memo_slot): calls
// from two call sites in functions 64 bytes apart, taken in turn, each find their site in the
// memo once it has walked its two stacks. Their keys agree in their low bits (FNV carries an
// input bit only upwards), which once put both in one slot: each evicted the other, and every
// call looked its site up in the shared map.
#include <gtest/gtest.h>

#include <cstdint>

#include "bpf/ingero_records.h"
#include "tests/bpf/self_probe.h"
#include "tests/support/trace_db.h"

extern "C" __attribute__((noinline, used, visibility("default"))) uint64_t ingero_test_memo_site(
    uint64_t a0) {
  asm volatile("" ::: "memory");
  return a0 + 1;
}

namespace ingero::test {
namespace {

// Two call sites, each in a function of its own aligned to 64 bytes, the same code at the same
// offset: their return addresses are 64 bytes apart (no interprocedural optimisation, so that
// the compiler keeps the two).
__attribute__((noipa, aligned(64))) uint64_t site_a(uint64_t i) {
  uint64_t r = ingero_test_memo_site(i);
  asm volatile("" ::: "memory");
  return r;
}
__attribute__((noipa, aligned(64))) uint64_t site_b(uint64_t i) {
  uint64_t r = ingero_test_memo_site(i);
  asm volatile("" ::: "memory");
  return r;
}

TEST(SiteMemo, TwoSitesOfAlignedFunctionsTakenInTurnBothStayInTheMemo) {
  REQUIRE_BPF();
  auto s = open_site_session();
  ASSERT_TRUE(s) << s.error().message;
  auto& session = **s;
  const hal::ProbeSpec spec{.symbol = "ingero_test_memo_site", .kind = hal::EventKind::kLaunch};
  std::string why;
  auto links = attach_to_self(session, spec, &why);
  ASSERT_FALSE(links.empty()) << why;

  constexpr uint64_t kRounds = 1000;
  for (uint64_t i = 0; i < kRounds; ++i) {
    ASSERT_EQ(site_a(i), i + 1);
    ASSERT_EQ(site_b(i), i + 1);
  }
  auto st = session.stats();
  EXPECT_EQ(st[INGERO_STAT_CALLS], 2 * kRounds);
  // Each site walks its first two calls (looked up in `sites` both times); every later call
  // takes its stack from the memo.
  EXPECT_EQ(st[INGERO_STAT_STACK_WALKS], 4u);
  EXPECT_EQ(st[INGERO_STAT_SITE_LOOKUPS], 4u);
  EXPECT_EQ(st[INGERO_STAT_STACKS_OF_SITE], 2 * kRounds - 4);
}

}  // namespace
}  // namespace ingero::test

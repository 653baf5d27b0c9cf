// memory_pressure names a cause of slow calls: memory nearly full, swap use rising, or an OOM
// kill, at those calls (within a second: the system snapshots come once a second), not anywhere
// in the trace. Memory full a minute before them, or swap given back, is no cause.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/engine_replay.h"

namespace ingero::app {
namespace {

constexpr int64_t kOffset = 1'700'000'000'000'000'000;  // the replay's session clock

struct Snap {
  int64_t at_s;
  double mem_pct;
  int64_t swap_mb;
  std::string node = "";  // "": the session's own
};

// 200 fast allocations over 2 s from t = 0 and 200 more from t = 100 s, 10 of these 8 ms slow,
// with system snapshots and, where `oom_at_s` is set, an OOM kill then: the rule each finding
// of the allocations' tail got.
std::string tail_rule(const std::vector<Snap>& snaps, int64_t oom_at_s = -1) {
  Replay r;
  for (uint64_t base : {uint64_t(0), 100 * kS})
    for (int i = 0; i < 200; ++i) {
      bool slow = base && i % 20 == 0;
      r.add(r.call(100, "cuMemAlloc", EventKind::kAlloc, base + uint64_t(i) * 10 * kMs,
                   slow ? 8 * kMs : 100 * kUs, "cuda_driver"));
    }
  for (const Snap& s : snaps) {
    hal::HostSnapshot h;
    h.ts_ns = kOffset + s.at_s * int64_t(kS);
    h.mem_pct = s.mem_pct;
    h.swap_mb = s.swap_mb;
    if (s.node.empty()) {
      EXPECT_TRUE(r.writer().add_snapshot(h));
      continue;
    }
    // Another node's, as a merged file holds them (a fleet's come the same way).
    auto st = r.writer().db().prepare(
        "INSERT INTO system_snapshots (node, timestamp, cpu_pct, mem_pct, mem_avail, swap_mb, "
        "load_avg, procs_running) VALUES (?, ?, 0, ?, 0, ?, 0, 0)");
    EXPECT_TRUE(st) << st.error().message;
    if (!st) return "";
    st->bind(1, s.node).bind(2, h.ts_ns).bind(3, h.mem_pct).bind(4, h.swap_mb);
    EXPECT_TRUE(st->step());
  }
  if (oom_at_s >= 0) {
    Event k = r.host(300, "oom_kill", EventKind::kOomKill, uint64_t(oom_at_s) * kS, 0);
    k.set_comm("other");
    k.set(Field::kPeerPid, 301);
    k.set_peer_comm("victim");
    r.add(k);
  }
  auto a = r.analyze();
  std::string rule;
  for (const auto& c : a.chains)
    if (c.summary.find("cuMemAlloc") != std::string::npos && c.rule != "oom_kill") rule = c.rule;
  return rule;
}

TEST(EngineMemory, PressureIsACauseOnlyAtTheSlowCalls) {
  const std::string none = tail_rule({{1, 50, 0}, {100, 50, 0}, {101, 50, 0}, {102, 50, 0}});
  ASSERT_FALSE(none.empty());
  EXPECT_NE(none, "memory_pressure");
  // Memory 95% used at the slow calls: named.
  EXPECT_EQ(tail_rule({{1, 50, 0}, {100, 50, 0}, {101, 95, 0}, {102, 50, 0}}), "memory_pressure");
  // 95% a minute and a half before them, 50% at them: not (it was, for the whole window).
  EXPECT_EQ(tail_rule({{1, 95, 0}, {100, 50, 0}, {101, 50, 0}, {102, 50, 0}}), none);
  // Swap rising at them: named; given back at them, or rising only long before: not (any change
  // of swap anywhere in the window was taken for growth).
  EXPECT_EQ(tail_rule({{1, 50, 0}, {100, 50, 500}, {101, 50, 900}, {102, 50, 900}}),
            "memory_pressure");
  EXPECT_EQ(tail_rule({{1, 50, 900}, {100, 50, 900}, {101, 50, 500}, {102, 50, 400}}), none);
  EXPECT_EQ(tail_rule({{0, 50, 0}, {1, 50, 700}, {100, 50, 700}, {101, 50, 700}}), none);
  // Two nodes' snapshots interleaved, each one's swap steady: no rise (the other node's swap
  // above this one's is not growth).
  EXPECT_EQ(tail_rule({{100, 50, 500},
                       {100, 50, 900, "other"},
                       {101, 50, 500},
                       {101, 50, 900, "other"},
                       {102, 50, 500},
                       {102, 50, 900, "other"}}),
            none);
  // An OOM kill at them: named; a minute and a half before: not.
  EXPECT_EQ(tail_rule({{100, 50, 0}}, 101), "memory_pressure");
  EXPECT_EQ(tail_rule({{100, 50, 0}}, 1), none);
}

}  // namespace
}  // namespace ingero::app

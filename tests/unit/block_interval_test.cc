// The tracer's writer puts its blocks into the file at most once a second
// (TraceWriter::set_block_interval), not at every commit: each write rewrites the blocks still
// filling whole. Between, commits write the rest. What a reader of the live file may rely on
// stays true: the file holds every event up to some id and none past it (a shipper reads past
// the last id it shipped), a second's summary never counts more calls than the file holds, the
// blocks that wait are bounded, and commit_all() and the session's end write everything.
#include <gtest/gtest.h>

#include <string>

#include "store/trace_writer.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;
using hal::Event;
using hal::EventKind;
using test::query_int;
using test::temp_path;

constexpr int64_t kSec = 1'000'000'000;

// The events of the file have the ids 1 .. n: no gap a shipper would step over.
void expect_no_gap(const std::string& path) {
  int64_t n = query_int(path, "SELECT count(*) FROM events");
  EXPECT_EQ(query_int(path, "SELECT coalesce(max(id), 0) FROM events"), n);
  EXPECT_EQ(query_int(path, "SELECT coalesce(min(id), 1) FROM events"), 1);
}

// No second's summary counts more calls than the file holds in it: what a reader checks
// (store/call_count_check.h).
void expect_summaries_within_rows(const std::string& path) {
  EXPECT_EQ(query_int(path,
                      "SELECT count(*) FROM (SELECT timestamp AS t, sum(calls) AS n FROM "
                      "call_seconds GROUP BY timestamp) a WHERE a.n > (SELECT count(*) FROM calls "
                      "c WHERE c.ts_ns >= a.t AND c.ts_ns < a.t + 1000000000)"),
            0);
}

// Launches and host events of one thread, interleaved (they share ids), from `from` on, 1 ms
// apart (a second of them holds 1,000 launches).
void feed(TraceWriter& w, int from, int n) {
  for (int i = from; i < from + n; ++i) {
    ASSERT_TRUE(w.add(launch(uint64_t(i) * kMs, 5 * kUs)));
    if (i % 4 != 0) continue;
    ASSERT_TRUE(w.add(host_event(uint64_t(i) * kMs + 1, "sched_switch", EventKind::kSchedSwitch)));
  }
}

struct Clocked {
  std::string path;
  std::unique_ptr<TraceWriter> w;
  int64_t now = 0;  // the writer's steady clock
};

Clocked clocked(const std::string& name) {
  Clocked c{temp_path(name), nullptr, 0};
  c.w = begin_trace(c.path, true);
  c.w->set_block_interval(TraceWriter::kBlockIntervalNs);
  c.w->set_steady_clock([&now = c.now] { return now; });
  return c;
}

// What the file holds, what the writer counts written and pending, and that it is whole.
void expect_file(const Clocked& c, int64_t calls, int64_t host, uint64_t pending) {
  EXPECT_EQ(query_int(c.path, "SELECT count(*) FROM calls"), calls);
  EXPECT_EQ(query_int(c.path, "SELECT count(*) FROM host_events"), host);
  EXPECT_EQ(c.w->written(), uint64_t(calls + host));
  EXPECT_EQ(c.w->pending(), pending);
  expect_no_gap(c.path);
  expect_summaries_within_rows(c.path);
}

TEST(BlockInterval, BlocksWaitForTheirIntervalAndLeaveNoGapInTheIds) {
  Clocked c = clocked("interval.db");
  TraceWriter& w = *c.w;
  feed(w, 0, 2500);         // 2,500 launches to 2.499 s, 625 host events: no block full yet
  ASSERT_TRUE(w.commit());  // the first commit writes them
  expect_file(c, 2500, 625, 0);

  // 200 ms later: the commit writes what is not in blocks, and not the blocks (the 4,096th
  // launch filled one: it waits too).
  feed(w, 2500, 2600);
  c.now += 200'000'000;
  ASSERT_TRUE(w.commit());
  expect_file(c, 2500, 625, 3250);
  // Seconds 0-2 are complete (the newest call is at 5.099 s), but the block holding their
  // calls waits, and so do they: the file holds half of second 2.
  EXPECT_EQ(query_int(c.path, "SELECT coalesce(sum(calls), 0) FROM call_seconds"), 0);

  // A second after the last write: everything goes in.
  c.now += 800'000'000;
  ASSERT_TRUE(w.commit());
  expect_file(c, 5100, 1275, 0);
  EXPECT_EQ(query_int(c.path, "SELECT sum(calls) FROM call_seconds"), 3000);

  // commit_all() does not wait; nor does the session's end.
  feed(w, 5100, 10);
  c.now += 1'000'000;
  ASSERT_TRUE(w.commit_all());
  EXPECT_EQ(query_int(c.path, "SELECT count(*) FROM calls"), 5110);
  feed(w, 5110, 10);
  c.now += 1'000'000;
  ASSERT_TRUE(w.commit());
  EXPECT_EQ(query_int(c.path, "SELECT count(*) FROM calls"), 5110);
  ASSERT_TRUE(w.finish(SessionEnd{}));
  EXPECT_EQ(query_int(c.path, "SELECT count(*) FROM calls"), 5120);
  EXPECT_EQ(query_int(c.path, "SELECT sum(calls) FROM call_seconds"), 5120);
  EXPECT_EQ(query_int(c.path, "SELECT events_stored FROM sessions"), 5120 + 1280);
  expect_summaries_within_rows(c.path);
  expect_no_gap(c.path);
}

// Full blocks wait for the interval only while fewer than kMaxWaitingRows events fill them:
// past that the writer writes them at once, whatever its clock says.
TEST(BlockInterval, FullBlocksThatWouldHoldTooMuchMemoryGoInAtOnce) {
  Clocked c = clocked("interval-full.db");
  TraceWriter& w = *c.w;
  ASSERT_TRUE(w.add(launch(0, 5 * kUs)));
  ASSERT_TRUE(w.commit());  // the clock starts
  const int block = int(kCallBlockRows);
  for (int i = 1; i < 4 * block - 1; ++i) ASSERT_TRUE(w.add(launch(uint64_t(i) * kUs, kUs)));
  ASSERT_TRUE(w.commit());  // the same instant: nothing goes in
  EXPECT_EQ(query_int(c.path, "SELECT count(*) FROM calls"), 1);
  ASSERT_TRUE(w.add(launch(uint64_t(4 * block) * kUs, kUs)));  // the fourth block fills
  EXPECT_EQ(query_int(c.path, "SELECT count(*) FROM calls"), 4 * block);
  expect_no_gap(c.path);
  ASSERT_TRUE(w.finish(SessionEnd{}));
  EXPECT_EQ(w.written(), uint64_t(4 * block));
}

}  // namespace
}  // namespace ingero::store

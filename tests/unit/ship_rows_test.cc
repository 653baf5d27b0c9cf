// What the shipper sends, without a server: RowBinary bytes per ClickHouse type, every column
// type of the fleet tables known to the encoder, and the `events` rows read straight from call
// blocks (fleet/block_rows.h) equal to the rows SQL gives, byte for byte, in batches that end
// at their limits and at midnight.
#include <gtest/gtest.h>

#include <functional>

#include "fleet/block_rows.h"
#include "fleet/row_batch.h"
#include "fleet/row_binary.h"
#include "fleet/shipper.h"
#include "fleet/spool.h"
#include "store/trace_writer.h"
#include "tests/support/live_commit.h"
#include "tests/support/trace_db.h"

namespace ingero::fleet {
namespace {

using test::query_int;
using test::temp_path;

std::string rb(const std::function<void(RowBinary&)>& fn) {
  std::string out;
  RowBinary r(out);
  fn(r);
  return out;
}

TEST(FleetRowBinary, EncodesEachTypeAsClickHouseReadsIt) {
  auto t = [](const char* s) { return *parse_ch_type(s); };
  EXPECT_EQ(rb([&](RowBinary& r) { r.integer(t("UInt8"), 7); }), std::string("\x07", 1));
  EXPECT_EQ(rb([&](RowBinary& r) { r.integer(t("UInt32"), 0x01020304); }),
            std::string("\x04\x03\x02\x01", 4));
  EXPECT_EQ(rb([&](RowBinary& r) { r.integer(t("Int64"), -2); }),
            std::string(8, '\xff').replace(0, 1, "\xfe"));
  EXPECT_EQ(rb([&](RowBinary& r) { r.integer(t("UInt64"), 258); }),
            std::string("\x02\x01\0\0\0\0\0\0", 8));
  EXPECT_EQ(rb([&](RowBinary& r) { r.integer(t("Nullable(Int64)"), 1); }),
            std::string("\0\x01\0\0\0\0\0\0\0", 9));
  EXPECT_EQ(rb([&](RowBinary& r) { r.null(t("Nullable(Int64)")); }), std::string("\x01", 1));
  // A NULL where the column is not Nullable: 0 or '', as the TabSeparated rows had it.
  EXPECT_EQ(rb([&](RowBinary& r) { r.null(t("UInt32")); }), std::string(4, '\0'));
  EXPECT_EQ(rb([&](RowBinary& r) { r.null(t("String")); }), std::string(1, '\0'));
  EXPECT_EQ(rb([&](RowBinary& r) { r.text(t("String"), std::string("a\0\t", 3)); }),
            std::string("\x03"
                        "a\0\t",
                        4));
  // Lengths from 128 take two bytes of LEB128.
  std::string long_text(300, 'x');
  EXPECT_EQ(rb([&](RowBinary& r) { r.text(t("String"), long_text); }),
            std::string("\xac\x02", 2) + long_text);
  double d = 12.5;
  EXPECT_EQ(rb([&](RowBinary& r) { r.real(t("Float64"), d); }),
            std::string(reinterpret_cast<const char*>(&d), 8));
  // As SQLite converts: an integer into text, text into an integer, a real into text.
  EXPECT_EQ(rb([&](RowBinary& r) { r.integer(t("String"), -42); }), std::string("\x03-42", 4));
  EXPECT_EQ(rb([&](RowBinary& r) { r.text(t("UInt32"), "17abc"); }), std::string("\x11\0\0\0", 4));
  EXPECT_EQ(rb([&](RowBinary& r) { r.real(t("String"), 2.0); }), std::string("\x03"
                                                                             "2.0",
                                                                             4));
  auto bad = parse_ch_type("DateTime64(9)");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "RowBinary: no encoding for the ClickHouse type DateTime64(9)");
}

TEST(FleetRowBinary, EveryColumnOfEveryShippedTableHasAnEncoding) {
  for (const TableSpec& t : fleet_tables()) {
    auto types = column_types(t);
    ASSERT_TRUE(types) << types.error().message;
    EXPECT_EQ(types->size(), t.columns.size()) << t.name;
  }
}

// 2026-03-31 23:59:59.5 UTC: the trace crosses midnight half a second in.
constexpr int64_t kStart = 1775001599LL * 1'000'000'000 + 500'000'000;

// Calls of every shape (timed, untimed launches, failed, unfinished, with fields and stacks)
// between host events, in blocks of 64, some of them folded for good (only their kept calls
// have rows): what `events` gives over both tables.
std::string mixed_trace(int calls) {
  std::string path = temp_path("mixed.db");
  auto w = store::TraceWriter::open(path);
  EXPECT_TRUE(w) << w.error().message;
  (*w)->set_block_rows(64);
  (*w)->set_folding(true);
  store::SessionInfo si;
  si.node = "node-m";
  si.started_at_ns = kStart;
  si.mono_offset_ns = kStart;
  EXPECT_TRUE((*w)->begin_session(si));
  EXPECT_TRUE((*w)->add_stack(91, {{false, "/opt/train", 0x10, "bid", "step", "t.c", 4}}));
  for (int i = 0; i < calls; ++i) {
    hal::Event e;
    e.ts_ns = uint64_t(i) * 1'000'000;  // 1 ms apart: midnight after the 500th
    e.pid = 7000 + uint32_t(i % 2);
    e.tid = e.pid + uint32_t(i % 3);
    e.set_comm(i % 4 ? "python3" : "pt_autograd_0");
    if (i % 10 == 9) {  // a host event between the calls
      e.vendor = "host";
      e.api = "kernel";
      e.op = "sched_switch";
      e.kind = hal::EventKind::kSchedSwitch;
      e.dur_ns = 2000;
      e.set(hal::Field::kState, 1);
      e.set(hal::Field::kFlags, i % 3);
      EXPECT_TRUE((*w)->add(e));
      continue;
    }
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    bool launch = i % 3 != 0;
    e.op = launch ? "cudaLaunchKernel" : "cudaMemcpyAsync";
    e.kind = launch ? hal::EventKind::kLaunch : hal::EventKind::kMemcpy;
    e.timed = !launch || i % 8 == 1;
    if (e.timed) {
      e.dur_ns = 3000 + uint64_t(i % 17) * 100;
      e.has_ret = true;
      e.ret = i % 11 == 0 ? 2 : 0;
      e.off_cpu_ns = i % 13 == 0 ? 40000 : 0;
    }
    e.unfinished = i % 97 == 5;
    if (!launch) {
      e.set(hal::Field::kBytes, 4096 * uint64_t(i));
      e.set(hal::Field::kDirection, 1);
    }
    e.set(hal::Field::kStream, 0x5a + uint64_t(i % 2));
    if (i % 5 == 0) e.stack_id = 91;
    EXPECT_TRUE((*w)->add(e));
  }
  // The first half's blocks lose their full rows (folded for good): SQL reads their kept calls.
  auto folded = (*w)->fold_blocks(INT64_MAX, calls / 2);
  EXPECT_TRUE(folded) << folded.error().message;
  store::SessionEnd end;
  end.stopped_at_ns = kStart + int64_t(calls) * 1'000'000;
  EXPECT_TRUE((*w)->finish(end));
  return path;
}

TEST(FleetBlockRows, GiveTheRowsSqlGivesByteForByteInBatchesWithinADay) {
  std::string path = mixed_trace(1000);
  auto spool = Spool::open(path);
  ASSERT_TRUE(spool) << spool.error().message;
  const TableSpec& events = *find_table("events");
  auto types = column_types(events);
  ASSERT_TRUE(types);
  // Every row of `events`, through SQL (the view over host_rows and the blocks).
  std::string sql;
  size_t sql_rows = 0;
  ASSERT_TRUE((*spool)->select(events, "WHERE e.id > :after ORDER BY e.id", {{":after", 0}},
                               [&](const SpoolRow& r) {
                                 r.append_row_binary(sql, *types);
                                 ++sql_rows;
                                 return true;
                               }));
  ASSERT_EQ(int64_t(sql_rows), query_int(path, "SELECT count(*) FROM events"));
  ASSERT_GT(query_int(path, "SELECT count(*) FROM host_rows"), 90);
  ASSERT_GT(query_int(path, "SELECT count(*) FROM call_store WHERE full IS NULL"), 2);
  ASSERT_LT(sql_rows, 1000u);  // their calls in runs have no row

  auto br = BlockRows::create(**spool, events);
  ASSERT_TRUE(br) << br.error().message;
  std::string blocks;
  std::vector<size_t> sizes;
  int64_t after = 0;
  RowBatch b;
  while (true) {
    auto r = (*br)->next_batch(after, {100, 1u << 30}, b);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_TRUE(*r);
    if (!b.rows) break;
    EXPECT_GT(b.first_id, after);
    // One UTC day per batch.
    EXPECT_EQ(b.min_time / int64_t(kNsPerDay), b.max_time / int64_t(kNsPerDay));
    blocks += b.body;
    sizes.push_back(b.rows);
    after = b.last_id;
    if (!b.more) break;
  }
  EXPECT_EQ(after, query_int(path, "SELECT max(id) FROM events"));
  EXPECT_EQ(blocks.size(), sql.size());
  EXPECT_TRUE(blocks == sql) << "the rows from blocks differ from the rows SQL gives";
  // Batches of 100 rows, cut at midnight (500 ms of calls before it).
  int64_t before_midnight =
      query_int(path, "SELECT count(*) FROM events WHERE timestamp < " +
                          std::to_string((kStart / int64_t(kNsPerDay) + 1) * int64_t(kNsPerDay)));
  std::vector<size_t> expect;
  for (int64_t left = before_midnight; left > 0; left -= 100)
    expect.push_back(size_t(std::min<int64_t>(left, 100)));
  for (int64_t left = int64_t(sql_rows) - before_midnight; left > 0; left -= 100)
    expect.push_back(size_t(std::min<int64_t>(left, 100)));
  EXPECT_EQ(sizes, expect);
  // A byte limit ends a batch too (after the row that crossed it).
  auto r = (*br)->next_batch(0, {100000, 1000}, b);
  ASSERT_TRUE(r && *r);
  EXPECT_TRUE(b.more);
  EXPECT_GE(b.body.size(), 1000u);
  EXPECT_EQ(b.body, sql.substr(0, b.body.size()));
}

// fleet.md: batches of at most 100,000 rows and 32 MiB of RowBinary, within one UTC day (an
// INSERT into one partition is atomic); failed passes retried after 0.5 s, doubling to 10 s.
TEST(FleetBatches, ABatchEndsAtItsRowsItsBytesOrTheNextUtcDay) {
  ShipperOptions o;
  EXPECT_EQ(o.batch_rows, 100000u);
  EXPECT_EQ(o.batch_bytes, size_t(32) << 20);
  EXPECT_EQ(o.backoff_min_ms, 500);
  EXPECT_EQ(o.backoff_max_ms, 10000);
  const BatchLimits l{3, 100};
  const int64_t day = int64_t(kNsPerDay), t = 20000 * day + 5;
  RowBatch b;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(b.admit(l, true, t + i)) << i;
    b.body += "xx";
    b.added(10 + i, true, t + i);
  }
  EXPECT_FALSE(b.admit(l, true, t + 3));  // its rows
  EXPECT_TRUE(b.more);
  EXPECT_EQ(b.first_id, 10);
  EXPECT_EQ(b.last_id, 12);
  EXPECT_EQ(b.min_time, t);
  EXPECT_EQ(b.max_time, t + 2);
  b.clear();
  ASSERT_TRUE(b.admit(l, true, t));
  b.body.assign(100, 'x');
  b.added(1, true, t);
  EXPECT_FALSE(b.admit(l, true, t));  // its bytes
  b.clear();
  ASSERT_TRUE(b.admit(l, true, t));
  b.added(1, true, t);
  EXPECT_FALSE(b.admit(l, true, 20001 * day));  // the next UTC day
  EXPECT_TRUE(b.admit(l, false, 20001 * day));  // a table without a day column: no such bound
}

TEST(FleetBlockRows, AColumnTheyCannotGiveLeavesEventsToSql) {
  std::string path = mixed_trace(100);
  auto spool = Spool::open(path);
  ASSERT_TRUE(spool) << spool.error().message;
  TableSpec t = *find_table("events");
  t.columns.push_back({"gpu_id", "Nullable(Int64)", "e.gpu_id"});
  auto br = BlockRows::create(**spool, t);
  ASSERT_FALSE(br);
  EXPECT_EQ(br.error().message, "events.gpu_id reads the generated column gpu_id");
  t.columns.back() = {"x", "Int64", "length(e.comm)"};
  br = BlockRows::create(**spool, t);
  ASSERT_FALSE(br);
  EXPECT_EQ(br.error().message,
            "events.x is read as 'length(e.comm)', which call blocks cannot give");
}

// The writer commits between a batch's reads: its commit holds calls and host events whose ids
// interleave (one id space). A batch read partly before and partly after it (host rows before,
// call blocks after) sent the commit's calls and not its host events, and the next batch, which
// reads past the last id sent, never sent them (FleetTrace.ClickHouseDownFor20s... lost one
// commit's host events so). Here the commit lands, every time, as the call blocks are listed.
TEST(FleetBlockRows, ACommitBetweenTheirReadsLosesNoRowOfIt) {
  std::string path = temp_path("committing.db");
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  (*w)->set_block_rows(64);
  store::SessionInfo si;
  si.node = "node-c";
  si.started_at_ns = kStart - 3'600'000'000'000;  // within one day
  si.mono_offset_ns = si.started_at_ns;
  ASSERT_TRUE((*w)->begin_session(si));
  test::add_interleaved_events(**w, 0, 30);
  ASSERT_TRUE((*w)->commit_all());
  auto spool = Spool::open(path);
  ASSERT_TRUE(spool) << spool.error().message;
  auto br = BlockRows::create(**spool, *find_table("events"));
  ASSERT_TRUE(br) << br.error().message;

  // The second commit (20 calls, 10 host events), made by the writer's own connection as the
  // reader's starts listing the call blocks.
  test::CommitAt at((*spool)->db().handle(), "last_id >= ?3", [&] {
    test::add_interleaved_events(**w, 30, 60);
    ASSERT_TRUE((*w)->commit_all());
  });
  std::vector<size_t> rows;
  int64_t after = 0;
  RowBatch b;
  for (int pass = 0; pass < 4; ++pass) {
    auto r = (*br)->next_batch(after, {100000, 1u << 30}, b);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_TRUE(*r);
    if (!b.rows) break;
    rows.push_back(b.rows);
    after = b.last_id;
  }
  // Two listings a batch (its host events', in their table's scan, and its calls'), three
  // batches: 30 rows, 30, none.
  EXPECT_EQ(at.starts(), 6);
  ASSERT_EQ(query_int(path, "SELECT count(*) FROM events"), 60);
  // The first batch as of the first commit, the second the whole of the second commit.
  EXPECT_EQ(rows, (std::vector<size_t>{30, 30}));
  EXPECT_EQ(after, query_int(path, "SELECT max(id) FROM events"));
  ASSERT_TRUE((*w)->finish({}));
}

}  // namespace
}  // namespace ingero::fleet

// The shipper against real ClickHouse servers (the Debian 12 package, 18.16): escaping,
// exactly-once shipping through lost answers, refused connections, a stopped server and an
// agent restart, inserts answered but not stored, day-partitioned batches, the lock.
// (ship_schema_test.cc: the DDL and databases made by other builds; source_test.cc: explain,
// export and query over ClickHouse.)
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/builtin_backends.h"
#include "fleet/ch_schema.h"
#include "fleet/clickhouse_source.h"
#include "fleet/shipper.h"
#include "fleet/tsv.h"
#include "store/plain_copy.h"
#include "store/sqlite_db.h"
#include "store/tiers.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(FleetClickHouse, EveryByteOfAStringSurvivesTheRoundTrip) {
  START_SERVERS(ch, 1);
  fleet::ClickHouseClient c(endpoint(ch, 0, "ingero"));
  ASSERT_TRUE(c.execute("CREATE DATABASE IF NOT EXISTS ingero"));
  ASSERT_TRUE(
      c.execute("CREATE TABLE ingero.s (i UInt32, s String, n Nullable(String)) "
                "ENGINE = MergeTree ORDER BY i"));
  std::vector<std::string> values = {"plain",
                                     "tab\there",
                                     "new\nline",
                                     "back\\slash",
                                     std::string("nul\0byte", 8),
                                     "\\N",
                                     "'quoted' \"x\"",
                                     "\r\b\f",
                                     "\xff\xfe invalid utf-8",
                                     ""};
  std::string tsv;
  for (size_t i = 0; i < values.size(); ++i) {
    tsv += std::to_string(i) + "\t";
    fleet::append_tsv_escaped(tsv, values[i]);
    tsv += "\t";
    if (i % 2)
      tsv += fleet::kTsvNull;
    else
      fleet::append_tsv_escaped(tsv, values[i]);
    tsv += "\n";
  }
  ASSERT_TRUE(c.insert("s", "i, s, n", tsv, values.size(), "TabSeparated"));
  std::vector<std::vector<fleet::TsvField>> rows;
  fleet::TsvStream parse(3, [&](const std::vector<fleet::TsvField>& f) {
    rows.push_back(f);
    return true;
  });
  ASSERT_TRUE(c.stream(
      "SELECT i, s, n FROM ingero.s ORDER BY i FORMAT TabSeparated", {},
      [&](std::string_view x) { return parse.feed(x); }, 10000));
  ASSERT_TRUE(parse.finish());
  ASSERT_EQ(rows.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(rows[i][1].text, values[i]) << i;
    EXPECT_EQ(rows[i][2].null, i % 2 == 1) << i;
    if (i % 2 == 0) {
      EXPECT_EQ(rows[i][2].text, values[i]) << i;
    }
  }
  EXPECT_EQ(ch.query_int(0, "SELECT length(s) FROM ingero.s WHERE i = 4"), 8);
  // ClickHouse's own message and the URL when it refuses.
  auto bad = c.execute("SELECT * FROM ingero.nope");
  ASSERT_FALSE(bad);
  EXPECT_EQ(c.last_failure(), fleet::Failure::kRejected);
  EXPECT_NE(bad.error().message.find(ch.url(0, "ingero")), std::string::npos);
  EXPECT_NE(bad.error().message.find("Table ingero.nope doesn't exist"), std::string::npos)
      << bad.error().message;
}

TEST(FleetShip, ExactlyOnceThroughLostAnswersRefusalsDaysAndARestart) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("trace.db");
  write_session(db, "node-a", kBeforeMidnight, 2500, kMs);  // midnight after the 1000th call
  fleet::ShipperOptions o;
  o.batch_rows = 400;
  o.backoff_min_ms = 10;
  auto flaky = std::make_unique<FlakyClient>(endpoint(ch, 0, "ingero"));
  FlakyClient* f = flaky.get();
  // Insert 4 (events 1-400) is stored but its answer is lost; insert 6 is never sent.
  f->lose_answer = {4};
  f->refuse = {6};
  auto s = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"), o, std::move(flaky));
  ASSERT_TRUE(s) << s.error().message;
  auto r = (*s)->drain(std::chrono::seconds(60));
  EXPECT_TRUE(r.caught_up) << r.last_error;
  EXPECT_EQ(r.unshipped, 0u);
  expect_exact(ch, 0, "ingero", db);
  // Batches of 400 calls, cut where the UTC day changes: one INSERT, one partition.
  std::vector<size_t> event_batches;
  for (const auto& [t, n] : f->stored)
    if (t == "events") event_batches.push_back(n);
  EXPECT_EQ(event_batches, (std::vector<size_t>{400, 400, 200, 400, 400, 400, 300}));
  auto t = (*s)->totals();
  EXPECT_EQ(t.failures, 2u);
  EXPECT_EQ(t.resyncs, 3u);  // at start, and after each failure
  EXPECT_EQ(ch.query(0,
                     "SELECT count(), min(src_id), max(src_id), sum(src_id) FROM "
                     "ingero.events"),
            "2500\t1\t2500\t3126250\n");
  // The values as stored: escaping, NULLs, the stack, the chain.
  EXPECT_EQ(ch.query(0, "SELECT comm, op, ret, stream, bytes FROM ingero.events WHERE src_id = 7"),
            "rank\\t\"x\"\tcudaStreamSynchronize\t0\t90\t\\N\n");
  EXPECT_EQ(ch.query(0,
                     "SELECT frame, function, file, line, module_offset FROM "
                     "ingero.stack_frames ORDER BY frame"),
            "0\tstep(\\'x\\'\\t)\tt.c\t41\t4489\n1\tmain\ttrain.py\t9\t\\N\n");
  EXPECT_EQ(ch.query(0, "SELECT summary FROM ingero.causal_chains"), "a chain with a\\nnewline\n");
  s->reset();  // the agent exits

  // The agent starts again on the same file and appends a session: only the new rows ship.
  write_session(db, "node-a", kBeforeMidnight + 3600 * 1'000'000'000LL, 700, kMs);
  long long before = ch.query_int(0, "SELECT count() FROM ingero.events");
  auto again = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"), o);
  ASSERT_TRUE(again);
  EXPECT_TRUE((*again)->drain(std::chrono::seconds(60)).caught_up);
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events") - before, 700);
  expect_exact(ch, 0, "ingero", db);
}

TEST(FleetShip, ServerDownKeepsEveryRowInTheFileUntilItIsBack) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("trace.db");
  write_session(db, "node-a", kBeforeMidnight, 1000, kMs);
  ASSERT_TRUE(ch.stop(0));
  fleet::ShipperOptions o;
  o.client.connect_timeout_ms = 500;
  auto s = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"), o);
  ASSERT_TRUE(s);
  // The background loop tries until the test has seen a pass fail; stop() lets a pass in flight
  // end on its own terms. (A drain of fixed length gives its last pass only the time left: on a
  // loaded machine that pass ends in a timeout of a few ms, not in the refused connection.)
  (*s)->start();
  for (int i = 0; i < 12000 && (*s)->totals().failures == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  (*s)->stop();
  ASSERT_GE((*s)->totals().failures, 1u);
  auto r = (*s)->drain(std::chrono::milliseconds(0));  // what is left, and why
  EXPECT_FALSE(r.caught_up);
  // Every row of the file: 1000 calls, session, 2 frames, 3 processes, 2 snapshots, a cgroup,
  // a chain.
  EXPECT_EQ(r.unshipped, 1010u);
  EXPECT_NE(r.last_error.find(ch.url(0, "ingero") + ": cannot connect"), std::string::npos)
      << r.last_error;
  std::string why;
  ASSERT_TRUE(ch.restart(0, &why)) << why;
  r = (*s)->drain(std::chrono::seconds(60));
  EXPECT_TRUE(r.caught_up) << r.last_error;
  expect_exact(ch, 0, "ingero", db);
  // Another process may not ship the same file at the same time.
  auto second = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"));
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("is being shipped by another ingero process"),
            std::string::npos);
}

// ClickHouse receives event rows, not runs: calls folded before they were shipped are not in
// it, and the shipper says how many at most. A file folded only up to what was shipped (as the
// tracer folds while it ships) gets no such warning.
TEST(FleetShip, CallsFoldedBeforeTheyWereShippedAreSaidToBeMissing) {
  START_SERVERS(ch, 1);
  std::vector<std::string> said;
  fleet::ShipperOptions o;
  o.log = [&](const std::string& m) { said.push_back(m); };

  std::string early = temp_path("folded-early.db");
  write_launches(early, 1000);
  // The blocks up to `through` folded for good: the launches now in runs (they have no row).
  auto fold = [](const std::string& path, int64_t through) {
    {
      auto w = store::TraceWriter::open(path);
      EXPECT_TRUE(w) << (w ? "" : w.error().message);
      auto pass = (*w)->fold_blocks(INT64_MAX, through);
      EXPECT_TRUE(pass) << pass.error().message;
    }
    return uint64_t(query_int(path, "SELECT coalesce(sum(calls), 0) FROM call_runs"));
  };
  uint64_t folded = fold(early, INT64_MAX);
  ASSERT_GT(folded, 0u);
  {
    auto s = fleet::Shipper::create(early, endpoint(ch, 0, "ingero"), o);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ((*s)->events_shipped_through(), 0);
    EXPECT_TRUE((*s)->drain(std::chrono::seconds(60)).caught_up);
    EXPECT_EQ((*s)->events_shipped_through(), query_int(early, "SELECT max(id) FROM events"));
  }
  EXPECT_EQ(said, (std::vector<std::string>{
                      early + ": up to " + std::to_string(folded) +
                      " calls were folded into runs (tiered retention) before they were shipped; "
                      "ClickHouse receives event rows only, so those calls are not in it (its "
                      "per-second summaries stay in the file). Ship while tracing (ingero trace "
                      "--clickhouse) to send every call before it is folded"}));
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), 1000 - int64_t(folded));

  // Shipped first, folded after, up to what ClickHouse has: every call is in it, nothing said.
  said.clear();
  std::string late = temp_path("folded-late.db");
  write_launches(late, 1000);
  {
    auto s = fleet::Shipper::create(late, endpoint(ch, 0, "other"), o);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE((*s)->drain(std::chrono::seconds(60)).caught_up);
    EXPECT_EQ(fold(late, (*s)->events_shipped_through()), folded);
  }
  auto again = fleet::Shipper::create(late, endpoint(ch, 0, "other"), o);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_TRUE((*again)->drain(std::chrono::seconds(60)).caught_up);
  EXPECT_EQ(said, std::vector<std::string>{});
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM other.events"), 1000);
}

// A node that shipped its session and no event was said not to exist ("no node 'quiet' in this
// trace") and left out of the fleet: a silent node is the one an operator looks for.
TEST(FleetShip, ANodeWithASessionAndNoEventIsANode) {
  START_SERVERS(ch, 1);
  std::string busy = temp_path("busy.db"), quiet = temp_path("quiet.db");
  write_launches(busy, 100);
  {
    auto w = store::TraceWriter::open(quiet);
    ASSERT_TRUE(w) << w.error().message;
    store::SessionInfo si;
    si.node = si.host = "quiet";
    si.started_at_ns = kBeforeMidnight - 3600 * 1'000'000'000LL;
    si.mono_offset_ns = si.started_at_ns;
    ASSERT_TRUE((*w)->begin_session(si));
    store::SessionEnd end;
    end.stopped_at_ns = si.started_at_ns + 2'000'000'000;
    end.exit_reason = "duration";
    ASSERT_TRUE((*w)->finish(end));
  }
  for (const std::string& db : {busy, quiet}) {
    auto s = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"));
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE((*s)->drain(std::chrono::seconds(60)).caught_up);
  }
  std::string out, err;
  ASSERT_EQ(
      run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--node", "quiet"},
                  &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("[node quiet]"), std::string::npos) << out;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"}, &out,
                        &err),
            0)
      << err;
  EXPECT_EQ(nlohmann::json::parse(out)["fleet"]["nodes"], nlohmann::json({"node-f", "quiet"}));
}

// Rows under a node no session has (an older file's process names and snapshots under the
// host's own name) were shipped again on every run, 7 more each time on a real H100 trace, and
// their read-back said an insert "answered with success" was not stored: what was shipped is
// now read back by every node the rows carry.
TEST(FleetShip, RowsOfANodeWithoutASessionAreShippedOnce) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("orphan.db");
  write_launches(db, 100);
  {
    auto w = store::Db::open(db, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    ASSERT_TRUE(
        (*w)->exec("INSERT INTO process_names (node, pid, name, cmdline, seen_at) VALUES "
                   "('old-name', 4242, 'python3', 'x', 1795371736697505062)"));
    ASSERT_TRUE(
        (*w)->exec("INSERT INTO system_snapshots (node, timestamp) SELECT 'old-name', "
                   "timestamp + 1 FROM system_snapshots LIMIT 1"));
  }
  std::vector<std::string> said;
  fleet::ShipperOptions o;
  o.log = [&](const std::string& m) { said.push_back(m); };
  for (int run = 0; run < 3; ++run) {
    auto s = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"), o);
    ASSERT_TRUE(s) << s.error().message;
    auto r = (*s)->drain(std::chrono::seconds(60));
    EXPECT_TRUE(r.caught_up) << r.last_error;
    EXPECT_EQ((*s)->totals().unconfirmed, 0u) << "run " << run;
  }
  EXPECT_EQ(said, std::vector<std::string>{});
  EXPECT_EQ(ch.query(0,
                     "SELECT node, pid, count() FROM ingero.process_names WHERE node = "
                     "'old-name' GROUP BY node, pid"),
            "old-name\t4242\t1\n");
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.system_snapshots"),
            query_int(db, "SELECT count(*) FROM system_snapshots"));
}

// Issue 37, item 6: an INSERT answered with success that stored nothing (here a proxy that
// says 200 and drops the body) is not shipped: the read-back finds none of its rows, the
// failure is said once, the batch is sent again, and the shipped-through id that folding waits
// for never passes what ClickHouse holds. Every call arrives once.
TEST(FleetShip, InsertsClickHouseDoesNotConfirmAreRetriedAndNothingIsFoldedPastThem) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("dropped.db");
  write_launches(db, 3000);
  fleet::ShipperOptions o;
  o.batch_rows = 500;
  o.backoff_min_ms = 10;
  std::vector<std::string> said;
  fleet::Shipper* shipper = nullptr;
  // At the failure: the id folding may go up to, and what ClickHouse holds then.
  std::vector<std::pair<int64_t, std::string>> at_failure;
  o.log = [&](const std::string& m) {
    said.push_back(m);
    at_failure.push_back(
        {shipper->events_shipped_through(),
         ch.query(0, "SELECT count(), uniqExact(src_id), max(src_id) FROM ingero.events")});
  };
  auto flaky = std::make_unique<FlakyClient>(endpoint(ch, 0, "ingero"));
  FlakyClient* f = flaky.get();
  f->drop = {3};  // insert 1: the session; 2: events 1-500; 3: events 501-1000, dropped
  auto s = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"), o, std::move(flaky));
  ASSERT_TRUE(s) << s.error().message;
  shipper = s->get();
  auto r = (*s)->drain(std::chrono::seconds(60));
  EXPECT_TRUE(r.caught_up) << r.last_error;
  EXPECT_EQ(said, (std::vector<std::string>{
                      "ClickHouse at " + ch.url(0, "ingero") +
                          " answered the INSERT of 500 rows into events with success, but holds 0 "
                          "of them: not counted as shipped; the rows stay in " +
                          db + " and are retried",
                      "ClickHouse at " + ch.url(0, "ingero") + " is back: shipping resumed"}));
  ASSERT_EQ(at_failure.size(), 2u);
  EXPECT_EQ(at_failure[0], (std::pair<int64_t, std::string>{500, "500\t500\t500\n"}));
  auto t = (*s)->totals();
  EXPECT_EQ(t.unconfirmed, 1u);
  EXPECT_EQ(t.failures, 1u);
  EXPECT_EQ(t.rows, 3001u);  // every launch and the session, each counted once
  // ClickHouse 18.16 says nothing of what an INSERT stored (no X-ClickHouse-Summary): every
  // batch was read back.
  EXPECT_EQ(t.confirmed_by_summary, 0u);
  EXPECT_EQ(t.read_back, t.batches);
  EXPECT_EQ((*s)->events_shipped_through(), 3000);
  std::vector<size_t> event_batches;
  for (const auto& [table, n] : f->stored)
    if (table == "events") event_batches.push_back(n);
  EXPECT_EQ(event_batches, (std::vector<size_t>{500, 500, 500, 500, 500, 500}));
  expect_exact(ch, 0, "ingero", db);
  EXPECT_EQ(ch.query(0, "SELECT count(), uniqExact(src_id), max(src_id) FROM ingero.events"),
            "3000\t3000\t3000\n");
}

// `ingero ship` of a file of schema 10: the calls in its blocks arrive as the rows they are,
// every column, as from a copy of the file whose calls are plain rows (store/plain_copy.h).
TEST(FleetShip, CallsInBlocksAreShippedAsTheirRows) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("blocks.db");
  write_launches(db, 1000);
  EXPECT_EQ(query_int(db, "SELECT sum(calls) FROM call_store"), 1000);
  std::string rows = temp_path("rows.db");
  auto copy = store::write_plain_copy(db, rows, app::builtin_views());
  ASSERT_TRUE(copy) << copy.error().message;
  EXPECT_EQ(query_int(rows, "SELECT count(*) FROM main.events"), 1000);
  {
    auto s = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"), {});
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE((*s)->drain(std::chrono::seconds(60)).caught_up);
    EXPECT_EQ((*s)->events_shipped_through(), 1000);
  }
  {
    auto s = fleet::Shipper::create(rows, endpoint(ch, 0, "other"), {});
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE((*s)->drain(std::chrono::seconds(60)).caught_up);
  }
  expect_exact(ch, 0, "ingero", db);
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), 1000);
  // The same rows as from the file of rows, column by column.
  for (const char* col : {"src_id", "ts_ns", "dur_ns", "pid", "tid", "cityHash64(comm)",
                          "cityHash64(op)", "cityHash64(kind)", "ifNull(ret, -1)", "stack_hash",
                          "ifNull(stream, -1)", "status", "ifNull(library_id, -1)"}) {
    auto sum = [&](const std::string& d) {
      return ch.query_int(
          0, std::string("SELECT toInt64(sum(") + col + ") % 1000000007) FROM " + d + ".events");
    };
    EXPECT_EQ(sum("ingero"), sum("other")) << col;
  }
  EXPECT_EQ(ch.query_int(0, "SELECT sum(dur_ns) FROM ingero.events"),
            query_int(rows, "SELECT sum(duration) FROM events"));
}

// A call ships with the calls folded into it (a runtime launch's driver launch) and whether its
// stack is its site's: ClickHouse's calls view gives them as the file's does, from blocks and
// from rows alike.
TEST(FleetShip, TheCallsFoldedIntoACallShipWithIt) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("nested.db");
  write_launches(db, 300, [](hal::Event& e, int i) {
    e.nested = uint32_t(i % 3);
    if (e.nested) {
      e.nested_api = "cuda_driver";
      e.nested_op = i % 3 == 1 ? "cuLaunchKernel" : "cuLaunchKernelEx";
      e.nested_kind = hal::EventKind::kLaunch;
    }
    e.stack_id = 0x77;
    e.stack_of_site = i % 2;
  });
  std::string rows = temp_path("nested-rows.db");
  auto copy = store::write_plain_copy(db, rows, app::builtin_views());
  ASSERT_TRUE(copy) << copy.error().message;
  for (auto [file, database] : {std::pair{db, "ingero"}, std::pair{rows, "other"}}) {
    auto s = fleet::Shipper::create(file, endpoint(ch, 0, database), {});
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE((*s)->drain(std::chrono::seconds(60)).caught_up);
  }
  std::string want;
  for (const auto& r : test::query_rows(
           db,
           "SELECT nested_calls, coalesce(nested_op, '\\N'), stack_of_site, count(*) FROM "
           "calls GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"))
    want += r[0] + "\t" + r[1] + "\t" + r[2] + "\t" + r[3] + "\n";
  EXPECT_EQ(want,
            "0\t\\N\t0\t50\n0\t\\N\t1\t50\n1\tcuLaunchKernel\t0\t50\n"
            "1\tcuLaunchKernel\t1\t50\n2\tcuLaunchKernelEx\t0\t50\n2\tcuLaunchKernelEx\t1\t50\n");
  for (const char* database : {"ingero", "other"})
    EXPECT_EQ(
        ch.query(0, std::string("SELECT nested_calls, nested_op, stack_of_site, count() FROM ") +
                        database +
                        ".calls GROUP BY nested_calls, nested_op, stack_of_site "
                        "ORDER BY nested_calls, nested_op, stack_of_site"),
        want)
        << database;
}

}  // namespace
}  // namespace ingero::test

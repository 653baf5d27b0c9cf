// The shipper and the ClickHouse source against real ClickHouse servers (the Debian 12
// package, 18.16): DDL, escaping, exactly-once shipping through lost answers, refused
// connections, a stopped server and an agent restart, day-partitioned batches, the lock, and
// explain/query over ClickHouse.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/builtin_backends.h"
#include "fleet/ch_schema.h"
#include "fleet/clickhouse_source.h"
#include "fleet/shipper.h"
#include "fleet/tsv.h"
#include "store/plain_copy.h"
#include "store/tiers.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// 2026-03-31 23:59:59 UTC: a session that crosses midnight.
constexpr int64_t kBeforeMidnight = 1775001599LL * 1'000'000'000;
constexpr int64_t kMs = 1'000'000;

#define START_SERVERS(ch, n)                 \
  REQUIRE_CLICKHOUSE();                      \
  ClickHouseServers ch;                      \
  do {                                       \
    std::string why_;                        \
    ASSERT_TRUE(ch.start(n, &why_)) << why_; \
  } while (0)

fleet::Endpoint endpoint(const ClickHouseServers& ch, size_t i, const std::string& db) {
  auto e = fleet::parse_endpoint(ch.url(i, db), false);
  EXPECT_TRUE(e);
  return *e;
}

void expect_exact(const ClickHouseServers& ch, size_t i, const std::string& db,
                  const std::string& file, const std::string& node = "") {
  long long total = 0;
  for (const auto& [table, c] : compare_counts(ch, i, db, file, node)) {
    EXPECT_EQ(c.rows, c.file) << table << ": rows in ClickHouse vs the file";
    EXPECT_EQ(c.duplicates, 0) << table;
    total += c.file;
  }
  EXPECT_GT(total, 0);
}

TEST(FleetClickHouse, LocalAndDistributedDdlRunOnTwoShards) {
  START_SERVERS(ch, 2);
  for (size_t i = 0; i < 2; ++i) {
    fleet::ClickHouseClient c(endpoint(ch, i, "ingero"));
    for (const auto& s : fleet::local_ddl("ingero")) ASSERT_TRUE(c.execute(s)) << s;
    // Idempotent: the shipper runs it on every (re)connection.
    for (const auto& s : fleet::local_ddl("ingero")) ASSERT_TRUE(c.execute(s)) << s;
  }
  fleet::ClickHouseClient c0(endpoint(ch, 0, "fleet"));
  for (const auto& s : fleet::distributed_ddl("fleet", ClickHouseServers::kClusterName, "ingero"))
    ASSERT_TRUE(c0.execute(s)) << s;
  std::string a = temp_path("a.db"), b = temp_path("b.db");
  write_session(a, "node-a", kBeforeMidnight, 300, kMs);
  write_session(b, "node-b", kBeforeMidnight, 1200, kMs);  // crosses midnight
  for (auto [file, i] : {std::pair{a, 0}, std::pair{b, 1}}) {
    auto s = fleet::Shipper::create(file, endpoint(ch, size_t(i), "ingero"));
    ASSERT_TRUE(s);
    EXPECT_TRUE((*s)->drain(std::chrono::seconds(60)).caught_up);
  }
  EXPECT_EQ(ch.query(0, "SELECT node, count() FROM fleet.events GROUP BY node ORDER BY node"),
            "node-a\t300\nnode-b\t1200\n");
  EXPECT_EQ(ch.query(0, "SELECT status, count() FROM fleet.calls GROUP BY status ORDER BY status"),
            "error\t300\nok\t1200\n");
  EXPECT_EQ(ch.query(0, "SELECT count() FROM fleet.host_events"), "0\n");
  // One partition per UTC day on each shard.
  EXPECT_EQ(ch.query(1,
                     "SELECT DISTINCT partition FROM system.parts WHERE database = 'ingero' "
                     "AND table = 'events' AND active ORDER BY partition"),
            "20260331\n20260401\n");
}

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
  ASSERT_TRUE(c.insert("s", "i, s, n", tsv));
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
  auto r = (*s)->drain(std::chrono::seconds(2));
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

// A trace of `n` launches on one thread, 10 us apart, most of them foldable (tiered
// retention folds those under 0.99 x the op's p95).
void write_launches(const std::string& path, int n) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  (*w)->set_folding(true);  // as `ingero trace` writes: blocks folded as they close
  store::SessionInfo si;
  si.node = si.host = "node-f";
  si.started_at_ns = kBeforeMidnight - 3600 * 1'000'000'000LL;
  si.mono_offset_ns = si.started_at_ns;
  ASSERT_TRUE((*w)->begin_session(si));
  for (int i = 0; i < n; ++i) {
    hal::Event e;
    e.ts_ns = uint64_t(1'000'000 + int64_t(i) * 10'000);
    e.dur_ns = 1000 + uint64_t(i % 100) * 10;
    e.pid = e.tid = 4001;
    e.set_comm("python3");
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    e.op = "cudaLaunchKernel";
    e.kind = hal::EventKind::kLaunch;
    e.has_ret = true;
    e.set(hal::Field::kStream, 0x5a);
    ASSERT_TRUE((*w)->add(e));
  }
  store::SessionEnd end;
  end.stopped_at_ns = si.started_at_ns + 2'000'000'000;
  end.exit_reason = "duration";
  ASSERT_TRUE((*w)->finish(end));
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

// A database whose cgroup_metadata was created before the name columns gains them when the
// shipper starts; the names ship, a row ships again when a name changes, and the ClickHouse
// source reads them back as the file's source does.
TEST(FleetShip, CgroupNamesShipAndAnOlderTableGainsTheirColumns) {
  START_SERVERS(ch, 1);
  ch.query(0, "CREATE DATABASE ingero");
  ch.query(0,
           "CREATE TABLE ingero.cgroup_metadata (node String, cgroup_id Int64, container_id "
           "String, cgroup_path String, pod_name String, namespace String) ENGINE = MergeTree "
           "ORDER BY (node, cgroup_id)");
  std::string db = temp_path("trace.db");
  write_session(db, "node-c", kBeforeMidnight, 10, kMs);
  auto name = [&](const char* container) {
    auto w = store::TraceWriter::open(db);
    ASSERT_TRUE(w);
    store::CgroupRow r;
    r.cgroup_id = 7;
    r.path = "/kubepods.slice/x/cri-containerd-" + std::string(64, 'a') + ".scope";
    r.container_id = std::string(64, 'a');
    r.pod = "etl-5d8f";
    r.pod_namespace = "team-b";
    if (container) r.container = container;
    r.pod_uid = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9";
    r.qos = "besteffort";
    r.runtime = "containerd";
    ASSERT_TRUE((*w)->add_cgroup(r));
    ASSERT_TRUE((*w)->finish({}));
  };
  name(nullptr);
  auto ship = [&] {
    auto s = fleet::Shipper::create(db, endpoint(ch, 0, "ingero"));
    ASSERT_TRUE(s) << s.error().message;
    auto r = (*s)->drain(std::chrono::seconds(60));
    EXPECT_TRUE(r.caught_up) << r.last_error;
  };
  ship();
  EXPECT_EQ(ch.query(0,
                     "SELECT cgroup_id, pod_name, namespace, container_name, pod_uid, qos_class, "
                     "runtime, names_from FROM ingero.cgroup_metadata ORDER BY cgroup_id "
                     "FORMAT TabSeparated"),
            "7\tetl-5d8f\tteam-b\t\\N\t5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9\tbesteffort\t"
            "containerd\t\\N\n4242\t\t\t\\N\t\\N\t\\N\t\\N\t\\N\n");
  ship();  // nothing new
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.cgroup_metadata"), 2);
  name("etl");
  ship();  // the container's name arrived: the row ships again
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.cgroup_metadata WHERE cgroup_id = 7"), 2);
  fleet::ClickHouseTraceSource src(
      std::make_unique<fleet::ClickHouseClient>(endpoint(ch, 0, "ingero")));
  auto c = src.cgroups();
  ASSERT_TRUE(src.error().empty()) << src.error();
  ASSERT_EQ(c.count(7), 1u);
  EXPECT_EQ(c[7].pod, "etl-5d8f");
  EXPECT_EQ(c[7].pod_namespace, "team-b");
  EXPECT_EQ(c[7].container, "etl");
  EXPECT_EQ(c[7].qos, "besteffort");
  EXPECT_EQ(c[4242].path, "/system.slice/train.service");
  EXPECT_EQ(c[4242].container, "");
}

TEST(FleetSource, ExplainAndExportOverClickHouseEqualTheFile) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("demo.db"), out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "demo", "nccl-straggler", "--db", db}, &out, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  EXPECT_NE(out.find("ClickHouse has every row of the file"), std::string::npos) << out;
  std::string from_file, from_ch;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &from_file, &err), 0);
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"},
                        &from_ch, &err),
            0)
      << err;
  auto a = nlohmann::json::parse(from_file), b = nlohmann::json::parse(from_ch);
  EXPECT_EQ(b["node"], "demo");
  for (auto* j : {&a, &b}) {
    j->erase("trace");
    j->erase("node");
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(b["chains"][0]["rule"], "collective_straggler");
  // The Perfetto export too, byte for byte.
  ASSERT_EQ(run_command({INGERO_BIN, "export", "--db", db}, &from_file, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "export", "--source", ch.source(0, "ingero")}, &from_ch, &err),
            0)
      << err;
  EXPECT_GT(from_file.size(), 100000u);
  EXPECT_EQ(from_file, from_ch);
}

TEST(FleetQuery, ReadOnlyStreamedTsvAndJson) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("trace.db"), out, err;
  write_session(db, "node-a", kBeforeMidnight, 10, kMs);
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  std::string src = ch.source(0, "ingero");
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--source", src,
                         "SELECT op, count() AS n FROM calls GROUP BY op ORDER BY op"},
                        &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "op\tn\ncudaLaunchKernel\t5\ncudaStreamSynchronize\t5\n");
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--source", src, "--json", "--limit", "2",
                         "SELECT src_id, comm FROM events ORDER BY src_id"},
                        &out, &err),
            0);
  EXPECT_EQ(nlohmann::json::parse(out),
            nlohmann::json::parse(R"([{"src_id":1,"comm":"rank\t\"x\""},)"
                                  R"({"src_id":2,"comm":"rank\t\"x\""}])"));
  EXPECT_NE(err.find("truncated at row limit 2"), std::string::npos);
  for (const char* sql : {"DROP TABLE events", "INSERT INTO events (node) VALUES ('x')",
                          "SELECT 1 SETTINGS readonly = 0"}) {
    EXPECT_EQ(run_command({INGERO_BIN, "query", "--source", src, sql}, &out, &err), 1) << sql;
    EXPECT_NE(err.find("readonly"), std::string::npos) << sql << ": " << err;
  }
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), 10);
}

namespace {

// A launch-bound loop of pid 42 on node "gpu-node" (60 steps of 2.13 ms: 200 launches, then a
// loss read) with NVML samples of it at 9% and an Xid during the loop.
void write_device_trace(const std::string& path) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  constexpr int64_t kStart = 1'800'000'000'000'000'000, kStep = 2'130'000;
  store::SessionInfo si;
  si.node = si.host = "gpu-node";
  si.started_at_ns = kStart;
  si.mono_offset_ns = kStart;  // monotonic 0 = the session's start
  ASSERT_TRUE((*w)->begin_session(si));
  auto call = [&](int64_t ts, int64_t dur, hal::EventKind kind, const char* op) {
    hal::Event e = runtime_call(uint64_t(ts), uint64_t(dur), 42, 42, kind, op);
    e.set(hal::Field::kStream, 0);
    return e;
  };
  for (int s = 0; s < 60; ++s) {
    int64_t t = int64_t(s) * kStep;
    for (int k = 0; k < 200; ++k)
      ASSERT_TRUE(
          (*w)->add(call(t + k * 10'000, 6'000, hal::EventKind::kLaunch, "cudaLaunchKernel")));
    hal::Event copy = call(t + 2'050'000, 10'000, hal::EventKind::kMemcpy, "cudaMemcpyAsync");
    copy.set(hal::Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    ASSERT_TRUE((*w)->add(copy));
    ASSERT_TRUE(
        (*w)->add(call(t + 2'062'000, 20'000, hal::EventKind::kSync, "cudaStreamSynchronize")));
  }
  std::vector<hal::DeviceSample> rows;
  for (int64_t t = 20'000'000; t <= 60 * kStep + 20'000'000; t += 20'000'000) {
    hal::DeviceSample d;
    d.ts_ns = kStart + t;
    d.period_ns = 20'000'000;
    d.source = "nvml";
    d.uuid = "GPU-fleet-0";
    d.sm_util = 30;
    d.temperature_c = 44;
    rows.push_back(d);
    d.pid = 42;
    d.sm_util = 9;
    d.temperature_c.reset();
    rows.push_back(d);
  }
  ASSERT_TRUE((*w)->add_device_samples(rows));
  ASSERT_TRUE((*w)->add_device_events({{kStart + 30 * kStep, "nvml", 0, "GPU-fleet-0", "xid", 13,
                                        "Xid 13 (Graphics Engine Exception)"}}));
  store::SessionEnd end;
  end.stopped_at_ns = kStart + 60 * kStep + 1'000'000'000;
  end.exit_reason = "duration";
  ASSERT_TRUE((*w)->finish(end));
}

}  // namespace

// The device side channel's rows ship like the others, NULLs as NULLs, and explain over
// ClickHouse measures the steps and finds the Xid as the file does.
TEST(FleetSource, DeviceRowsShipAndExplainAlike) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("device.db"), out, err;
  write_device_trace(db);
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  expect_exact(ch, 0, "ingero", db);
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.device_samples"),
            query_int(db, "SELECT count(*) FROM device_samples"));
  EXPECT_EQ(ch.query_int(0, "SELECT countIf(isNull(temperature_c)) FROM ingero.device_samples"),
            query_int(db, "SELECT count(*) FROM device_samples WHERE temperature_c IS NULL"));
  EXPECT_EQ(ch.query_int(0, "SELECT code FROM ingero.device_events WHERE kind = 'xid'"), 13);
  std::string from_file, from_ch;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &from_file, &err), 0);
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"},
                        &from_ch, &err),
            0)
      << err;
  auto a = nlohmann::json::parse(from_file), b = nlohmann::json::parse(from_ch);
  ASSERT_EQ(a["steps"].size(), 1u);
  EXPECT_EQ(a["steps"][0]["summary"]["gpu_text"], "GPU busy 9% (NVML)");
  EXPECT_EQ(b["steps"][0]["summary"]["gpu_text"], a["steps"][0]["summary"]["gpu_text"]);
  auto rules = [](const nlohmann::json& j) {
    std::vector<std::string> r;
    for (const auto& c : j["chains"])
      r.push_back(c["rule"].get<std::string>() + "/" + c["severity"].get<std::string>());
    return r;
  };
  EXPECT_EQ(rules(a), rules(b));
  EXPECT_EQ(rules(a).front(), "launch_bound/HIGH");
  bool xid = false;
  for (const auto& c : b["chains"]) xid |= c["rule"] == "device_error";
  EXPECT_TRUE(xid) << from_ch;
}

}  // namespace
}  // namespace ingero::test

// The fleet's schema on real ClickHouse servers (the Debian 12 package, 18.16): the local and
// Distributed DDL, and databases made by other builds or not by ingero at all: missing
// columns added, views made anew, foreign tables refused. (ship_test.cc: shipping.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "fleet/ch_schema.h"
#include "fleet/clickhouse_source.h"
#include "fleet/shipper.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

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

// A database made before the wakeup columns (waker_pid, waker_tid, runq_ns) is brought up to
// date: 18.16 checks a view's SELECT even where the view exists, and the views came before the
// ALTERs that add the columns, so every ship was refused ("Unknown identifier: runq_ns").
TEST(FleetShip, ADatabaseMadeBeforeAColumnIsBroughtUpToDate) {
  START_SERVERS(ch, 1);
  fleet::ClickHouseClient c(endpoint(ch, 0, "older"));
  for (std::string ddl : fleet::local_ddl("older")) {
    for (const char* col : {"waker_pid", "waker_tid", "runq_ns"})
      for (const std::string& cut :
           {std::string(",\n  ") + col + " Nullable(Int64)", std::string(", ") + col})
        for (size_t at; (at = ddl.find(cut)) != std::string::npos;) ddl.erase(at, cut.size());
    ASSERT_TRUE(c.execute(ddl)) << ddl;
  }
  ASSERT_EQ(ch.query_int(0,
                         "SELECT count() FROM system.columns WHERE database = 'older' AND "
                         "name = 'runq_ns'"),
            0);
  std::string db = temp_path("older.db");
  write_launches(db, 1000);
  auto s = fleet::Shipper::create(db, endpoint(ch, 0, "older"));
  ASSERT_TRUE(s) << s.error().message;
  auto r = (*s)->drain(std::chrono::seconds(60));
  EXPECT_TRUE(r.caught_up) << r.last_error;
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM older.events"), 1000);
  // Added to every table that has it; the views made before it are made anew with it
  // (ship_state.h: drop_outdated_views).
  long long tables = 0, views = 0;
  for (const auto& t : fleet::fleet_tables()) tables += t.column_index("runq_ns") >= 0;
  for (auto v : {fleet::View::kCalls, fleet::View::kHostEvents}) {
    auto names = fleet::view_column_names(v);
    views += std::count(names.begin(), names.end(), "runq_ns");
  }
  ASSERT_GT(tables, 0);
  ASSERT_GT(views, 0);
  EXPECT_EQ(ch.query_int(0,
                         "SELECT count() FROM system.columns WHERE database = 'older' AND "
                         "name = 'runq_ns'"),
            tables + views);
}

// A table of ingero's name that is not ingero's: its ALTER (a Log table has none) or every
// insert (a column of another type) failed the same way until --timeout, 5 minutes by default,
// said to be "retried". Refused at once now, naming what is wrong.
TEST(FleetShip, ATableThatIsNotIngerosEndsTheShipAtOnce) {
  START_SERVERS(ch, 1);
  ch.query(0, "CREATE DATABASE foreign1");
  ch.query(0, "CREATE TABLE foreign1.events (x UInt8) ENGINE = Log");
  ch.query(0, "CREATE DATABASE foreign2");
  ch.query(0, "CREATE TABLE foreign2.events (node String, pid UInt64) ENGINE = Log");
  std::string db = temp_path("foreign.db");
  write_launches(db, 100);
  const std::pair<const char*, std::string> cases[] = {
      {"foreign1", "foreign1.events has none of ingero's columns: the table is not ingero's"},
      {"foreign2",
       "foreign2.events.pid is UInt64 where ingero writes UInt32: the table is not "
       "ingero's"}};
  for (const auto& [database, said] : cases) {
    SCOPED_TRACE(database);
    std::string out, err;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, database),
                           "--timeout", "60s"},
                          &out, &err),
              1);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
    EXPECT_NE(err.find(said), std::string::npos) << err;
    EXPECT_NE(err.find("(retrying cannot mend this)"), std::string::npos) << err;
  }
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

}  // namespace
}  // namespace ingero::test

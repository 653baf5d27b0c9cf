// `ingero ship` as a command run by hand or by a job: an insert a shipper left running on the
// server, and a stop signal while it ships. (ship_test.cc: the shipper itself.)
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "fleet/ship_state.h"
#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// Found by a hostile-testing helper (helper-78): an insert cut off by a stalled server (or a
// killed shipper) ran on there after the shipper, or a new `ingero ship`, had read the resume
// point, and its rows were stored twice: "ClickHouse has every row of the file" over 203,920
// events of a file's 103,920. The resume point is read once no insert of the file runs; here
// one a shipper began (its query_id the file's), slowed to 2 ms a row, is still running.
TEST(FleetShip, AnInsertStillRunningEndsBeforeTheResumePointIsRead) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("inflight.db"), out, err;
  write_launches(db, 1000);
  ASSERT_EQ(
      run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "src")}, &out, &err),
      0)
      << err;
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--ddl", "--create", "--clickhouse", ch.url(0, "dst")},
                        &out, &err),
            0)
      << err;
  const auto file_start = uint64_t(query_int(db, "SELECT min(started_at) FROM sessions"));
  const std::string id = fleet::ship_query_prefix(file_start) + "999-1-1";
  std::thread stale([&] {
    auto r = http_request("127.0.0.1", ch.http_port(0), "POST", "/?query_id=" + id,
                          "INSERT INTO dst.events SELECT * FROM src.events WHERE "
                          "sleepEachRow(0.002) = 0",
                          {}, std::chrono::seconds(60));
    EXPECT_EQ(r.status, 200) << r.body;
  });
  const std::string running = "SELECT count() FROM system.processes WHERE query_id = '" + id + "'";
  for (int i = 0; i < 200 && ch.query_int(0, running) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(ch.query_int(0, running), 1);
  EXPECT_EQ(
      run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "dst")}, &out, &err),
      0)
      << err;
  stale.join();
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM dst.events"), 1000);
  expect_exact(ch, 0, "dst", db);
}

// Found by a hostile-testing helper (helper-78): SIGTERM or SIGINT ended `ingero ship` at
// once, exit 143 or 130, without a word of what was shipped or left. It ends the drain and says
// both, as every other end does.
TEST(FleetShip, AStopSignalEndsTheShipAndSaysWhatIsLeft) {
  std::string db = temp_path("stopped.db");
  write_launches(db, 300);
  // Nothing listens there: every try is refused, and retried until --timeout.
  const std::string url = "http://127.0.0.1:" + std::to_string(free_tcp_port()) + "/ingero";
  for (int sig : {SIGTERM, SIGINT}) {
    auto p =
        Subprocess::spawn({INGERO_BIN, "ship", "--db", db, "--clickhouse", url, "--timeout", "5m"});
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.wait_stderr_line("retried", std::chrono::seconds(60))) << p.err();
    p.signal(sig);
    EXPECT_EQ(p.wait(std::chrono::seconds(30)), 128 + sig) << p.err();
    EXPECT_NE(p.out().find(" rows left"), std::string::npos) << p.out();
    EXPECT_NE(p.err().find(std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                           ": stopped; the rows left ship on the next run"),
              std::string::npos)
        << p.err();
  }
}

// Found by a hostile-testing helper (helper-78): the merge of files shipped before (three
// converted nodes, then `merge` of all three) shipped under its own name, and ClickHouse held
// gpu-node-02's events twice (400 of 200), unsaid. Refused now, before anything is sent.
TEST(FleetShip, AMergeOfShippedFilesIsRefusedNotShippedTwice) {
  START_SERVERS(ch, 1);
  std::string a = temp_path("merge-a.db"), b = temp_path("merge-b.db"), m = temp_path("m.db");
  std::string out, err;
  write_session(a, "node-a", kBeforeMidnight, 10, kMs);
  write_session(b, "node-b", kBeforeMidnight + 3600 * 1'000'000'000LL, 20, kMs);
  // Each node's file converted on its own (as the original tool's files are), and shipped.
  for (const std::string& f : {a, b}) {
    ASSERT_EQ(run_command({INGERO_BIN, "merge", f, "-o", f + ".one.db"}, &out, &err), 0) << err;
    ASSERT_EQ(run_command(
                  {INGERO_BIN, "ship", "--db", f + ".one.db", "--clickhouse", ch.url(0, "ingero")},
                  &out, &err),
              0)
        << err;
  }
  // Then both merged into one file: its first session is node-a's, shipped from a file of the
  // same start; node-b's was shipped from a file of its own.
  ASSERT_EQ(run_command({INGERO_BIN, "merge", a, b, "-o", m}, &out, &err), 0) << err;
  EXPECT_EQ(
      run_command({INGERO_BIN, "ship", "--db", m, "--clickhouse", ch.url(0, "ingero")}, &out, &err),
      1);
  EXPECT_NE(err.find("holds this file's session of node 'node-b'"), std::string::npos) << err;
  EXPECT_NE(err.find("is a copy or a merge of it"), std::string::npos) << err;
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), 30);
  // A file shipped again is that file: nothing new, nothing refused.
  ASSERT_EQ(
      run_command({INGERO_BIN, "ship", "--db", a + ".one.db", "--clickhouse", ch.url(0, "ingero")},
                  &out, &err),
      0)
      << err;
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), 30);
}

}  // namespace
}  // namespace ingero::test

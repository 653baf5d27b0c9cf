// What makes a shipped trace the trace it is in the fleet: a file is named by its node and
// start, and a node is one machine.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// Found by a hostile-testing helper: every demo file had node "demo" and one start, and a file
// is named in the fleet by its node and start: the second scenario shipped to a database was
// taken for the first, none of its events stored, and ship said "every row". Each scenario
// starts at its own hour.
TEST(FleetShip, TwoDemoScenariosShipToOneDatabaseWhole) {
  START_SERVERS(ch, 1);
  long long events = 0;
  for (const char* scenario : {"incident", "nccl-straggler"}) {
    SCOPED_TRACE(scenario);
    const std::string db = temp_path(std::string(scenario) + ".db");
    std::string out, err;
    ASSERT_EQ(run_command({INGERO_BIN, "demo", scenario, "--db", db}, &out, &err), 0) << err;
    events += query_int(db, "SELECT coalesce(max(id), 0) FROM events");
    ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")},
                          &out, &err),
              0)
        << err;
  }
  EXPECT_GT(events, 60000);
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), events);
  EXPECT_EQ(ch.query_int(0, "SELECT uniqExact(file_start) FROM ingero.events"), 2);
}

// Two files under one name (node and start) that are different traces: the second's rows would
// be taken for the first's (ship said "every row", none stored). ClickHouse holding a session of
// that name from another host (or with other flags) refuses the ship at once; a copy of the same
// trace is the same file, its rows there already.
TEST(FleetShip, AnotherTraceUnderTheSameNameIsRefusedNotTakenForIt) {
  START_SERVERS(ch, 1);
  const std::string a = temp_path("a.db"), same = temp_path("same.db"), other = temp_path("b.db");
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "demo", "incident", "--db", a}, &out, &err), 0) << err;
  std::filesystem::copy_file(a, same);
  std::filesystem::copy_file(a, other);
  alter_trace(other, "UPDATE sessions SET host = 'gpu-host-2'");
  const std::string url = ch.url(0, "ingero");
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", a, "--clickhouse", url}, &out, &err), 0)
      << err;
  const std::string rows = out.substr(0, out.find(" of "));  // "shipped N rows"
  ASSERT_EQ(rows.rfind("shipped ", 0), 0u) << out;
  const long long events = ch.query_int(0, "SELECT count() FROM ingero.events");
  EXPECT_EQ(events, query_int(a, "SELECT coalesce(max(id), 0) FROM events"));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(
      run_command({INGERO_BIN, "ship", "--db", other, "--clickhouse", url, "--timeout", "60s"},
                  &out, &err),
      1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_NE(err.find(": ClickHouse at "), std::string::npos) << err;
  EXPECT_NE(err.find(" holds another trace under this file's name (node 'demo', started at "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(": host 'synthetic', flags 'demo,incident,synthetic', where this file's "
                     "session is host 'gpu-host-2', flags 'demo,incident,synthetic'"),
            std::string::npos)
      << err;
  // Said once, and every row of the file is left (it said "0 rows left", counting against the
  // other trace's rows, and printed the refusal twice).
  EXPECT_EQ(err.find("holds another trace"), err.rfind("holds another trace")) << err;
  EXPECT_NE(out.find("shipped 0 rows of "), std::string::npos) << out;
  EXPECT_NE(out.find("; " + rows.substr(8, rows.size() - 8 - 5) + " rows left\n"),
            std::string::npos)
      << out << " (the first ship: " << rows << ")";
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), events);
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", same, "--clickhouse", url}, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("ClickHouse has every row of the file"), std::string::npos) << out;
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), events);
}

// Two hosts traced under one --node (containers whose hostname is "localhost", a copied unit
// file): the fleet read their rows as one machine's, pids, clocks and stacks mixed, and
// neither the ship nor explain --source said so. Both say it now; the rows are shipped.
TEST(FleetShip, TwoHostsUnderOneNodeNameAreSaidToBeMixed) {
  START_SERVERS(ch, 1);
  const std::string a = temp_path("a.db"), b = temp_path("b.db");
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "demo", "incident", "--db", a}, &out, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "demo", "nccl-straggler", "--db", b}, &out, &err), 0) << err;
  alter_trace(b, "UPDATE sessions SET host = 'gpu-host-2'");
  const std::string url = ch.url(0, "ingero");
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", a, "--clickhouse", url}, &out, &err), 0)
      << err;
  EXPECT_EQ(err.find("holds sessions of node"), std::string::npos) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", b, "--clickhouse", url}, &out, &err), 0)
      << err;
  EXPECT_NE(err.find("ingero ship: ClickHouse at " + url +
                     " holds sessions of node 'demo' from another host, 'synthetic', beside "
                     "this file's host 'gpu-host-2': a fleet reads a node's rows as one "
                     "machine's, so explain --source mixes their processes, clocks and stacks. "
                     "Give each host its own --node (the default is its hostname)\n"),
            std::string::npos)
      << err;
  EXPECT_EQ(ch.query_int(0, "SELECT uniqExact(file_start) FROM ingero.events"), 2);
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--source", url}, &out, &err), 0) << err;
  EXPECT_NE(err.find("ingero explain: node 'demo' holds the sessions of 2 hosts ('gpu-host-2', "
                     "'synthetic'): they are read as one machine, their processes, clocks and "
                     "stacks mixed; trace each host with its own --node\n"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace ingero::test

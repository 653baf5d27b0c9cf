// A tracer whose exit waits for ClickHouse (--clickhouse-exit-timeout) and ClickHouse away:
// a stop signal during that wait changed nothing, so with a long timeout only SIGKILL ended it
// early (a hostile test's found it holding on for 1000 s). A second stop signal now gives up
// the wait at once; what was not shipped stays in the file, and says how it ships later.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "test_paths.h"
#include "tests/support/silent_server.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(ShipExit, ASecondStopSignalGivesUpWaitingForClickHouse) {
  REQUIRE_BPF();
  SilentServer ch;
  const std::string url = "http://127.0.0.1:" + std::to_string(ch.port()) + "/ingero";
  std::string db = temp_path("long-wait.db");
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--no-stack", "--db", db,
                                   "--clickhouse", url, "--clickhouse-exit-timeout", "10m"});
  ASSERT_TRUE(tracer.wait_stderr_line("ingero: tracing", std::chrono::seconds(120)))
      << tracer.err();
  ASSERT_TRUE(ch.wait_for_request(std::chrono::seconds(30))) << "the shipper never asked";
  tracer.signal(SIGTERM);
  // The session's end begins; its wait for ClickHouse would last 10 minutes.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto t0 = std::chrono::steady_clock::now();
  tracer.signal(SIGTERM);
  int rc = tracer.wait(std::chrono::seconds(120));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(rc, 0) << tracer.err();
  EXPECT_LT(secs, 10.0) << "exit took " << secs << " s after the second SIGTERM";
  std::cout << "exit after a second SIGTERM, ClickHouse stalled: " << secs << " s\n";
  EXPECT_NE(tracer.err().find("ingero: SIGTERM again: stopped waiting for ClickHouse\n"),
            std::string::npos)
      << tracer.err();
  EXPECT_NE(tracer.err().find("rows of " + db + " are not in ClickHouse at " + url + " yet"),
            std::string::npos)
      << tracer.err();
  EXPECT_EQ(query_rows(db, "SELECT exit_reason, stopped_at > 0 FROM sessions"),
            (std::vector<std::vector<std::string>>{{"SIGTERM", "1"}}));
}

// Nothing listening: the traced command's exit waited out the whole --clickhouse-exit-timeout
// (`trace --clickhouse http://127.0.0.1:1/ingero -- cuda_calls` took 11.3 s; with 10m, ten
// minutes). Two refused tries half a second apart end the wait; the rows stay in the file.
TEST(ShipExit, AnUnreachableClickHouseDoesNotHoldTheExit) {
  REQUIRE_BPF();
  const std::string url = "http://127.0.0.1:1/ingero";
  std::string db = temp_path("refused.db");
  auto tracer =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--no-stack", "--db", db, "--clickhouse",
                         url, "--clickhouse-exit-timeout", "10m", "--", "/bin/sleep", "1"});
  ASSERT_TRUE(tracer.wait_stderr_line("ingero: attached", std::chrono::seconds(180)))
      << tracer.err();
  auto t0 = std::chrono::steady_clock::now();
  int rc = tracer.wait(std::chrono::seconds(300));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(rc, 0) << tracer.err();
  // The old exit took 600 s here; a loaded machine's session end takes a few.
  EXPECT_LT(secs, 120.0) << "exit took " << secs << " s after the probes were attached";
  std::cout << "exit after a 1 s command, ClickHouse refused: " << secs << " s\n";
  EXPECT_NE(tracer.err().find("rows of " + db + " are not in ClickHouse at " + url +
                              " yet (ClickHouse at " + url + ": cannot connect ("),
            std::string::npos)
      << tracer.err();
}

}  // namespace
}  // namespace ingero::test

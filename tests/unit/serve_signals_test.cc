// How the servers end: SIGHUP (a closed terminal, a supervisor's reload) killed `mcp --http`
// and `dashboard` with status 129 and no word, where SIGINT and SIGTERM stop them; and an MCP
// client that closed the server's stdout before its answers left it exiting 0, unsaid.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using namespace std::chrono_literals;

TEST(ServeSignals, SighupStopsEveryServerAsSigtermDoes) {
  std::string db = write_free_calls(temp_path("hup.db"), 10);
  for (std::string cmd : {"mcp", "dashboard"}) {
    auto p = Subprocess::spawn({INGERO_BIN, cmd, "--db", db, "--http", "127.0.0.1:0"});
    ASSERT_TRUE(p.wait_stderr_line("serving", 10s)) << cmd << ": " << p.err();
    p.signal(SIGHUP);
    EXPECT_EQ(p.wait(10s), 0) << cmd << ": " << p.err();
    EXPECT_NE(p.err().find("ingero " + cmd + ": stopping\n"), std::string::npos) << p.err();
  }
}

// A stop while a report is being built waited for it (14 s on a trace of 940,000 calls, past a
// service manager's patience): after 3 s the dashboard leaves it unfinished, says so and exits.
TEST(ServeSignals, ADashboardStopsWithinSecondsWhileAReportIsBuilt) {
  std::string db = write_free_calls(temp_path("slow-report.db"), 10);
  auto p = Subprocess::spawn({INGERO_BIN, "dashboard", "--db", db, "--http", "127.0.0.1:0"},
                             {"INGERO_TEST_REPORT_PAUSE_MS=60000"});
  ASSERT_TRUE(p.wait_stderr_line("serving", 10s)) << p.err();
  std::smatch m;
  const std::string err = p.err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("http://127\\.0\\.0\\.1:([0-9]+)"))) << err;
  const int port = std::stoi(m[1]);
  std::thread client([port] { (void)http_request("127.0.0.1", port, "GET", "/api/report", ""); });
  std::this_thread::sleep_for(500ms);  // the report is being built
  auto t0 = std::chrono::steady_clock::now();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0) << p.err();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_NE(p.err().find("ingero dashboard: stopped with a report still being built (left "
                         "unfinished)\n"),
            std::string::npos)
      << p.err();
  client.join();
}

TEST(ServeSignals, AnMcpClientThatClosedStdoutIsSaid) {
  std::string db = write_free_calls(temp_path("closed.db"), 10);
  // stdout is a pipe whose reader is gone (`true` reads nothing and exits).
  std::string out, err;
  ASSERT_EQ(run_command({"/bin/bash", "-c",
                         "{ printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":"
                         "\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\","
                         "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":"
                         "\"1\"}}}'; sleep 1; } | '" INGERO_BIN "' mcp --db '" +
                             db + "' | true; echo \"rc=${PIPESTATUS[1]}\""},
                        &out, &err),
            0);
  EXPECT_EQ(out, "rc=1\n");
  EXPECT_NE(err.find("ingero mcp: writing to standard output failed: the client closed it\n"),
            std::string::npos)
      << err;
  // A full standard output is no client that left: its cause is said (it read "the client
  // closed it" whatever the cause).
  ASSERT_EQ(
      run_command(
          {"/bin/bash", "-c",
           "printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}' | '" INGERO_BIN
           "' mcp --db '" +
               db + "' > /dev/full; echo \"rc=$?\""},
          &out, &err),
      0);
  EXPECT_EQ(out, "rc=1\n");
  EXPECT_NE(err.find("ingero mcp: writing to standard output failed: No space left on device\n"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace ingero::test

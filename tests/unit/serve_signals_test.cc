// How the servers end: SIGHUP (a closed terminal, a supervisor's reload) killed `mcp --http`
// and `dashboard` with status 129 and no word, where SIGINT and SIGTERM stop them; and an MCP
// client that closed the server's stdout before its answers left it exiting 0, unsaid.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
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

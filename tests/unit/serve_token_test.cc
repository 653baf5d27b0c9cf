// The servers' bearer token comes from an environment variable: one set but empty (a secret
// that failed to be filled in) served the trace to anyone, where a token of one space was
// refused as "empty". Both servers now refuse it before they listen.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(ServeToken, ATokenVariableSetButEmptyIsRefusedByEveryServer) {
  std::string db = write_free_calls(temp_path("token.db"), 10);
  struct Case {
    std::vector<std::string> args;
    std::string env, said;
  };
  const std::vector<Case> cases = {
      {{"mcp", "--db", db, "--http", "127.0.0.1:0"},
       "INGERO_MCP_TOKEN",
       "ingero mcp: $INGERO_MCP_TOKEN is set but empty: unset it to serve without a token, or "
       "give it the token\n"},
      {{"dashboard", "--db", db, "--http", "127.0.0.1:0"},
       "INGERO_DASHBOARD_TOKEN",
       "ingero dashboard: $INGERO_DASHBOARD_TOKEN is set but empty: unset it to serve without a "
       "token, or give it the token\n"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {INGERO_BIN};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    std::string out, err;
    // A server that started anyway runs until the timeout: rc -1.
    int rc = run_command(argv, &out, &err, {c.env + "="}, std::chrono::seconds(10));
    EXPECT_EQ(rc, 2) << c.args[0] << ": " << err;
    EXPECT_EQ(err, c.said) << c.args[0];
  }
}

}  // namespace
}  // namespace ingero::test

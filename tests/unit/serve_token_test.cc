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

// A variable named with --token-env that is not set (a typo, a secret not mounted) served the
// trace to anyone, saying only "no token: set TYPO_VAR to require one". The default variable
// unset still serves without a token, as documented.
TEST(ServeToken, AVariableNamedOnPurposeButNotSetIsRefused) {
  std::string db = write_free_calls(temp_path("token-env.db"), 10);
  for (const std::string cmd : {"mcp", "dashboard"}) {
    std::string out, err;
    int rc = run_command({INGERO_BIN, cmd, "--db", db, "--http", "127.0.0.1:0", "--token-env",
                          "INGERO_TEST_TYPO_TOKEN"},
                         &out, &err, {}, std::chrono::seconds(10));
    EXPECT_EQ(rc, 2) << cmd << ": " << err;
    EXPECT_EQ(err, "ingero " + cmd +
                       ": --token-env INGERO_TEST_TYPO_TOKEN: the variable is not set: set it to "
                       "the token, or leave --token-env out to serve without one\n")
        << cmd;
  }
}

// A token a browser cannot send (beyond ASCII) is refused before the server listens.
TEST(ServeToken, ATokenBeyondAsciiIsRefused) {
  std::string db = write_free_calls(temp_path("token-utf8.db"), 10);
  std::string out, err;
  int rc = run_command({INGERO_BIN, "dashboard", "--db", db, "--http", "127.0.0.1:0"}, &out, &err,
                       {"INGERO_DASHBOARD_TOKEN=\xd0\xbf\xd0\xb0\xe2\x82\xac"},
                       std::chrono::seconds(10));
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("bytes beyond ASCII (a browser sends only visible ASCII in a header)"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace ingero::test

// Runs tests/mcp/sdk_client.mjs: the official MCP TypeScript SDK as the client of ingero mcp.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/trace_db.h"

namespace ingero::test {

// Why the SDK cannot run here ("" when it can): node missing, or tests/mcp/node_modules not
// installed (scripts/setup.sh --with-tests runs npm ci there).
std::string mcp_sdk_unavailable();
// node sdk_client.mjs ARGS...; the report it printed, or {"fatal": ...}.
nlohmann::json run_mcp_sdk(const std::vector<std::string>& args,
                           const std::vector<std::string>& env = {});

}  // namespace ingero::test

// Skips loudly without the SDK, but fails under CI=true, where setup installs it.
#define REQUIRE_MCP_SDK()                                                      \
  do {                                                                         \
    std::string why_ = ::ingero::test::mcp_sdk_unavailable();                  \
    if (!why_.empty()) {                                                       \
      if (::ingero::test::running_in_ci())                                     \
        FAIL() << "CI=true but the MCP SDK is unavailable: " << why_;          \
      GTEST_SKIP() << "*** MCP SDK TEST SKIPPED (not CI): " << why_ << " ***"; \
    }                                                                          \
  } while (0)

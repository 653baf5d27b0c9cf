// MCP messages the tests send: a tools/call request, a query that runs until run_sql's time
// limit, and a tool called on an in-process server (its session initialized at the first call).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "serve/mcp/server.h"

namespace ingero::test {

using serve::mcp::Json;

// A recursive CTE without end: it runs until run_sql's 5 s limit, or its cancellation.
inline constexpr const char* kEndlessSql =
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r";

inline Json tools_call(const Json& id, const std::string& name, const Json& args) {
  return {{"jsonrpc", "2.0"},
          {"id", id},
          {"method", "tools/call"},
          {"params", {{"name", name}, {"arguments", args}}}};
}

// Calls tool `name` with `args` on `server` in `session`, which is initialized first when `id` is
// 1; the result (Json() when none came).
inline Json call_tool(serve::mcp::Server& server, serve::mcp::Session& session,
                      const std::string& name, const Json& args, int id) {
  auto send = [&](const Json& msg) {
    return server.handle(msg.dump(), session, [](const Json&) {});
  };
  if (id == 1) {
    auto init = send({{"jsonrpc", "2.0"},
                      {"id", 1000},
                      {"method", "initialize"},
                      {"params",
                       {{"protocolVersion", serve::mcp::kLatestVersion},
                        {"capabilities", Json::object()},
                        {"clientInfo", {{"name", "gtest"}, {"version", "1"}}}}}});
    EXPECT_TRUE(init.has_value());
    send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }
  auto r = send(tools_call(id, name, args));
  EXPECT_TRUE(r && r->contains("result"));
  return r ? (*r)["result"] : Json();
}

}  // namespace ingero::test

// One MCP tool called on `ingero mcp --db DB` over stdio, as an agent would: initialize, the
// tool, the JSON-RPC response (its "result" holds content and structuredContent).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "test_paths.h"
#include "tests/support/subprocess.h"

namespace ingero::test {

inline nlohmann::json mcp_tool_over_stdio(const std::string& db, const std::string& tool,
                                          const nlohmann::json& args) {
  auto p = Subprocess::spawn({INGERO_BIN, "mcp", "--db", db});
  nlohmann::json init = {{"jsonrpc", "2.0"},
                         {"id", 1},
                         {"method", "initialize"},
                         {"params",
                          {{"protocolVersion", "2025-11-25"},
                           {"capabilities", nlohmann::json::object()},
                           {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
  nlohmann::json call = {{"jsonrpc", "2.0"},
                         {"id", 2},
                         {"method", "tools/call"},
                         {"params", {{"name", tool}, {"arguments", args}}}};
  p.write_stdin(init.dump() + "\n" + R"({"jsonrpc":"2.0","method":"notifications/initialized"})" +
                "\n" + call.dump() + "\n");
  EXPECT_TRUE(p.wait_stdout_line(R"("id":2)", std::chrono::seconds(30))) << p.err();
  p.close_stdin();
  p.wait();
  std::string out = p.out();
  size_t at = out.find(R"("id":2)");
  if (at == std::string::npos) return nlohmann::json();
  size_t begin = out.rfind('\n', at);
  size_t end = out.find('\n', at);
  return nlohmann::json::parse(
      out.substr(begin == std::string::npos ? 0 : begin + 1,
                 end == std::string::npos ? std::string::npos : end - begin - 1));
}

}  // namespace ingero::test

// The MCP server's protocol core driven with raw JSON-RPC in-process, on a copy of a published
// trace file (tests/fixtures/ingero-go): a fixture for the MCP test files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/mcp/server.h"
#include "test_paths.h"
#include "tests/support/builtin_tool_host.h"
#include "tests/support/trace_db.h"

namespace ingero::serve::mcp {

// The host `ingero mcp` supplies: the real audit and demo scenarios.
inline ToolHost test_host() { return test::builtin_tool_host(); }

inline std::string fixture_copy(const std::string& name) {
  std::string dst = test::temp_path(name);
  std::filesystem::copy_file(std::string(INGERO_FIXTURES_DIR) + "/ingero-go/" + name, dst,
                             std::filesystem::copy_options::overwrite_existing);
  return dst;
}

class Mcp : public ::testing::Test {
 protected:
  void open(const std::string& fixture, const std::string& version = kLatestVersion) {
    open_path(fixture_copy(fixture), version);
  }
  void open_path(const std::string& path, const std::string& version = kLatestVersion) {
    db_ = path;
    ctx_ = std::make_unique<ToolContext>(db_, test_host());
    ASSERT_TRUE(ctx_->validate());
    server_ = std::make_unique<Server>(*ctx_);
    session_.initialized = false;  // a session of its own for each file opened
    session_.version.clear();
    auto r = rpc("initialize", {{"protocolVersion", version},
                                {"capabilities", Json::object()},
                                {"clientInfo", {{"name", "gtest"}, {"version", "1"}}}});
    ASSERT_EQ(r["result"]["protocolVersion"], version);
    EXPECT_FALSE(raw(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
  }
  std::optional<Json> raw(std::string_view text) {
    return server_->handle(text, session_, [this](const Json& n) { notes_.push_back(n); });
  }
  Json rpc(const std::string& method, Json params = Json::object()) {
    Json msg = {
        {"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", std::move(params)}};
    auto r = raw(msg.dump());
    EXPECT_TRUE(r.has_value());
    return r ? *r : Json();
  }
  Json tool(const std::string& name, Json args = Json::object()) {
    Json r = rpc("tools/call", {{"name", name}, {"arguments", std::move(args)}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r["result"];
  }
  std::string db_;
  std::unique_ptr<ToolContext> ctx_;
  std::unique_ptr<Server> server_;
  Session session_;
  std::vector<Json> notes_;
  int id_ = 0;
};

}  // namespace ingero::serve::mcp

// The MCP server over Streamable HTTP, in process on loopback, for the tests of
// tests/unit/mcp_http_test.cc and mcp_http_queue_test.cc: a trace, the server on a free port, a
// POST with MCP's headers, a session, and a wait on the server's stats.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "serve/mcp/transport.h"
#include "test_paths.h"
#include "tests/support/builtin_tool_host.h"
#include "tests/support/http_client.h"
#include "tests/support/trace_db.h"

namespace ingero::serve::mcp::test_http {

// The host `ingero mcp` supplies: the real audit and demo scenarios.
inline ToolHost test_host() { return test::builtin_tool_host(); }

using test::http_request;
using test::HttpResponse;

inline const std::map<std::string, std::string> kPost = {
    {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}};

inline Json init_msg(int id = 1) {
  return {{"jsonrpc", "2.0"},
          {"id", id},
          {"method", "initialize"},
          {"params",
           {{"protocolVersion", "2025-11-25"},
            {"capabilities", Json::object()},
            {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
}

class McpHttp : public ::testing::Test {
 protected:
  void start(HttpOptions o = {}) {
    db_ = test::temp_path("trace.db");
    std::filesystem::copy_file(
        std::string(INGERO_FIXTURES_DIR) + "/ingero-go/pytorch-dataloader-starvation.db", db_,
        std::filesystem::copy_options::overwrite_existing);
    ToolHost host = test_host();
    host.sql_timeout_ms = sql_timeout_ms_;
    ctx_ = std::make_unique<ToolContext>(db_, std::move(host));
    server_ = std::make_unique<Server>(*ctx_);
    if (o.addr == HttpOptions{}.addr) o.addr = "127.0.0.1:0";
    http_ = std::make_unique<HttpServer>(*server_, o);
    auto st = http_->start();
    ASSERT_TRUE(st) << st.error().message;
    port_ = http_->port();
    runner_ = std::thread([this] { http_->run(stop_); });
  }
  void TearDown() override {
    stop_ = true;
    if (runner_.joinable()) runner_.join();
  }
  HttpResponse post(const Json& msg, std::map<std::string, std::string> extra = {},
                    const std::string& ca = "") {
    auto h = kPost;
    for (auto& [k, v] : extra) h[k] = v;
    return http_request("127.0.0.1", port_, "POST", "/mcp", msg.dump(), h, std::chrono::seconds(30),
                        ca);
  }
  // Waits (up to 30 s: a loaded machine is slow, and only a failure waits that long) until the
  // server's stats hold `held`.
  template <class Held>
  void wait_for(const char* what, Held held) {
    for (int i = 0; i < 3000 && !held(http_->stats()); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(held(http_->stats())) << what;
  }
  std::string session(const std::string& ca = "") {
    auto r = post(init_msg(), {}, ca);
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
         {{"MCP-Session-Id", r.headers["mcp-session-id"]}, {"MCP-Protocol-Version", "2025-11-25"}},
         ca);
    return r.headers["mcp-session-id"];
  }
  std::string db_;
  // run_sql's time limit for the server start() makes (ToolHost::sql_timeout_ms).
  int sql_timeout_ms_ = 5000;
  std::unique_ptr<ToolContext> ctx_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
  int port_ = 0;
};

}  // namespace ingero::serve::mcp::test_http

// Streamable HTTP transport, in process on loopback: sessions and protocol headers, the
// DNS-rebinding Host/Origin checks, bearer token, status codes for bad requests, SSE for
// requests that log, session deletion, TLS, and 20 clients at once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "serve/mcp/transport.h"
#include "test_paths.h"
#include "tests/support/builtin_tool_host.h"
#include "tests/support/http_client.h"
#include "tests/support/mcp_calls.h"
#include "tests/support/trace_db.h"
#include "tests/unit/http/test_client.h"
#include "tests/unit/mcp_http_fixture.h"

namespace ingero::serve::mcp {
namespace {

using namespace test_http;

TEST_F(McpHttp, SessionLifecycleAndProtocolHeaders) {
  start();
  auto r = post(init_msg());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "application/json");
  std::string sid = r.headers["mcp-session-id"];
  EXPECT_EQ(sid.size(), 32u);
  EXPECT_EQ(sid.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(Json::parse(r.body)["result"]["protocolVersion"], "2025-11-25");

  Json list = {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}};
  EXPECT_EQ(post(list).status, 400);                                              // no session
  EXPECT_EQ(post(list, {{"MCP-Session-Id", std::string(32, 'a')}}).status, 404);  // unknown session
  EXPECT_EQ(post(list, {{"MCP-Session-Id", sid}, {"MCP-Protocol-Version", "1999-01-01"}}).status,
            400);
  auto ok = post(list, {{"MCP-Session-Id", sid}, {"MCP-Protocol-Version", "2025-11-25"}});
  ASSERT_EQ(ok.status, 200);
  EXPECT_EQ(Json::parse(ok.body)["result"]["tools"].size(), 15u);
  // Notifications and responses: 202, no body.
  auto n = post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
                {{"MCP-Session-Id", sid}});
  EXPECT_EQ(n.status, 202);
  EXPECT_EQ(n.body, "");
  // DELETE ends the session.
  EXPECT_EQ(
      http_request("127.0.0.1", port_, "DELETE", "/mcp", "", {{"MCP-Session-Id", sid}}).status,
      200);
  EXPECT_EQ(post(list, {{"MCP-Session-Id", sid}}).status, 404);
  // A failed initialize leaves no session behind.
  Json bad = init_msg();
  bad["params"].erase("protocolVersion");
  auto b = post(bad);
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(Json::parse(b.body)["error"]["code"], kInvalidParams);
  EXPECT_FALSE(b.headers.count("mcp-session-id"));
}

TEST_F(McpHttp, DnsRebindingHostAndOriginChecks) {
  start();
  std::string p = std::to_string(port_);
  EXPECT_EQ(post(init_msg(), {{"Host", "evil.example:" + p}}).status, 403);
  EXPECT_EQ(post(init_msg(), {{"Host", "localhost:" + p}}).status, 200);
  EXPECT_EQ(post(init_msg(), {{"Host", "[::1]:" + p}}).status, 200);
  EXPECT_EQ(post(init_msg(), {{"Origin", "http://evil.example"}}).status, 403);
  EXPECT_EQ(post(init_msg(), {{"Origin", "null"}}).status, 403);
  EXPECT_EQ(post(init_msg(), {{"Origin", "http://localhost:3000"}}).status, 200);
  EXPECT_EQ(post(init_msg(), {{"Origin", "http://127.0.0.1:" + p}}).status, 200);
}

TEST_F(McpHttp, ExtraHostsAndOriginsAreOptIn) {
  HttpOptions o;
  o.allow_hosts = {"gpu-node-01"};
  o.allow_origins = {"https://dash.example"};
  start(o);
  EXPECT_EQ(post(init_msg(), {{"Host", "gpu-node-01:8081"}}).status, 200);
  EXPECT_EQ(post(init_msg(), {{"Host", "gpu-node-02:8081"}}).status, 403);
  EXPECT_EQ(post(init_msg(), {{"Origin", "https://dash.example"}}).status, 200);
  EXPECT_EQ(post(init_msg(), {{"Origin", "http://dash.example"}}).status, 403);
}

TEST_F(McpHttp, BearerToken) {
  HttpOptions o;
  o.token = "s3cret-token";
  start(o);
  auto r = post(init_msg());
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers["www-authenticate"], "Bearer realm=\"ingero\"");
  EXPECT_EQ(post(init_msg(), {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(post(init_msg(), {{"Authorization", "Bearer s3cret-token-longer"}}).status, 401);
  EXPECT_EQ(post(init_msg(), {{"Authorization", "Basic czNjcmV0LXRva2Vu"}}).status, 401);
  EXPECT_EQ(post(init_msg(), {{"Authorization", "Bearer s3cret-token"}}).status, 200);
}

// Issue 37, item 7: idle sockets from 127.0.0.1 (every local agent's address) filling its cap
// answered 503 to every other local agent for as long as they were held. An agent with the
// token is served, and only idle sockets are closed to make room.
TEST_F(McpHttp, IdleLocalSocketsDoNotLockOutAnAgent) {
  http::test::raise_fd_limit();
  HttpOptions o;
  o.token = "s3cret-token";
  start(o);
  std::vector<int> idle;
  for (size_t i = 0; i < o.limits.max_connections_per_peer; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    idle.push_back(fd);
  }
  for (int i = 0; i < 500 && http_->stats().connections_accepted < idle.size(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(http_->stats().connections_accepted, idle.size());  // all accepted, none evicted yet
  for (int i = 0; i < 5; ++i) {
    auto r = post(init_msg(), {{"Authorization", "Bearer s3cret-token"}});
    EXPECT_EQ(r.status, 200) << i << ": " << r.error << r.body;
  }
  // Exactly the oldest idle socket made room (each agent's connection left before the next).
  int closed = 0;
  for (int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    char c;
    closed += poll(&p, 1, 0) == 1 && read(fd, &c, 1) == 0;
  }
  EXPECT_GE(closed, 1);
  EXPECT_LE(closed, 5);
  for (int fd : idle) close(fd);
}

TEST_F(McpHttp, BadRequestsGetTheirStatusCodes) {
  start();
  auto raw = [&](const std::string& method, const std::string& path, const std::string& body,
                 std::map<std::string, std::string> h) {
    return http_request("127.0.0.1", port_, method, path, body, h);
  };
  auto g = raw("GET", "/mcp", "", {{"Accept", "text/event-stream"}});
  EXPECT_EQ(g.status, 405);
  EXPECT_EQ(g.headers["allow"], "POST, DELETE");
  EXPECT_EQ(raw("PUT", "/mcp", "{}", kPost).status, 405);
  EXPECT_EQ(raw("POST", "/other", init_msg().dump(), kPost).status, 404);
  EXPECT_EQ(raw("POST", "/mcp", init_msg().dump(), {{"Content-Type", "text/plain"}}).status, 415);
  // The media type itself (helper-69: these began with the right letters and were taken for
  // JSON); a charset parameter is fine.
  for (const char* ct : {"application/jsonx", "application/json-seq", "application/json+x"})
    EXPECT_EQ(raw("POST", "/mcp", init_msg().dump(), {{"Content-Type", ct}}).status, 415) << ct;
  EXPECT_EQ(raw("POST", "/mcp", init_msg().dump(),
                {{"Content-Type", "Application/JSON ; charset=utf-8"},
                 {"Accept", "application/json, text/event-stream"}})
                .status,
            200);
  auto html = raw("POST", "/mcp", init_msg().dump(),
                  {{"Content-Type", "application/json"}, {"Accept", "text/html"}});
  EXPECT_EQ(html.status, 406);
  // Either is enough: it said "and" (hostile test).
  EXPECT_EQ(html.body, "Accept must include application/json or text/event-stream\n");
  // A client that takes the stream alone is answered in it (it was sent JSON).
  auto sse = raw("POST", "/mcp", init_msg().dump(),
                 {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}});
  EXPECT_EQ(sse.status, 200);
  EXPECT_EQ(sse.headers["content-type"], "text/event-stream");
  ASSERT_EQ(sse.body.rfind("event: message\ndata: {", 0), 0u) << sse.body;
  EXPECT_NE(sse.body.find("\"protocolVersion\""), std::string::npos) << sse.body;
  auto pe = raw("POST", "/mcp", "{nope", kPost);
  EXPECT_EQ(pe.status, 400);
  EXPECT_EQ(Json::parse(pe.body)["error"]["code"], kParseError);
  auto big = kPost;
  big["Content-Length"] = std::to_string(64u << 20);
  auto bigr = raw("POST", "/mcp", "", big);
  EXPECT_EQ(bigr.status, 413) << bigr.body << bigr.error << bigr.headers["content-length"];
  auto deep = raw("POST", "/mcp", std::string(5000, '[') + std::string(5000, ']'), kPost);
  EXPECT_EQ(deep.status, 400);
  EXPECT_EQ(
      raw("POST", "/mcp", init_msg().dump(), {{"Content-Type", "application/json"}, {"Host", ""}})
          .status,
      400);
  // The server still answers after all of that.
  EXPECT_EQ(raw("POST", "/mcp", init_msg().dump(), kPost).status, 200);
}

TEST_F(McpHttp, LoggingRequestsStreamNotificationsAsSse) {
  start();
  std::string sid = session();
  std::map<std::string, std::string> h = {{"MCP-Session-Id", sid},
                                          {"MCP-Protocol-Version", "2025-11-25"}};
  ASSERT_EQ(post({{"jsonrpc", "2.0"},
                  {"id", 5},
                  {"method", "logging/setLevel"},
                  {"params", {{"level", "debug"}}}},
                 h)
                .status,
            200);
  auto r = post({{"jsonrpc", "2.0"},
                 {"id", 6},
                 {"method", "tools/call"},
                 {"params", {{"name", "get_trace_stats"}, {"arguments", Json::object()}}}},
                h);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  auto first = r.body.find("data: ");
  auto second = r.body.find("data: ", first + 1);
  ASSERT_NE(second, std::string::npos) << r.body;
  Json note = Json::parse(r.body.substr(first + 6, r.body.find('\n', first) - first - 6));
  Json resp = Json::parse(r.body.substr(second + 6, r.body.find('\n', second) - second - 6));
  EXPECT_EQ(note["method"], "notifications/message");
  EXPECT_EQ(resp["id"], 6);
  EXPECT_EQ(resp["result"]["isError"], false);
  // A client that only accepts JSON gets JSON.
  auto j =
      http_request("127.0.0.1", port_, "POST", "/mcp",
                   Json{{"jsonrpc", "2.0"},
                        {"id", 7},
                        {"method", "tools/call"},
                        {"params", {{"name", "get_trace_stats"}, {"arguments", Json::object()}}}}
                       .dump(),
                   {{"Content-Type", "application/json"},
                    {"Accept", "application/json"},
                    {"MCP-Session-Id", sid}});
  EXPECT_EQ(j.headers["content-type"], "application/json");
  EXPECT_EQ(Json::parse(j.body)["id"], 7);
}

TEST_F(McpHttp, TwentyConcurrentClientsGetCorrectAnswers) {
  HttpOptions o;
  o.threads = 4;
  start(o);
  int64_t want = test::query_int(db_, "SELECT count(*) FROM calls WHERE op = 'cudaStreamSync'");
  std::vector<std::future<std::string>> clients;
  for (int c = 0; c < 20; ++c)
    clients.push_back(std::async(std::launch::async, [&, c]() -> std::string {
      std::string sid = session();
      if (sid.empty()) return "no session";
      std::map<std::string, std::string> h = {{"MCP-Session-Id", sid},
                                              {"MCP-Protocol-Version", "2025-11-25"}};
      for (int i = 0; i < 5; ++i) {
        auto r = post({{"jsonrpc", "2.0"},
                       {"id", 100 + i},
                       {"method", "tools/call"},
                       {"params",
                        {{"name", "run_sql"},
                         {"arguments",
                          {{"sql", "SELECT count(*) FROM calls WHERE op = 'cudaStreamSync' AND " +
                                       std::to_string(c) + " = " + std::to_string(c)}}}}}},
                      h);
        if (r.status != 200) return "status " + std::to_string(r.status) + " " + r.error;
        Json j = Json::parse(r.body);
        if (j["id"] != 100 + i) return "wrong id";
        if (j["result"]["structuredContent"]["rows"][0][0] != want) return "wrong answer " + r.body;
      }
      return "";
    }));
  for (auto& f : clients) EXPECT_EQ(f.get(), "");
}

TEST_F(McpHttp, Tls) {
  std::string dir = test::temp_path("tls");
  std::filesystem::create_directories(dir);
  std::string out, err;
  ASSERT_EQ(
      test::run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                         "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem"},
                        &out, &err),
      0)
      << err;
  HttpOptions o;
  o.tls_cert = dir + "/cert.pem";
  o.tls_key = dir + "/key.pem";
  start(o);
  EXPECT_EQ(http_->url(), "https://127.0.0.1:" + std::to_string(port_) + "/mcp");
  std::string sid = session(dir + "/cert.pem");
  ASSERT_EQ(sid.size(), 32u);
  auto r = post({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}}, {{"MCP-Session-Id", sid}},
                dir + "/cert.pem");
  EXPECT_EQ(r.status, 200);
  // Plain HTTP to a TLS port gets no answer.
  EXPECT_EQ(post(init_msg()).status, 0);
  // Mismatched key and certificate are refused at start.
  ASSERT_EQ(
      test::run_command({"openssl", "genrsa", "-out", dir + "/other.pem", "2048"}, &out, &err), 0);
  HttpOptions bad = o;
  bad.tls_key = dir + "/other.pem";
  bad.addr = "127.0.0.1:0";
  HttpServer s2(*server_, bad);
  auto st = s2.start();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("does not match"), std::string::npos) << st.error().message;
}

TEST_F(McpHttp, BusyPortIsAClearError) {
  start();
  HttpOptions o;
  o.addr = "127.0.0.1:" + std::to_string(port_);
  HttpServer other(*server_, o);
  auto st = other.start();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("cannot listen on 127.0.0.1:" + std::to_string(port_)),
            std::string::npos);
}

}  // namespace
}  // namespace ingero::serve::mcp

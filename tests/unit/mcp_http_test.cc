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

namespace ingero::serve::mcp {
namespace {

// The host `ingero mcp` supplies: the real audit and demo scenarios.
ToolHost test_host() { return test::builtin_tool_host(); }

using test::http_request;
using test::HttpResponse;

const std::map<std::string, std::string> kPost = {
    {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}};

Json init_msg(int id = 1) {
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
    ctx_ = std::make_unique<ToolContext>(db_, test_host());
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
  // Waits (up to 4 s) until the server's stats hold `held`.
  template <class Held>
  void wait_for(const char* what, Held held) {
    for (int i = 0; i < 400 && !held(http_->stats()); ++i)
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
  std::unique_ptr<ToolContext> ctx_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
  int port_ = 0;
};

// A stop (SIGTERM) with queries running and queued: the running one was left to its 5 s limit
// and the queued ones ran after their clients were disconnected (8 queued: the exit at 14 s;
// here 10 s). What runs is cancelled, and what starts after the stop is cancelled as it starts.
TEST_F(McpHttp, AStopCancelsWhatRunsAndDropsWhatWaits) {
  HttpOptions o;
  o.threads = 1;
  start(o);
  std::string sid = session();
  std::vector<std::thread> clients;
  for (int id = 1; id <= 4; ++id)
    clients.emplace_back([&, id] {
      post(test::tools_call(id, "run_sql", {{"sql", test::kEndlessSql}}),
           {{"MCP-Session-Id", sid}, {"MCP-Protocol-Version", "2025-11-25"}});
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  stop_ = true;
  runner_.join();
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& c : clients) c.join();
  EXPECT_LT(took, 2.5) << "the queries ran out their limits before the exit";
}

// mcp.md: `--threads` workers with 256 requests queued, 503 with Retry-After beyond. With one
// worker and room for two waiting: one endless query runs (5 s to its limit), two wait, and a
// fourth is answered 503 with a Retry-After at once. Each is sent once the server holds the
// ones before it: sent together, the first could still be waiting for the worker when the
// third came, and then two were refused.
TEST_F(McpHttp, RequestsBeyondTheQueueAre503WithRetryAfter) {
  EXPECT_EQ(HttpOptions{}.max_queued, 256u);
  HttpOptions o;
  o.threads = 1;
  o.max_queued = 2;
  start(o);
  std::string sid = session();
  std::mutex mu;
  std::vector<std::pair<int, HttpResponse>> answered;  // before the stop
  std::vector<std::thread> clients;
  auto send = [&](int id) {
    clients.emplace_back([&, id] {
      auto r = post(test::tools_call(id, "run_sql", {{"sql", test::kEndlessSql}}),
                    {{"MCP-Session-Id", sid}, {"MCP-Protocol-Version", "2025-11-25"}});
      std::lock_guard<std::mutex> g(mu);
      if (!stop_) answered.emplace_back(id, r);
    });
  };
  send(1);
  wait_for("the first query runs", [](const http::Stats& s) { return s.workers_busy == 1; });
  send(2);
  send(3);
  wait_for("two wait", [](const http::Stats& s) { return s.queued == 2; });
  send(4);
  for (int i = 0; i < 400; ++i) {
    {
      std::lock_guard<std::mutex> g(mu);
      if (!answered.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  http::Stats at_answer = http_->stats();
  {
    std::lock_guard<std::mutex> g(mu);
    stop_ = true;
  }
  runner_.join();
  for (auto& c : clients) c.join();
  EXPECT_EQ(at_answer.workers_busy, 1u);
  EXPECT_EQ(at_answer.queued, 2u);
  EXPECT_EQ(at_answer.busy, 1u);
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_EQ(answered[0].first, 4);
  EXPECT_EQ(answered[0].second.status, 503) << answered[0].second.body;
  EXPECT_EQ(answered[0].second.headers.count("retry-after"), 1u) << answered[0].second.body;
}

// A ping and a cancellation are answered at once, never behind the tool calls that hold the
// workers: the ping went unanswered until both queries had run out their limits, and the
// cancellations reached neither (the queued call was not tracked yet; the running one ran out).
TEST_F(McpHttp, APingAndACancellationDoNotWaitBehindToolCalls) {
  HttpOptions o;
  o.threads = 1;
  o.max_queued = 4;
  start(o);
  std::string sid = session();
  const std::map<std::string, std::string> h = {{"MCP-Session-Id", sid},
                                                {"MCP-Protocol-Version", "2025-11-25"}};
  std::mutex mu;
  std::map<int, HttpResponse> answered;
  std::vector<std::thread> clients;
  auto send = [&](int id) {
    clients.emplace_back([&, id] {
      auto r = post(test::tools_call(id, "run_sql", {{"sql", test::kEndlessSql}}), h);
      std::lock_guard<std::mutex> g(mu);
      answered[id] = r;
    });
  };
  send(1);
  wait_for("the first query runs", [](const http::Stats& s) { return s.workers_busy == 1; });
  send(2);
  wait_for("the second waits", [](const http::Stats& s) { return s.queued == 1; });

  auto ping = post({{"jsonrpc", "2.0"}, {"id", 9}, {"method", "ping"}}, h);
  http::Stats at_ping = http_->stats();
  EXPECT_EQ(ping.status, 200) << ping.body;
  EXPECT_EQ(ping.body, R"({"id":9,"jsonrpc":"2.0","result":{}})");
  EXPECT_EQ(at_ping.workers_busy, 1u);
  EXPECT_EQ(at_ping.queued, 1u);

  auto cancel = [&](int id) {
    return post({{"jsonrpc", "2.0"},
                 {"method", "notifications/cancelled"},
                 {"params", {{"requestId", id}, {"reason", "test"}}}},
                h)
        .status;
  };
  EXPECT_EQ(cancel(2), 202);  // still waiting for the worker
  EXPECT_EQ(http_->stats().queued, 1u);
  EXPECT_EQ(cancel(1), 202);  // running
  for (auto& c : clients) c.join();
  ASSERT_EQ(answered.size(), 2u);
  EXPECT_EQ(answered[1].status, 200);
  EXPECT_NE(answered[1].body.find("SQL aborted: the request was cancelled"), std::string::npos)
      << answered[1].body;
  EXPECT_EQ(answered[2].status, 503) << answered[2].body;
  EXPECT_EQ(answered[2].body, "cancelled before it ran: its client left, or cancelled it\n");
}

// Sends `msg` as a POST on a connection of its own and closes it at once: a client that leaves.
void post_and_leave(int port, const Json& msg, const std::string& sid) {
  std::string body = msg.dump();
  std::string req =
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Accept: application/json, text/event-stream\r\nMCP-Session-Id: " +
      sid +
      "\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(write(fd, req.data(), req.size()), ssize_t(req.size()));
  close(fd);
}

// Found by a hostile client: 40 run_sql requests whose clients closed their connections at
// once still ran their queries to the end (33 s of CPU), and a live client's call waited 50 s
// behind them. A client that leaves cancels its request, running or waiting: here three
// endless queries (5 s each to their limit) on the only worker, then a live client's query.
TEST_F(McpHttp, AClientThatLeavesCancelsItsRequest) {
  HttpOptions o;
  o.threads = 1;
  start(o);
  std::string sid = session();
  for (int id = 1; id <= 3; ++id)
    post_and_leave(port_, test::tools_call(id, "run_sql", {{"sql", test::kEndlessSql}}), sid);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  HttpResponse r = post(test::tools_call(9, "run_sql", {{"sql", "select 41 + 1 as x"}}),
                        {{"MCP-Session-Id", sid}, {"MCP-Protocol-Version", "2025-11-25"}});
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_NE(r.body.find("42"), std::string::npos) << r.body;
  EXPECT_LT(took, 2.5) << "the left clients' queries ran to their limits first";
}

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

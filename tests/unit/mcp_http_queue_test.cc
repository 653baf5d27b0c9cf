// Streamable HTTP transport, what waits for the workers and what does not: a stop with queries
// running and queued, the queue's bound (503), a ping and a cancellation beside busy workers,
// and a client that leaves. The fixture is tests/unit/mcp_http_fixture.h.
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

// Each test holds the workers with endless queries: they must end by a stop, a cancellation or
// their client leaving, never by their time limit, which on a loaded machine (a CI VM) came
// before the test had sent what it meant to (RequestsBeyondTheQueueAre503WithRetryAfter: the
// first query's 5 s ran out while the second and third were sent, and the third was answered).
constexpr int kHeld = 120'000;
// What a cancelled query may take to be answered: far under kHeld, whatever the load.
constexpr double kCancelledWithinS = 20;

// A stop (SIGTERM) with queries running and queued: the running one was left to its 5 s limit
// and the queued ones ran after their clients were disconnected (8 queued: the exit at 14 s;
// here 10 s). What runs is cancelled, and what starts after the stop is cancelled as it starts.
TEST_F(McpHttp, AStopCancelsWhatRunsAndDropsWhatWaits) {
  HttpOptions o;
  o.threads = 1;
  sql_timeout_ms_ = kHeld;
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
  EXPECT_LT(took, kCancelledWithinS) << "the queries ran out their limits before the exit";
}

// mcp.md: `--threads` workers with 256 requests queued, 503 with Retry-After beyond. With one
// worker and room for two waiting: one endless query runs (until the stop), two wait, and a
// fourth is answered 503 with a Retry-After at once. Each is sent once the server holds the
// ones before it: sent together, the first could still be waiting for the worker when the
// third came, and then two were refused.
TEST_F(McpHttp, RequestsBeyondTheQueueAre503WithRetryAfter) {
  EXPECT_EQ(HttpOptions{}.max_queued, 256u);
  HttpOptions o;
  o.threads = 1;
  o.max_queued = 2;
  sql_timeout_ms_ = kHeld;
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
  // The session's initialize ran on the worker, which may still count it busy a moment after
  // its answer: seen busy then, the second query was sent first and took the worker (CI).
  wait_for("the worker is free", [](const http::Stats& s) { return s.workers_busy == 0; });
  send(1);
  wait_for("the first query runs", [](const http::Stats& s) { return s.workers_busy == 1; });
  send(2);
  send(3);
  wait_for("two wait", [](const http::Stats& s) { return s.queued == 2; });
  send(4);
  for (int i = 0; i < 3000; ++i) {
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
  sql_timeout_ms_ = kHeld;
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
  // The session's initialize ran on the worker, which may still count it busy a moment after
  // its answer: seen busy then, the second query was sent first and took the worker (CI).
  wait_for("the worker is free", [](const http::Stats& s) { return s.workers_busy == 0; });
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
// endless queries (each until it is cancelled) on the only worker, then a live client's query.
TEST_F(McpHttp, AClientThatLeavesCancelsItsRequest) {
  HttpOptions o;
  o.threads = 1;
  sql_timeout_ms_ = kHeld;
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
  EXPECT_LT(took, kCancelledWithinS) << "the left clients' queries ran to their limits first";
}

}  // namespace
}  // namespace ingero::serve::mcp

// serve/http: routing, keep-alive, checks on the head before the body, limits, the worker
// pool, streams, stop (deadlines and connection caps: connections_test.cc). Everything on
// 127.0.0.1, bounded in count and time.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "tests/unit/http/server_fixture.h"

namespace ingero::serve::http::test {
namespace {

TEST_F(HttpTest, KeepAliveServesManyRequestsOnOneConnection) {
  start();
  Conn c(port_);
  ASSERT_TRUE(c.ok()) << c.error();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(c.send(request_text("GET", "/echo")));
    Reply r = c.read_response();
    ASSERT_EQ(r.status, 200) << r.error;
    // The server saw every request come from this one socket.
    EXPECT_EQ(r.body, "peer_port=" + std::to_string(c.local_port()) + " principal= tls=0\n");
    EXPECT_EQ(r.headers["connection"], "");  // HTTP/1.1: kept alive unless it says close
    EXPECT_EQ(r.headers["cache-control"], "no-store");
    EXPECT_EQ(r.headers["x-content-type-options"], "nosniff");
  }
  // Pipelined: two requests in one write, two responses in order.
  ASSERT_TRUE(c.send(request_text("GET", "/static/a") + request_text("GET", "/static/b")));
  EXPECT_EQ(c.read_response().body, "/static/a\n");
  EXPECT_EQ(c.read_response().body, "/static/b\n");
  // Connection: close is honoured.
  ASSERT_TRUE(c.send(request_text("GET", "/echo", {{"Connection", "close"}})));
  Reply last = c.read_response();
  EXPECT_EQ(last.status, 200);
  EXPECT_EQ(last.headers["connection"], "close");
  EXPECT_TRUE(c.wait_closed(5s));
  Stats s = server_->stats();
  EXPECT_EQ(s.connections_accepted, 1u);
  EXPECT_EQ(s.requests, 53u);
}

TEST_F(HttpTest, RoutesAnswer404And405WithAllow) {
  start();
  EXPECT_EQ(request(port_, "GET", "/nope").status, 404);
  Reply r = request(port_, "DELETE", "/echo");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "GET, POST, HEAD");
  EXPECT_EQ(request(port_, "GET", "/static/js/app.js").body, "/static/js/app.js\n");
  EXPECT_EQ(request(port_, "GET", "/staticx").status, 404);
  EXPECT_EQ(request(port_, "GET", "/echo?x=1").status, 200);
  // Absolute-form targets are for proxies: refused.
  EXPECT_EQ(request(port_, "GET", "http://127.0.0.1/echo").status, 400);
}

// RFC 9110: a server supports HEAD wherever it supports GET. HEAD was 405 everywhere (curl -I
// on /metrics and the dashboard). The GET's head, its Content-Length, no body: the next
// request on the connection is read as one.
TEST_F(HttpTest, HeadIsTheGetsHeadWithoutItsBody) {
  start();
  Conn c(port_);
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_TRUE(c.send(request_text("HEAD", "/static/a") + request_text("GET", "/static/b")));
  std::string head = c.read_until("\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: 10\r\n"), std::string::npos) << head;  // "/static/a\n"
  Reply next = c.read_response();
  EXPECT_EQ(next.status, 200);
  EXPECT_EQ(next.body, "/static/b\n");
  // A path without GET has no HEAD either: its 404's head, no body, and the refusal's close.
  ASSERT_TRUE(c.send(request_text("HEAD", "/nope")));
  EXPECT_EQ(c.read_until("\r\n\r\n").rfind("HTTP/1.1 404 ", 0), 0u);
  std::string rest;
  EXPECT_TRUE(c.wait_closed(5s, &rest));
  EXPECT_EQ(rest, "");
}

TEST_F(HttpTest, HostAndOriginAreCheckedBeforeAuthentication) {
  ServerOptions o;
  o.auth = bearer();
  o.hosts.allow_hosts = {"gpu-node-01"};
  o.hosts.allow_origins = {"https://dash.example"};
  start(o);
  auto get = [&](std::map<std::string, std::string> h) {
    return request(port_, "GET", "/echo", h).status;
  };
  EXPECT_EQ(get({{"Host", "evil.example"}}), 403);  // 403, not 401: refused before auth
  EXPECT_EQ(get({{"Host", "evil.example"}, {"Authorization", "Bearer " + kToken}}), 403);
  EXPECT_EQ(get({{"Origin", "http://evil.example"}}), 403);
  EXPECT_EQ(get({{"Origin", "null"}}), 403);
  EXPECT_EQ(get({{"Origin", "http://localhost:9999"}}), 401);  // accepted Origin, then auth
  EXPECT_EQ(get({{"Origin", "https://dash.example"}}), 401);
  EXPECT_EQ(get({{"Host", "gpu-node-01:8080"}}), 401);
  EXPECT_EQ(get({{"Host", "localhost:1"}, {"Authorization", "Bearer " + kToken}}), 200);
  EXPECT_EQ(get({{"Host", "[::1]:1"}, {"Authorization", "Bearer " + kToken}}), 200);
  // A missing or repeated Host.
  Conn c(port_);
  c.send("GET /echo HTTP/1.1\r\nAuthorization: Bearer " + kToken + "\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 400);
  Conn d(port_);
  d.send("GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n");
  EXPECT_EQ(d.read_response().status, 400);
  EXPECT_EQ(server_->stats().forbidden, 6u);
}

TEST_F(HttpTest, BearerTokenIsRequiredAndNamesThePrincipal) {
  ServerOptions o;
  o.auth = bearer();
  start(o);
  Reply none = request(port_, "GET", "/echo");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.headers["www-authenticate"], "Bearer realm=\"ingero\"");
  EXPECT_EQ(none.headers["connection"], "close");
  EXPECT_EQ(request(port_, "GET", "/echo", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(request(port_, "GET", "/echo", {{"Authorization", "Basic " + kToken}}).status, 401);
  Reply ok = request(port_, "GET", "/echo", {{"Authorization", "bearer " + kToken}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find("principal=default"), std::string::npos) << ok.body;
  EXPECT_EQ(request(port_, "GET", "/fast").status, 200);  // a public route
  EXPECT_EQ(server_->stats().unauthorized, 3u);
}

// The case: a 64 MiB POST without a token is answered 401 and the connection closed
// while the client is still sending; no body byte reaches a handler.
TEST_F(HttpTest, UnauthenticatedLargePostIsRefusedWithoutReadingTheBody) {
  ServerOptions o;
  o.auth = bearer();
  start(o);
  Conn c(port_);
  ASSERT_TRUE(c.ok());
  const size_t total = 64 << 20;
  ASSERT_TRUE(
      c.send("POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
             "application/octet-stream\r\nContent-Length: " +
             std::to_string(total) + "\r\n\r\n"));
  // Send the body as fast as the socket takes it, reading whatever comes back.
  fcntl(c.fd(), F_SETFL, O_NONBLOCK);
  std::string chunk(64 << 10, 'x'), got;
  size_t sent = 0;
  bool send_failed = false, eof = false;
  auto t0 = Clock::now();
  while (!send_failed && !eof && seconds_since(t0) < 20) {
    pollfd p{c.fd(), short(POLLIN | (sent < total ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char b[4096];
      ssize_t n = recv(c.fd(), b, sizeof b, 0);
      if (n > 0)
        got.append(b, size_t(n));
      else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        eof = true;
    }
    if (sent < total && (p.revents & POLLOUT)) {
      ssize_t n = send(c.fd(), chunk.data(), std::min(chunk.size(), total - sent), MSG_NOSIGNAL);
      if (n > 0)
        sent += size_t(n);
      else if (errno != EAGAIN && errno != EINTR)
        send_failed = true;
    }
  }
  EXPECT_TRUE(send_failed || eof) << "the server kept the connection for " << seconds_since(t0)
                                  << " s";
  // What arrived before the close is still readable after a failed send.
  while (!eof) {
    pollfd p{c.fd(), POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) break;
    char b[4096];
    ssize_t n = recv(c.fd(), b, sizeof b, 0);
    if (n > 0)
      got.append(b, size_t(n));
    else if (n == 0 || (errno != EAGAIN && errno != EINTR))
      eof = true;
  }
  EXPECT_LT(sent, total / 4) << "the client sent " << sent << " of " << total << " bytes";
  std::cout << "the client sent " << sent << " of " << total << " bytes before the server closed\n";
  EXPECT_EQ(got.rfind("HTTP/1.1 401 Unauthorized\r\n", 0), 0u) << got.substr(0, 200);
  EXPECT_EQ(uploads.load(), 0);
  Stats s = server_->stats();
  EXPECT_EQ(s.unauthorized, 1u);
  EXPECT_EQ(s.body_bytes, 0u);
  EXPECT_EQ(s.requests, 0u);
  // With the token, the same route takes a body.
  Reply ok = request(port_, "POST", "/upload", kAuth, std::string(1000, 'y'));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "bytes=1000\n");
}

TEST_F(HttpTest, ExpectContinueIsAnsweredOnlyAfterAuthentication) {
  ServerOptions o;
  o.auth = bearer();
  start(o);
  std::string head =
      "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n";
  Conn refused(port_);
  refused.send(head + "\r\n");
  std::string got;
  EXPECT_TRUE(refused.wait_closed(5s, &got));
  EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;  // no 100 Continue first
  Conn ok(port_);
  ok.send(head + "Authorization: Bearer " + kToken + "\r\n\r\n");
  EXPECT_EQ(ok.read_until("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  ok.send("hello");
  Reply r = ok.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "bytes=5 principal=default\n");
}

TEST_F(HttpTest, BodyAndHeaderLimits) {
  ServerOptions o;
  o.limits.max_body_bytes = 1000;
  o.limits.max_header_bytes = 2048;
  start(o);
  // Declared too large: 413 before any body byte is read.
  Conn c(port_);
  c.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1001\r\n\r\n");
  Reply r = c.read_response();
  EXPECT_EQ(r.status, 413);
  EXPECT_TRUE(c.wait_closed(5s));
  EXPECT_EQ(request(port_, "POST", "/echo", {}, std::string(1000, 'a')).status, 200);
  // Chunked, growing past the limit.
  Conn d(port_);
  d.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  d.send("3e8\r\n" + std::string(1000, 'a') + "\r\n");
  d.send("1\r\na\r\n0\r\n\r\n");
  EXPECT_EQ(d.read_response().status, 413);
  // Chunked within the limit.
  Conn e(port_);
  e.send(
      "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  EXPECT_EQ(e.read_response().body, "bytes=11 principal=\n");
  // Headers.
  EXPECT_EQ(request(port_, "GET", "/echo", {{"X-Big", std::string(3000, 'h')}}).status, 431);
  EXPECT_EQ(request(port_, "GET", "/echo", {{"X-Ok", std::string(1500, 'h')}}).status, 200);
  Stats s = server_->stats();
  EXPECT_EQ(s.too_large, 3u);
}

// Issue 37, item 10: heads of 20-30 KB were accepted against the documented 16 KiB (Beast
// bounds the request line and the fields each by the limit). The head as a whole is bounded,
// to the byte: 16,384 bytes pass, 16,385 do not.
TEST_F(HttpTest, TheHeadIsBoundedToTheByte) {
  start();
  auto head_of = [](size_t total) {
    std::string base = request_text("GET", "/echo", {{"X-Pad", ""}});
    return request_text("GET", "/echo", {{"X-Pad", std::string(total - base.size(), 'p')}});
  };
  for (size_t total : {size_t(16384), size_t(16385), size_t(20000), size_t(30000)}) {
    std::string head = head_of(total);
    ASSERT_EQ(head.size(), total);
    Conn c(port_);
    c.send(head);
    EXPECT_EQ(c.read_response().status, total <= 16384 ? 200 : 431) << total;
  }
  // Spread over many fields, each well under the limit; and a long request line.
  std::map<std::string, std::string> many;
  for (int i = 0; i < 25; ++i) many["X-F" + std::to_string(i)] = std::string(1000, 'f');
  EXPECT_EQ(request(port_, "GET", "/echo", many).status, 431);
  EXPECT_EQ(request(port_, "GET", "/static/" + std::string(12000, 's'),
                    {{"X-Pad", std::string(10000, 'p')}})
                .status,
            431);
  EXPECT_EQ(server_->stats().too_large, 5u);
}

TEST_F(HttpTest, MalformedRequestsAreRefused) {
  start();
  auto raw = [&](const std::string& text) {
    Conn c(port_);
    c.send(text);
    return c.read_response().status;
  };
  EXPECT_EQ(raw("NOT HTTP AT ALL\r\n\r\n"), 400);
  EXPECT_EQ(raw("GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
  // Chunked alone: `gzip, chunked` was de-chunked and its gzip ignored (helper-73).
  EXPECT_EQ(raw("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                "3\r\nabc\r\n0\r\n\r\n"),
            501);
  EXPECT_EQ(raw("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: Chunked \r\n\r\n"
                "3\r\nabc\r\n0\r\n\r\n"),
            200);
  EXPECT_EQ(raw("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n"
                "Content-Length: 4\r\n\r\nabcd"),
            400);
  EXPECT_EQ(raw("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n"
                "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            400);
  // HTTP/1.0 without Host is a valid request; the connection closes after it.
  Conn c(port_);
  c.send("GET /echo HTTP/1.0\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 200);
  EXPECT_TRUE(c.wait_closed(5s));
}

TEST_F(HttpTest, HandlerFailuresAndBadResponseHeaders) {
  start();
  EXPECT_EQ(request(port_, "GET", "/throw").status, 500);
  Reply r = request(port_, "GET", "/badheader");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.count("x-evil"), 0u);
  EXPECT_EQ(r.headers.count("set-cookie"), 0u);
  EXPECT_EQ(r.headers["x-good"], "yes");
  EXPECT_EQ(server_->stats().handler_errors, 1u);
}

// Handlers that block hold workers, not the I/O thread: while every worker waits, the I/O
// thread still answers, refuses and queues; a full queue is 503 at once.
TEST_F(HttpTest, BlockingHandlersRunOnABoundedPool) {
  ServerOptions o;
  o.workers = 2;
  o.max_queued = 2;
  o.auth = bearer();
  start(o);
  std::vector<Conn> waiting;
  for (int i = 0; i < 4; ++i) {
    waiting.emplace_back(port_);
    waiting.back().send(request_text("GET", "/block", kAuth));
  }
  ASSERT_TRUE(eventually([&] {
    Stats s = server_->stats();
    return s.workers_busy == 2 && s.queued == 2;
  })) << server_->stats().workers_busy
      << " busy, " << server_->stats().queued << " queued, " << blocked << " blocked, "
      << server_->stats().busy << " busy503, " << server_->stats().requests << " requests, "
      << server_->stats().connections_accepted << " conns";
  auto t0 = Clock::now();
  Reply busy = request(port_, "GET", "/block", kAuth);
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.headers["retry-after"], "1");
  EXPECT_EQ(request(port_, "GET", "/fast").status, 200);   // I/O-thread route
  EXPECT_EQ(request(port_, "GET", "/block").status, 401);  // authentication on the I/O thread
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(blocked.load(), 2);
  release();
  for (auto& c : waiting) EXPECT_EQ(c.read_response().status, 200);
  EXPECT_EQ(blocked.load(), 4);
  EXPECT_EQ(server_->stats().busy, 1u);
}

TEST_F(HttpTest, StreamsServerSentEventsThenKeepsTheConnection) {
  start();
  Conn c(port_);
  c.send(request_text("GET", "/events"));
  Reply r = c.read_response();
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(r.body,
            "event: message\nid: 1\ndata: {\"n\":1}\n\n"
            "event: message\nid: 2\ndata: {\"n\":2}\n\n"
            "event: message\nid: 3\ndata: {\"n\":3}\n\n");
  EXPECT_TRUE(eventually([&] { return streams_closed == 1; }));
  c.send(request_text("GET", "/echo"));
  EXPECT_EQ(c.read_response().status, 200);
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
  // HTTP/1.0: no chunks; the body ends with the connection.
  Conn old(port_);
  old.send("GET /events HTTP/1.0\r\n\r\n");
  Reply r10 = old.read_response();
  EXPECT_EQ(r10.status, 200);
  EXPECT_EQ(r10.headers.count("transfer-encoding"), 0u);
  EXPECT_EQ(r10.body.size(), r.body.size());
}

// A producer learns that its client left (write() false, on_close), and a client that stops
// reading is dropped after write_timeout with memory bounded by max_stream_buffer.
TEST_F(HttpTest, StreamsEndWhenTheClientLeavesOrStopsReading) {
  ServerOptions o;
  o.limits.write_timeout = 1s;
  o.limits.max_stream_buffer = 64 << 10;
  auto server = std::make_unique<Server>(o);
  std::shared_ptr<Stream> stream;
  std::mutex mu;
  std::atomic<int> closed{0};
  server->route("GET", "/s", [&](const Request&) {
    auto [resp, s] = Response::streaming(200, "application/octet-stream");
    s->on_close([&] { ++closed; });
    std::lock_guard<std::mutex> g(mu);
    stream = s;
    return std::move(resp);
  });
  ASSERT_TRUE(server->start());
  auto take = [&] {
    std::lock_guard<std::mutex> g(mu);
    return std::exchange(stream, nullptr);
  };
  {  // leaves
    Conn c(server->port());
    c.send(request_text("GET", "/s"));
    ASSERT_TRUE(eventually([&] {
      std::lock_guard<std::mutex> g(mu);
      return stream != nullptr;
    }));
    auto s = take();
    EXPECT_TRUE(s->write("first"));
    c.close();
    auto t0 = Clock::now();
    while (s->write(std::string(1024, 'x')) && seconds_since(t0) < 10)
      std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(s->open());
    EXPECT_LT(seconds_since(t0), 5.0);
    EXPECT_TRUE(eventually([&] { return closed == 1; }));
  }
  {  // stops reading
    Conn c(server->port());
    c.send(request_text("GET", "/s"));
    ASSERT_TRUE(eventually([&] {
      std::lock_guard<std::mutex> g(mu);
      return stream != nullptr;
    }));
    auto s = take();
    std::string piece(16 << 10, 'y');
    size_t accepted = 0;
    auto t0 = Clock::now();
    while (seconds_since(t0) < 20 && s->write(piece)) accepted += piece.size();
    double gave_up = seconds_since(t0);
    EXPECT_FALSE(s->open());
    EXPECT_LT(gave_up, 10.0);
    // Socket buffers (a few MiB at most on loopback) plus the 64 KiB stream buffer.
    EXPECT_LT(accepted, size_t(16) << 20);
    EXPECT_TRUE(eventually([&] { return closed == 2; }));
    EXPECT_TRUE(eventually([&] { return server->stats().connections_open == 0; }));
    EXPECT_TRUE(c.wait_closed(10s));  // after what the kernel still held for it
  }
  server->stop();
}

TEST_F(HttpTest, StopFinishesRunningRequestsAndClosesTheRest) {
  start();
  Conn idle(port_);
  idle.send(request_text("GET", "/echo"));
  ASSERT_EQ(idle.read_response().status, 200);
  Conn busy(port_);
  busy.send(request_text("GET", "/block"));
  ASSERT_TRUE(eventually([&] { return blocked == 1; }));
  Conn half(port_);
  half.send("GET /echo HTTP/1.1\r\n");  // still sending its head
  auto t0 = Clock::now();
  std::thread stopper([&] { server_->stop(std::chrono::seconds(10)); });
  EXPECT_TRUE(idle.wait_closed(5s));
  EXPECT_TRUE(half.wait_closed(5s));
  EXPECT_TRUE(eventually([&] { return !Conn(port_).ok(); }, 5s));  // no longer accepting
  release();
  Reply r = busy.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "unblocked\n");
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(busy.wait_closed(5s));
  stopper.join();
  EXPECT_LT(seconds_since(t0), 8.0);
}

// Requests still queued for a worker when the server stops answer no one (their connections
// are closed): they ran anyway, one after another, and held the exit (8 queued MCP queries
// ran 8 s after their clients were disconnected). They are dropped now.
TEST_F(HttpTest, StopDropsTheRequestsStillQueued) {
  ServerOptions o;
  o.workers = 1;
  start(o);
  Conn running(port_);
  running.send(request_text("GET", "/block"));
  ASSERT_TRUE(eventually([&] { return blocked == 1; }));
  std::vector<Conn> queued;
  for (int i = 0; i < 4; ++i) {
    queued.emplace_back(port_);
    queued.back().send(request_text("GET", "/block"));
  }
  ASSERT_TRUE(eventually([&] { return server_->stats().requests == 5; }));
  std::thread stopper([&] { server_->stop(std::chrono::milliseconds(200)); });
  for (auto& c : queued) EXPECT_TRUE(c.wait_closed(5s));
  release();
  stopper.join();
  EXPECT_EQ(blocked, 1) << "a request queued when the server stopped ran";
}

TEST_F(HttpTest, StopEndsOpenStreams) {
  auto server = std::make_unique<Server>(ServerOptions{});
  std::shared_ptr<Stream> stream;
  std::atomic<bool> ready{false};
  server->route("GET", "/s", [&](const Request&) {
    auto [resp, s] = Response::streaming(200, "text/event-stream");
    s->write(sse_event("hello"));
    stream = s;
    ready = true;
    return std::move(resp);
  });
  ASSERT_TRUE(server->start());
  Conn c(server->port());
  c.send(request_text("GET", "/s"));
  ASSERT_TRUE(eventually([&] { return ready.load(); }));
  server->stop(std::chrono::seconds(5));
  Reply r = c.read_response(5s);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "data: hello\n\n");  // flushed, then the last chunk
  EXPECT_FALSE(stream->open());
  EXPECT_FALSE(stream->write("late"));
}

}  // namespace
}  // namespace ingero::serve::http::test

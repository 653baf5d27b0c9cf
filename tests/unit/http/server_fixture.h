// A server on 127.0.0.1:0 with a known set of routes, for the serve/http tests.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "serve/http/server.h"
#include "tests/unit/http/test_client.h"

namespace ingero::serve::http::test {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

inline const std::string kToken = "s3cret-token-0123456789";
inline const std::map<std::string, std::string> kAuth = {{"Authorization", "Bearer " + kToken}};

inline std::shared_ptr<const Authenticator> bearer() {
  auto a = BearerAuth::create({{"default", kToken}});
  EXPECT_TRUE(a) << a.error().message;
  return *a;
}

// Routes:
//   GET  /echo       worker; "peer_port=P principal=X tls=T"
//   POST /echo       worker; "bytes=N principal=X"
//   POST /upload     worker; max body 128 MiB; counts calls in `uploads`
//   GET  /fast       I/O thread, public
//   GET  /fast-auth  I/O thread, with the server's authentication; the principal
//   GET  /block      worker; waits until release() (at most 30 s)
//   GET  /events     SSE: 3 events written by a producer thread, 30 ms apart, then closed
//   GET  /static/*   worker; the path
//   GET  /throw      worker; throws
//   GET  /badheader  worker; a header value with a line break
class HttpTest : public ::testing::Test {
 protected:
  // `o.listen` defaults to 127.0.0.1:0.
  void start(ServerOptions o = {}) {
    server_ = std::make_unique<Server>(std::move(o));
    add_routes(*server_);
    auto st = server_->start();
    ASSERT_TRUE(st) << st.error().message;
    port_ = server_->port();
  }
  void TearDown() override {
    release();
    if (server_) server_->stop(std::chrono::seconds(2));
    for (auto& t : producers_)
      if (t.joinable()) t.join();
  }
  void release() {
    if (!released_.exchange(true)) release_.set_value();
  }
  void add_routes(Server& s) {
    s.route("GET", "/echo", [](const Request& r) {
      return Response::text(200, "peer_port=" + std::to_string(r.peer_port) + " principal=" +
                                     r.principal + " tls=" + std::to_string(int(r.tls)));
    });
    s.route("POST", "/echo", [](const Request& r) {
      return Response::text(200,
                            "bytes=" + std::to_string(r.body.size()) + " principal=" + r.principal);
    });
    RouteOptions big;
    big.max_body_bytes = 128 << 20;
    s.route(
        "POST", "/upload",
        [this](const Request& r) {
          ++uploads;
          return Response::text(200, "bytes=" + std::to_string(r.body.size()));
        },
        big);
    RouteOptions fast;
    fast.run_on = RunOn::io_thread;
    fast.public_route = true;
    s.route(
        "GET", "/fast", [](const Request&) { return Response::text(200, "fast"); }, fast);
    RouteOptions fast_auth;
    fast_auth.run_on = RunOn::io_thread;
    s.route(
        "GET", "/fast-auth", [](const Request& r) { return Response::text(200, r.principal); },
        fast_auth);
    s.route("GET", "/block", [this](const Request&) {
      ++blocked;
      released_future_.wait_for(std::chrono::seconds(30));
      return Response::text(200, "unblocked");
    });
    s.route("GET", "/events", [this](const Request&) {
      auto [resp, stream] = Response::streaming(200, "text/event-stream");
      stream->on_close([this] { ++streams_closed; });
      producers_.emplace_back([stream = stream] {
        for (int i = 1; i <= 3; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(30));
          stream->write(
              sse_event("{\"n\":" + std::to_string(i) + "}", "message", std::to_string(i)));
        }
        stream->close();
      });
      return std::move(resp);
    });
    s.route("GET", "/static/*", [](const Request& r) { return Response::text(200, r.path); });
    s.route("GET", "/throw", [](const Request&) -> Response { throw std::runtime_error("boom"); });
    s.route("GET", "/badheader", [](const Request&) {
      auto r = Response::text(200, "ok");
      r.headers.add("X-Evil", "a\r\nSet-Cookie: x=1");
      r.headers.add("X-Good", "yes");
      return r;
    });
  }
  // Waits until `pred` holds, up to `timeout`.
  template <class P>
  bool eventually(P pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
  std::atomic<int> uploads{0}, blocked{0}, streams_closed{0};
  std::promise<void> release_;
  std::shared_future<void> released_future_ = release_.get_future().share();
  std::atomic<bool> released_{false};
  std::vector<std::thread> producers_;
};

}  // namespace ingero::serve::http::test

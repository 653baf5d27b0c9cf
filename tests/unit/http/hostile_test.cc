// serve/http against what hostile clients and the tracer's own exec must not take: the memory
// of many request bodies at once, the CPU of a raised priority (a tracer at nice -10, a
// client guessing passwords), and the server's sockets, inherited by a command it runs.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>

#include "tests/unit/http/server_fixture.h"

namespace ingero::serve::http::test {
namespace {

// Issue found by a hostile client: 500 connections each sending a 4 MiB body (minus a byte,
// so that none completes) grew the tracer serving /metrics from 37 MB to 2 GB. The bodies
// held at once are bounded; beyond, a request is told to retry before its body is read.
TEST_F(HttpTest, RequestBodiesHeldAtOnceAreBounded) {
  ServerOptions o;
  o.limits.max_body_bytes = 1000;
  o.limits.max_bodies_bytes = 1500;
  start(o);
  Conn first(port_);
  first.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return server_->stats().bodies_held_bytes == 1000; }))
      << server_->stats().bodies_held_bytes;
  Conn second(port_);
  second.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n");
  Reply busy = second.read_response();
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.headers["retry-after"], "1");
  EXPECT_EQ(busy.body, "busy, retry: the server holds as many request bodies as it takes\n");
  EXPECT_TRUE(second.wait_closed(5s));
  // What still fits is read.
  EXPECT_EQ(request(port_, "POST", "/echo", {}, std::string(500, 'b')).body,
            "bytes=500 principal=\n");
  // A chunked body holds its route's limit while it is read.
  Conn chunked(port_);
  chunked.send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(chunked.read_response().status, 503);
  first.send(std::string(1000, 'a'));
  EXPECT_EQ(first.read_response().body, "bytes=1000 principal=\n");
  // Given back once the request is done: the connection waits for its next one.
  ASSERT_TRUE(eventually([&] { return server_->stats().bodies_held_bytes == 0; }))
      << server_->stats().bodies_held_bytes;
  EXPECT_EQ(request(port_, "POST", "/echo", {}, std::string(1000, 'c')).body,
            "bytes=1000 principal=\n");
  EXPECT_EQ(server_->stats().busy, 2u);
  // A route whose own limit is above the whole budget (/upload, 128 MiB) is read alone.
  EXPECT_EQ(request(port_, "POST", "/upload", {}, std::string(2000, 'd')).body, "bytes=2000\n");
}

// GET and HEAD take no body unless their route says so (/metrics accepted 4 MiB ones).
TEST_F(HttpTest, GetTakesNoBody) {
  start();
  Reply r = request(port_, "GET", "/echo", {}, "hello");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, "GET /echo takes no body\n");
  Conn c(port_);
  c.send("GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(c.read_response().status, 200);
}

int thread_nice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)));
}

// Decides slowly (as bcrypt does), noting the nice value of the thread it ran on.
class SlowCheck : public Authenticator {
 public:
  AuthDecision check(const Request& head) const override {
    nice_seen = thread_nice();
    return {head.headers.get("x-pass") == "yes", "slow"};
  }
  bool quick(const Request&) const override { return false; }
  std::string challenge() const override { return "Test"; }
  mutable std::atomic<int> nice_seen{-100};
};

// Issue found by a hostile client: the tracer runs at nice -10 to keep up with its rings, and
// its HTTP threads inherited it: 8 clients guessing passwords took 9.5 s of CPU in 12 s at
// that priority, and the traced job's calls fell from 34,000 to 2,000 a second. The server's
// threads run at the nice they are given; password checks at nice 19, one at a time.
TEST(HttpPriority, ServerThreadsRunAtTheirNiceAndPasswordChecksAtNineteen) {
  const int base = getpriority(PRIO_PROCESS, 0);
  const int given = std::min(base + 3, 18);
  auto slow = std::make_shared<SlowCheck>();
  ServerOptions o;
  o.nice = given;
  o.auth = slow;
  o.workers = 1;
  Server s(std::move(o));
  s.route("GET", "/worker",
          [](const Request&) { return Response::text(200, std::to_string(thread_nice())); });
  RouteOptions io;
  io.run_on = RunOn::io_thread;
  s.route(
      "GET", "/io",
      [](const Request&) { return Response::text(200, std::to_string(thread_nice())); }, io);
  ASSERT_TRUE(s.start());
  Reply w = request(s.port(), "GET", "/worker", {{"X-Pass", "yes"}});
  EXPECT_EQ(w.body, std::to_string(given) + "\n");
  EXPECT_EQ(request(s.port(), "GET", "/io", {{"X-Pass", "yes"}}).body,
            std::to_string(given) + "\n");
  EXPECT_EQ(slow->nice_seen.load(), 19);
  EXPECT_EQ(request(s.port(), "GET", "/io", {{"X-Pass", "no"}}).status, 401);
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), base);  // the caller's own thread is left alone
  s.stop(std::chrono::seconds(2));
}

// The local port of socket `fd`, or 0 when it is no IPv4 socket.
int local_port(int fd) {
  sockaddr_in a{};
  socklen_t n = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0 || a.sin_family != AF_INET)
    return 0;
  return ntohs(a.sin_port);
}

// Issue found by a hostile client: Asio opens sockets without close-on-exec, so the command
// `ingero trace --prometheus PORT -- CMD` ran held the listening socket, and kept the port,
// unanswered, after the tracer had ended.
TEST_F(HttpTest, ListeningAndAcceptedSocketsAreClosedOnExec) {
  start();
  Conn c(port_);
  ASSERT_TRUE(eventually([&] { return server_->stats().connections_open == 1; }));
  int servers = 0, inherited = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::stoi(e.path().filename().string());
    if (local_port(fd) != port_) continue;  // the client's socket has another local port
    ++servers;
    if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC)) ++inherited;
  }
  EXPECT_EQ(servers, 2);  // the listener and the accepted connection
  EXPECT_EQ(inherited, 0);
}

}  // namespace
}  // namespace ingero::serve::http::test

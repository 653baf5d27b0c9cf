// A receiver that answers 200 and then cuts its body short (or sends one that is not what its
// headers say) has taken the request: the exporter counts it sent, once. It was sent again
// four times, the chains' log records arriving as often, and then counted dropped (a hostile
// tester's receiver, 2026-12-01).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "tests/support/loopback_listener.h"
#include "tests/unit/otlp_fixture.h"

namespace ingero::serve::otlp {
namespace {

using namespace fixture;
using test::listen_on_loopback;

// Reads each request whole (its head and Content-Length body), answers 200 with a body of 2
// bytes where its head says 10, and closes the connection.
class CutShortReceiver {
 public:
  CutShortReceiver() {
    fd_ = listen_on_loopback(port_);
    thread_ = std::thread([this] { run(); });
  }
  ~CutShortReceiver() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  size_t requests() const { return requests_; }

 private:
  void run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      serve(c);
      close(c);
    }
  }
  void serve(int c) {
    std::string in;
    char buf[65536];
    size_t head_end = std::string::npos, need = 0;
    while (!stop_) {
      pollfd p{c, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      ssize_t n = read(c, buf, sizeof buf);
      if (n <= 0) return;
      in.append(buf, size_t(n));
      if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
        auto at = in.find("Content-Length: ");
        if (at == std::string::npos) at = in.find("content-length: ");
        need = at == std::string::npos ? 0 : std::stoul(in.substr(at + 16));
      }
      if (head_end != std::string::npos && in.size() >= head_end + 4 + need) break;
    }
    ++requests_;
    const std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 10\r\n"
        "Connection: close\r\n\r\nab";
    (void)!write(c, answer.data(), answer.size());
  }
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> requests_{0};
  std::thread thread_;
};

TEST(OtlpExport, AnAnswerOf200CutShortIsSentOnce) {
  CutShortReceiver rx;
  Metrics m(false);
  feed(m);
  Exporter e(config_for(rx.url()), fast_options(), m.collectable());
  EXPECT_TRUE(e.on_chains({chain("tail_latency", engine::Severity::kLow, 7, "cudaFree")},
                          1'700'000'010'000'000'000));
  e.finish(Clock::now() + 10s);
  auto s = e.stats();
  for (Signal sig : {Signal::kMetrics, Signal::kLogs}) {
    const auto& x = s.delivery.of(sig);
    EXPECT_GT(x.queued, 0u) << signal_name(sig);
    EXPECT_EQ(x.sent, x.queued) << signal_name(sig);
    EXPECT_EQ(x.dropped, 0u) << signal_name(sig);
  }
  EXPECT_EQ(s.delivery.failures, 0u) << s.delivery.last_error;
  EXPECT_EQ(rx.requests(), s.delivery.attempts);
  EXPECT_EQ(s.delivery.attempts,
            s.delivery.of(Signal::kMetrics).requests + s.delivery.of(Signal::kLogs).requests);
}

}  // namespace
}  // namespace ingero::serve::otlp

// A TCP server on 127.0.0.1 that accepts every connection, reads what comes and never answers:
// a stalled ClickHouse (or any stalled HTTP peer) for tests.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "tests/support/loopback_listener.h"

namespace ingero::test {

// Listens on 127.0.0.1, accepts every connection, reads what comes and never answers.
class SilentServer {
 public:
  SilentServer() {
    fd_ = listen_on_loopback(port_);
    thread_ = std::thread([this] { run(); });
  }
  ~SilentServer() {
    stop_ = true;
    thread_.join();
    for (int c : clients_) close(c);
    close(fd_);
  }
  int port() const { return port_; }
  // True once a request's first bytes arrived (a request is in flight, unanswered).
  bool wait_for_request(std::chrono::seconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (bytes_ > 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  void run() {
    while (!stop_) {
      std::vector<pollfd> fds = {{fd_, POLLIN, 0}};
      for (int c : clients_) fds.push_back({c, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) clients_.push_back(c);
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
        char buf[4096];
        ssize_t n = read(fds[i].fd, buf, sizeof buf);
        if (n > 0) bytes_ += uint64_t(n);
      }
    }
  }
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> bytes_{0};
  std::vector<int> clients_;
  std::thread thread_;
};

}  // namespace ingero::test

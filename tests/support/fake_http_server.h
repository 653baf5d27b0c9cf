// An HTTP/1.1 server on 127.0.0.1 that answers every request with 200 and a body of the
// test's choosing: something in front of ClickHouse (a proxy, a load balancer's health page)
// that says yes to everything and stores nothing; or, after stop_answering(), one that takes
// requests and answers none. Keep-alive, Content-Length bodies (what libcurl sends for the
// shipper's POSTs).
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
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/loopback_listener.h"

namespace ingero::test {

class FakeHttpServer {
 public:
  // `answer(target, body)` gives the body of the 200 answer to a request; the target is
  // percent-decoded ("/?query=INSERT INTO ..."), the body as sent (gzip for inserts).
  using AnswerFn = std::function<std::string(const std::string& target, const std::string& body)>;
  // `headers(target)`, where given: header lines ("Name: value\r\n" each) the answer carries.
  using HeadersFn = std::function<std::string(const std::string& target)>;
  explicit FakeHttpServer(AnswerFn answer, HeadersFn headers = nullptr)
      : answer_(std::move(answer)), headers_(std::move(headers)) {
    fd_ = listen_on_loopback(port_);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeHttpServer() {
    stop_ = true;
    thread_.join();
    for (auto& c : clients_) close(c.fd);
    close(fd_);
  }
  int port() const { return port_; }
  std::string url(const std::string& db) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + db;
  }
  // The targets of the requests answered so far.
  std::vector<std::string> targets() const {
    std::lock_guard<std::mutex> g(mu_);
    return targets_;
  }
  size_t inserts() const { return count("query=INSERT INTO"); }
  // From the next request on, requests are taken (targets() and count() list them) but never
  // answered, their connections kept open: a server that stopped answering. Any thread may call
  // it, the answer function included (the request it is answering is answered).
  void stop_answering() { answering_ = false; }
  // Every answer from now on has this status line ("401 Unauthorized"; 200 OK before), and
  // comes `delay_ms` after its request (a slow server). Set before requests arrive.
  void answer_with(std::string status, int delay_ms = 0) {
    std::lock_guard<std::mutex> g(mu_);
    status_ = std::move(status);
    delay_ms_ = delay_ms;
  }
  // The requests taken since stop_answering().
  size_t unanswered() const {
    std::lock_guard<std::mutex> g(mu_);
    return unanswered_;
  }
  // Requests whose target or body held `text` (a read-back: "SELECT uniqExact(").
  size_t count(const std::string& text) const {
    std::lock_guard<std::mutex> g(mu_);
    size_t n = 0;
    for (const auto& t : seen_) n += t.find(text) != std::string::npos;
    return n;
  }

 private:
  struct Client {
    int fd;
    std::string in;
  };
  static std::string decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += s[i] == '+' ? ' ' : s[i];
      }
    }
    return out;
  }
  // Answers every complete request in c.in; false when the peer is gone.
  bool serve(Client& c) {
    while (true) {
      size_t end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) return true;
      std::string head = c.in.substr(0, end);
      size_t length = 0;
      for (const char* name : {"\r\nContent-Length:", "\r\ncontent-length:"})
        if (size_t p = head.find(name); p != std::string::npos)
          length = std::stoul(head.substr(p + std::string(name).size()));
      if (c.in.size() < end + 4 + length) return true;
      std::string body = c.in.substr(end + 4, length);
      c.in.erase(0, end + 4 + length);
      size_t sp = head.find(' ');
      std::string target = decode(head.substr(sp + 1, head.find(' ', sp + 1) - sp - 1));
      {
        std::lock_guard<std::mutex> g(mu_);
        targets_.push_back(target);
        seen_.push_back(target + "\n" + body);
        if (!answering_) {
          ++unanswered_;
          continue;
        }
      }
      std::string status;
      int delay_ms = 0;
      {
        std::lock_guard<std::mutex> g(mu_);
        status = status_;
        delay_ms = delay_ms_;
      }
      if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      std::string b = answer_(target, body);
      std::string out = "HTTP/1.1 " + status + "\r\nContent-Type: text/plain\r\n" +
                        (headers_ ? headers_(target) : std::string()) +
                        "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
      if (write(c.fd, out.data(), out.size()) != ssize_t(out.size())) return false;
    }
  }
  void run() {
    while (!stop_) {
      std::vector<pollfd> fds = {{fd_, POLLIN, 0}};
      for (auto& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) clients_.push_back({c, ""});
      }
      for (size_t i = fds.size() - 1; i >= 1; --i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
        Client& c = clients_[i - 1];
        char buf[65536];
        ssize_t n = read(c.fd, buf, sizeof buf);
        if (n > 0) c.in.append(buf, size_t(n));
        if (n <= 0 || !serve(c)) {
          close(c.fd);
          clients_.erase(clients_.begin() + long(i - 1));
        }
      }
    }
  }
  AnswerFn answer_;
  HeadersFn headers_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false}, answering_{true};
  std::vector<Client> clients_;
  mutable std::mutex mu_;
  std::vector<std::string> targets_;
  std::vector<std::string> seen_;  // target, newline, body
  size_t unanswered_ = 0;
  std::string status_ = "200 OK";
  int delay_ms_ = 0;
  std::thread thread_;
};

}  // namespace ingero::test

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "serve/mcp/transport.h"

namespace ingero::serve::mcp {

ThreadPool::ThreadPool(size_t threads, size_t max_queue) : max_queue_(max_queue) {
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i)
    threads_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::submit(std::function<void()> job) {
  std::unique_lock<std::mutex> l(mu_);
  space_.wait(l, [&] { return q_.size() < max_queue_; });
  q_.push_back(std::move(job));
  cv_.notify_one();
}

bool ThreadPool::try_submit(std::function<void()> job) {
  std::lock_guard<std::mutex> g(mu_);
  if (q_.size() >= max_queue_) return false;
  q_.push_back(std::move(job));
  cv_.notify_one();
  return true;
}

size_t ThreadPool::clear() {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = q_.size();
  q_.clear();
  space_.notify_all();
  if (running_ == 0) idle_.notify_all();
  return n;
}

void ThreadPool::drain() {
  std::unique_lock<std::mutex> l(mu_);
  idle_.wait(l, [&] { return q_.empty() && running_ == 0; });
}

void ThreadPool::worker() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;  // stopping, nothing left
      job = std::move(q_.front());
      q_.pop_front();
      ++running_;
      space_.notify_one();
    }
    try {
      job();
    } catch (const std::exception& e) {
      std::cerr << "ingero mcp: request failed: " << e.what() << "\n";
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      --running_;
      if (q_.empty() && running_ == 0) idle_.notify_all();
    }
  }
}

namespace {

constexpr size_t kMaxQueued = 64;

class StdoutWriter {
 public:
  // One message per line; writes never interleave. False once stdout is gone.
  bool write(const Json& msg) {
    std::string line = msg.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    std::lock_guard<std::mutex> g(mu_);
    if (broken_) return false;
    for (size_t off = 0; off < line.size();) {
      ssize_t n = ::write(1, line.data() + off, line.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        broken_ = true;
        errno_ = n < 0 ? errno : 0;
        return false;
      }
      off += size_t(n);
    }
    return true;
  }
  bool broken() {
    std::lock_guard<std::mutex> g(mu_);
    return broken_;
  }
  // Why the write failed: the client gone (EPIPE), or the file standard output is full, ...
  std::string why() {
    std::lock_guard<std::mutex> g(mu_);
    if (errno_ == EPIPE || errno_ == ECONNRESET || errno_ == 0) return "the client closed it";
    return std::strerror(errno_);
  }

 private:
  std::mutex mu_;
  bool broken_ = false;
  int errno_ = 0;
};

// One stdio client's messages, as they are read: in order, or onto the pool.
class StdioDispatch {
 public:
  StdioDispatch(Server& server, size_t threads) : server_(server), pool_(threads, kMaxQueued) {
    session_.id = "stdio";
  }
  StdoutWriter& out() { return out_; }

  void line(std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    // A NUL is no JSON: the server's handler says so, in order (the parser stopped there).
    Json msg = line.find('\0') == std::string::npos ? Json::parse(line, nullptr, false)
                                                    : Json(Json::value_t::discarded);
    // initialize and notifications run in order, here; requests run on the pool, so a slow
    // query does not hold up a cancellation. Until initialize is answered everything runs in
    // order, so the lifecycle check sees the state at arrival. A ping too: it waited behind
    // every busy worker.
    bool in_order = !session_.initialized || msg.is_discarded() || !Server::is_request(msg) ||
                    Server::is_initialize(msg) || msg["method"] == "ping" ||
                    json_depth(line) > kMaxJsonDepth || line.size() > kMaxMessageBytes;
    if (in_order) {
      if (auto r = server_.handle(line, session_, notify_)) out_.write(*r);
      return;
    }
    queue(std::move(msg));
  }

  // Stopped (SIGINT, SIGTERM, SIGHUP): what waits is dropped and what runs is cancelled; a
  // stop ran every queued query to its end first (24 s for 20 of them). At the end of the
  // input every request is still answered.
  void finish(bool stopped) {
    if (stopped) {
      stopped_.store(true);
      pool_.clear();
      session_.cancel_all();
    }
    pool_.drain();
  }

 private:
  void queue(Json msg) {
    // Tracked from now: a cancel that comes while it waits is not lost, and it does not run.
    Json id = msg["id"];
    auto cancelled = session_.track(id);
    // Never blocks: a reader waiting for room read no cancel, nor the end of its input.
    if (pool_.try_submit([this, cancelled, id, m = std::move(msg)] {
          // Cancelled by the client while it waited, or while it ran: no answer (the spec: a
          // receiver should not answer a request it was told to cancel). One the server's
          // stop cancelled while it ran says so.
          if (!cancelled->load())
            if (auto r = server_.handle_message(m, session_, notify_);
                r && (!cancelled->load() || stopped_.load()))
              out_.write(*r);
          session_.untrack(id);
        }))
      return;
    session_.untrack(id);
    out_.write({{"jsonrpc", "2.0"},
                {"id", id},
                {"error",
                 {{"code", kInternalError},
                  {"message", "the server has " + std::to_string(kMaxQueued) +
                                  " requests waiting: send this one again once some are "
                                  "answered"}}}});
  }

  Server& server_;
  std::atomic<bool> stopped_{false};  // a signal stopped the server
  StdoutWriter out_;
  Session session_;
  Notify notify_ = [this](const Json& m) { out_.write(m); };
  ThreadPool pool_;  // last: its workers use the members above until it is gone
};

}  // namespace

int serve_stdio(Server& server, size_t threads, std::atomic<bool>& stop) {
  StdioDispatch d(server, threads);
  std::string buf;
  bool discarding = false;  // inside an over-long line: drop until its newline
  char chunk[65536];
  while (!stop && !d.out().broken()) {
    pollfd p{0, POLLIN, 0};
    int pr = poll(&p, 1, 200);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the client is done
    size_t start = 0;
    for (ssize_t i = 0; i < n; ++i) {
      if (chunk[i] != '\n') continue;
      if (discarding) {
        discarding = false;
      } else {
        buf.append(chunk + start, size_t(i) - start);
        d.line(std::move(buf));
      }
      buf.clear();
      start = size_t(i) + 1;
    }
    if (!discarding) buf.append(chunk + start, size_t(n) - start);
    if (buf.size() > kMaxMessageBytes) {
      d.out().write({{"jsonrpc", "2.0"},
                     {"id", nullptr},
                     {"error",
                      {{"code", kInvalidRequest},
                       {"message", "message exceeds the limit of " +
                                       std::to_string(kMaxMessageBytes) + " bytes"}}}});
      buf.clear();
      discarding = true;
    }
  }
  if (!buf.empty() && !discarding) d.line(std::move(buf));  // a last message without newline
  d.finish(stop);
  // The client is gone before its answers: said, and not success (it exited 0 unsaid).
  if (d.out().broken()) {
    std::cerr << "ingero mcp: writing to standard output failed: " << d.out().why() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace ingero::serve::mcp

// MCP transports: stdio (newline-delimited JSON-RPC on stdin/stdout, logs on stderr) and
// Streamable HTTP (POST /mcp, sessions, Origin/Host checks, optional TLS and bearer token) on
// the shared HTTP server library serve/http. Both run requests on a small pool of threads
// (docs/mcp.md).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/http/server.h"
#include "serve/mcp/server.h"
#include "serve/mcp/session_store.h"

namespace ingero::serve::mcp {

class ThreadPool {
 public:
  ThreadPool(size_t threads, size_t max_queue);
  ~ThreadPool();  // finishes queued work, then joins
  // Queues `job`; blocks while the queue is full.
  void submit(std::function<void()> job);
  // Queues `job` unless the queue is full.
  bool try_submit(std::function<void()> job);
  void drain();    // waits until the queue is empty and no job runs
  size_t clear();  // drops the jobs not yet started; returns how many

 private:
  void worker();
  std::mutex mu_;
  std::condition_variable cv_, space_, idle_;
  std::deque<std::function<void()>> q_;
  size_t max_queue_, running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Serves until stdin closes (or `stop` is set); returns the process exit code.
int serve_stdio(Server& server, size_t threads, std::atomic<bool>& stop);

struct HttpOptions {
  std::string addr = "127.0.0.1:8081";   // host:port; ":port" or "port" binds loopback
  std::string tls_cert, tls_key;         // both or neither
  std::string token;                     // required bearer token ("" = none); from the environment
  std::vector<std::string> allow_hosts;  // extra Host names accepted (DNS-rebinding check)
  std::vector<std::string> allow_origins;  // extra Origins accepted, exactly ("https://x.example")
  size_t threads = 4;                      // workers running requests (serve/http's pool)
  size_t max_queued = 256;                 // requests waiting for a worker; beyond: 503
  SessionLimits sessions;
  // Deadlines, connection caps and sizes (serve/http); the body limit is kMaxMessageBytes.
  // Every local agent shares 127.0.0.1, and an HTTP client library keeps several kept-alive
  // connections per client (the official SDK in Node: ~3 each, in one pool for every client of
  // the process): 1,024 per address and 2,048 in all rather than the library's 32 and 512. At
  // 128, 60 SDK clients of one process passed the cap, and closing their idle kept-alive
  // connections for room raced with the POSTs they were sending on them ("other side closed").
  http::Limits limits = [] {
    http::Limits l;
    l.max_connections_per_peer = 1024;
    l.max_connections = 2048;
    return l;
  }();
};

// Streamable HTTP on serve/http (serve/mcp/http.cc has the protocol rules).
class HttpServer {
 public:
  HttpServer(Server& server, HttpOptions opts);
  ~HttpServer();
  // Binds and prepares TLS; a busy port or a bad certificate is an Error.
  ingero::Status start();
  int port() const;
  const std::string& url() const { return url_; }
  // False when reachable from other hosts (0.0.0.0, [::], a non-loopback address).
  bool loopback_only() const;
  http::Stats stats() const;
  const SessionStore& sessions() const;
  // Serves until `stop` is set, then stops the server (grace: 5 s); returns the exit code.
  int run(std::atomic<bool>& stop);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::string url_;
};

}  // namespace ingero::serve::mcp

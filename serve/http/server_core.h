// Internal: what the acceptor (server.cc) and the connections (connection.cc) share. Includes
// Asio; only the library's own translation units include it.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "serve/http/host_policy.h"
#include "serve/http/server.h"
#include "serve/http/worker_pool.h"

namespace ingero::serve::http::detail {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct Route {
  std::string method, path;
  bool prefix = false;  // path was "/x/*": matches "/x/" and below
  Handler handler;
  RouteOptions options;
};

// Posts to an io_context for as long as it exists: Streams keep a wake-up that may be called
// from a producer thread after the server is gone.
struct PostGate {
  std::mutex mu;
  bool open = true;
};

class ConnectionBase {
 public:
  explicit ConnectionBase(std::string peer_address) : peer(std::move(peer_address)) {}
  virtual ~ConnectionBase() = default;
  // All three post to the connection's strand; safe from any thread.
  virtual void stop_gracefully() = 0;  // see Server::stop
  virtual void stop_now() = 0;
  // Closed to make room under a cap (Core::admit): at once while it waits for a request, is
  // still receiving a request's head, or lingers after its answer; else after the response in
  // progress.
  virtual void evict() = 0;

  // What Core::admit weighs when a cap is full, written on the strand, read under Core's lock.
  // kBusy while a request is in progress (its head is in): never closed for room. Otherwise the
  // connection waits for a request, and has shown: kNothing (new, a TLS handshake, a request
  // head still arriving, or lingering after its answer), kServed (requests that needed no
  // credentials), or kAuthenticated (a request that passed authentication).
  enum Standing : int { kBusy = -1, kNothing = 0, kServed = 1, kAuthenticated = 2 };
  std::atomic<int> standing{kNothing};
  std::atomic<int64_t> waiting_since_ns{0};  // steady clock: when it began to wait
  // Holds a place under the caps; whoever clears it (the connection closing, or Core evicting
  // it) gives the place back, once.
  std::atomic<bool> counted{true};
  const std::string peer;
};

struct Counters {
  std::atomic<uint64_t> accepted{0}, refused_per_peer{0}, refused_total{0}, evicted{0}, requests{0},
      timeouts{0}, bad_requests{0}, forbidden{0}, unauthorized{0}, too_large{0}, busy{0},
      handler_errors{0}, body_bytes{0};
};

struct Core {
  Core(ServerOptions o);

  struct Match {
    const Route* route = nullptr;
    std::string allow;  // methods of the path, when the path matched under other methods
  };
  Match find(const std::string& method, const std::string& path) const;
  // The route's Authenticator, or null when it needs none.
  const Authenticator* auth_for(const Route& r) const;
  size_t max_body(const Route& r) const;
  // Takes `n` bytes of Limits::max_bodies_bytes for a request's body; false when they would
  // pass it. let_go_body gives them back once the request is done.
  bool hold_body(size_t n);
  void let_go_body(size_t n);
  size_t bodies_held() const { return bodies_held_.load(); }
  void log(const std::string& msg) const;

  // Admission of a new connection from `peer`. When a cap (the peer's, or the total) is full,
  // the waiting connection that has shown least (ConnectionBase::standing), longest waiting,
  // is evicted to make room: idle sockets never lock out a client that sends requests. False
  // (and counted) when every connection under the cap is busy.
  bool admit(const std::string& peer);
  // Gives back `c`'s place under the caps, if it still holds one.
  void release(ConnectionBase& c);
  void track(const std::shared_ptr<ConnectionBase>& c, uint64_t& id);
  void untrack(uint64_t id);
  std::vector<std::shared_ptr<ConnectionBase>> live_connections();
  size_t open_connections();
  // Waits until no connection is open, or `until`.
  bool wait_closed(std::chrono::steady_clock::time_point until);

  ServerOptions opts;
  std::vector<Route> routes;
  std::optional<HostChecker> hosts;
  std::unique_ptr<WorkerPool> pool;
  std::unique_ptr<WorkerPool> slow_auth;  // ServerOptions::max_queued_slow_auth
  std::shared_ptr<PostGate> gate = std::make_shared<PostGate>();
  std::atomic<bool> stopping{false};
  // Set by stop() once its grace is over: a request a worker takes from then on answers no one
  // and is not run (its connection is closed).
  std::atomic<bool> dropping{false};
  bool tls = false;
  Counters counters;

 private:
  // Under mu_: evicts the best victim among live connections from `peer` (any peer when
  // null); false when none is waiting.
  bool evict_one(const std::string* peer);
  void give_back(const std::string& peer);  // under mu_

  std::atomic<size_t> bodies_held_{0};
  std::mutex mu_;
  std::condition_variable closed_cv_;
  std::unordered_map<std::string, size_t> per_peer_;
  size_t open_ = 0;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::weak_ptr<ConnectionBase>> live_;
};

// Starts serving an admitted socket. `ssl` is null for plain HTTP.
void start_connection(Core& core, tcp::socket socket, net::ssl::context* ssl, std::string peer,
                      uint16_t peer_port);

// "::ffff:1.2.3.4" -> "1.2.3.4".
std::string peer_address(const tcp::endpoint& ep);

}  // namespace ingero::serve::http::detail

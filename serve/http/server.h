// ingero's HTTP/1.1 server, shared by `mcp --http`, the dashboard and the Prometheus
// /metrics endpoint. Event-driven (Boost.Asio/Beast behind this header): a connection costs a
// socket and a few KiB, never a thread, however slowly its client sends or reads.
//
// Every request passes, in this order, before one byte of its body is read:
//   1. header size        431 when the request line and headers exceed max_header_bytes
//   2. Host and Origin    400/403 (HostPolicy: DNS-rebinding protection)
//   3. route              404 unknown path, 405 (with Allow) known path, other method
//   4. authentication     401 (with WWW-Authenticate) when the route's Authenticator refuses
//   5. declared body size 413 when Content-Length exceeds the route's limit (a GET or HEAD
//                         route takes none unless it says so), 503 when the bodies held at
//                         once would pass max_bodies_bytes
// A refused request is answered and its connection closed, so its body is never read. Then:
//   6. the body is read (an `Expect: 100-continue` client is told to send it), 413 when a
//      chunked body grows past the limit;
//   7. the handler runs on the worker pool (503 with Retry-After when the pool's queue is
//      full) or, for routes that ask for it, on the I/O thread.
// Deadlines: from a request's first byte to its last body byte, request_timeout in total
// (408 and close), however the bytes trickle in; between requests on a kept-alive connection,
// idle_timeout (silent close); each response, and each chunk of a stream, write_timeout.
// Connections: at most max_connections_per_peer per client IP address and max_connections in
// all. When a cap is full, a new connection makes room: the connection under that cap that
// waits for a request and has shown least (nothing yet, then requests that needed no
// credentials, then authenticated ones), longest waiting, is closed. Only when every one is
// busy with a request is the new one accepted and closed at once (plain HTTP: with a fixed
// 503), costing no parse and no thread. So idle sockets (every local client is 127.0.0.1)
// never lock out a client that sends requests. A new connection has request_timeout, not
// idle_timeout, to start its first request.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hal/result.h"
#include "serve/http/auth.h"
#include "serve/http/host_policy.h"
#include "serve/http/message.h"
#include "serve/http/stream.h"
#include "serve/http/tls.h"

namespace ingero::serve::http {

struct Limits {
  size_t max_header_bytes = 16 << 10;  // request line and header fields
  size_t max_body_bytes = 4 << 20;     // default for every route but GET and HEAD (0)
  // Request bodies held at once, over every connection: being read, waiting for a worker and
  // handled. A request whose body would pass it is answered 503 (Retry-After) before its body
  // is read: many clients each sending a body just under max_body_bytes cannot grow the
  // process by their number. A body larger than it (a route's own limit above it) is read
  // only while no other is held.
  size_t max_bodies_bytes = 32 << 20;
  size_t max_connections = 512;                       // open connections in all
  size_t max_connections_per_peer = 32;               // open connections per client IP address
  std::chrono::milliseconds request_timeout{10'000};  // first byte to last body byte; TLS handshake
  std::chrono::milliseconds idle_timeout{30'000};     // waiting for a request on an open connection
  std::chrono::milliseconds write_timeout{30'000};    // sending a response, or one stream chunk
  size_t max_stream_buffer = 1 << 20;  // bytes a Stream queues before write() waits for the client
};

enum class RunOn {
  worker,     // the worker pool: handlers that may block (SQL, MCP tools)
  io_thread,  // the I/O thread: handlers that return in microseconds and never block
};

// Returns the response; may throw (500, and the message goes to ServerOptions::log).
using Handler = std::function<Response(const Request&)>;

struct RouteOptions {
  RunOn run_on = RunOn::worker;
  // On a worker route, a request this says yes to (on the I/O thread, its body read) runs on
  // the I/O thread instead: one the handler answers in microseconds, which must not wait
  // behind the pool's queue (an MCP ping, or the cancellation of a call that is queued).
  std::function<bool(const Request&)> io_thread_if;
  // No authentication on this route even when the server has an Authenticator (a health
  // check). Host/Origin checks still apply.
  bool public_route = false;
  // This route's Authenticator instead of the server's.
  std::shared_ptr<const Authenticator> auth;
  // Instead of Limits::max_body_bytes (and of 0 for GET and HEAD, which take no body).
  std::optional<size_t> max_body_bytes;
};

struct ServerOptions {
  // "PORT" and ":PORT" listen on 127.0.0.1; see listen_address.h. Port 0: any free port.
  std::string listen = "127.0.0.1:0";
  std::optional<TlsOptions> tls;
  HostPolicy hosts;
  // Every route's, unless its RouteOptions say otherwise; null: no authentication.
  std::shared_ptr<const Authenticator> auth;
  Limits limits;
  size_t workers = 4;      // threads running handlers
  size_t max_queued = 64;  // requests waiting for a worker; beyond: 503
  size_t io_threads = 1;
  // The nice value of the server's I/O threads and workers; unset: the starting thread's. A
  // tracer raised to nice -10 to keep up with its rings serves at the nice it was started
  // with: its clients' requests never take CPU from the work it traces at a higher priority.
  std::optional<int> nice;
  // Checks of credentials not yet remembered (bcrypt, ~50-250 ms each) run one at a time on a
  // thread of their own at nice 19, at most this many waiting (beyond: 503): a client
  // guessing passwords takes at most that thread's share of one CPU, and only what the host
  // leaves idle; clients whose credentials were verified once never wait for it.
  size_t max_queued_slow_auth = 16;
  // Added to every response (the web-config's http_server_config.headers). By default every
  // response also carries Cache-Control: no-store and X-Content-Type-Options: nosniff unless
  // its handler set them.
  std::vector<std::pair<std::string, std::string>> response_headers;
  // Where errors nobody can be told about go (a handler's exception, accept failures);
  // default: stderr, prefixed "ingero http: ".
  std::function<void(const std::string&)> log;
};

// Counters since start(); a snapshot.
struct Stats {
  uint64_t connections_accepted = 0;  // admitted under the caps
  uint64_t connections_open = 0;
  uint64_t refused_per_peer = 0;  // closed at once: the peer had max_connections_per_peer
  uint64_t refused_total = 0;     // closed at once: max_connections were open
  uint64_t evicted = 0;       // closed to make room under a cap for a new connection (Core::admit)
  uint64_t requests = 0;      // requests whose handler ran
  uint64_t timeouts = 0;      // 408: request_timeout passed before the request was read
  uint64_t bad_requests = 0;  // 400 (malformed), 501 (unknown transfer coding)
  uint64_t forbidden = 0;     // 403 and 400 from the Host/Origin checks
  uint64_t unauthorized = 0;  // 401
  uint64_t too_large = 0;     // 413 and 431
  uint64_t busy = 0;          // 503: the worker queue was full, or the bodies' budget
  uint64_t handler_errors = 0;   // 500: a handler threw
  uint64_t body_bytes = 0;       // body bytes read and handed to handlers
  size_t bodies_held_bytes = 0;  // of Limits::max_bodies_bytes, held by requests now
  size_t workers_busy = 0;       // handlers running now
  size_t queued = 0;             // requests waiting for a worker now
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Adds a route; only before start(). `path` is matched exactly, or as a prefix when it ends
  // in "/*" ("/static/*" matches "/static/app.js"). The first matching route wins.
  void route(std::string method, std::string path, Handler handler, RouteOptions options = {});

  // Loads TLS (a missing, unreadable or mismatched certificate or key is an Error naming the
  // file), binds, and starts the I/O and worker threads. A busy port is an Error. Once only.
  Status start();

  // After start():
  uint16_t port() const;
  const std::string& address() const;  // the bound address: "127.0.0.1", "::", "0.0.0.0"
  // False when the server is reachable from other hosts (0.0.0.0, [::], or any non-loopback
  // address): the caller should warn, naming the address, especially without authentication.
  bool loopback_only() const;
  // "http(s)://HOST:PORT" + path, with HOST the bound address, or 127.0.0.1 for a wildcard.
  std::string url(std::string_view path = "/") const;
  Stats stats() const;

  // Stops accepting; closes idle connections and those still sending a request; lets
  // requests whose handler runs finish and sends their responses (Connection: close); ends
  // open streams after what they hold is sent. Whatever is still open after `grace` is closed.
  // Then waits for handlers still running (they cannot be interrupted) and joins all threads.
  // Idempotent; the destructor calls it.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingero::serve::http

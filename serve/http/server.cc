// The acceptor, the caps on connections, and the server's life: start, stop, threads.
#include "serve/http/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <iostream>
#include <thread>
#include <tuple>

#include "serve/http/listen_address.h"
#include "serve/http/server_core.h"
#include "serve/http/tls_context.h"

namespace ingero::serve::http {

using namespace detail;

namespace {

// What a connection over the caps gets before it is closed, if its socket takes it at once.
constexpr std::string_view kRefused =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 21\r\nConnection: close\r\nRetry-After: 1\r\n\r\ntoo many connections\n";

void close_on_exec(int fd) { (void)fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC); }

}  // namespace

// --- Core -------------------------------------------------------------------------------

Core::Core(ServerOptions o) : opts(std::move(o)) {
  if (!opts.log)
    opts.log = [](const std::string& m) { std::cerr << "ingero http: " << m << std::endl; };
}

Core::Match Core::find(const std::string& method, const std::string& path) const {
  Match m;
  std::vector<std::string_view> others;  // methods the path has
  const Route* get = nullptr;
  for (const auto& r : routes) {
    bool hit = r.prefix ? path.compare(0, r.path.size(), r.path) == 0 : path == r.path;
    if (!hit) continue;
    if (r.method == method) {
      m.route = &r;
      return m;
    }
    if (r.method == "GET" && !get) get = &r;
    if (std::find(others.begin(), others.end(), r.method) == others.end())
      others.push_back(r.method);
  }
  // HEAD is GET without the body (RFC 9110 9.3.2: every server supports both); the connection
  // sends the GET's head only.
  if (method == "HEAD" && get) {
    m.route = get;
    return m;
  }
  if (get && std::find(others.begin(), others.end(), "HEAD") == others.end())
    others.push_back("HEAD");
  for (auto o : others) m.allow += (m.allow.empty() ? "" : ", ") + std::string(o);
  return m;
}

const Authenticator* Core::auth_for(const Route& r) const {
  if (r.options.public_route) return nullptr;
  return r.options.auth ? r.options.auth.get() : opts.auth.get();
}

size_t Core::max_body(const Route& r) const {
  if (r.options.max_body_bytes) return *r.options.max_body_bytes;
  return r.method == "GET" || r.method == "HEAD" ? 0 : opts.limits.max_body_bytes;
}

bool Core::hold_body(size_t n) {
  const size_t cap = opts.limits.max_bodies_bytes;
  size_t held = bodies_held_.load();
  do {
    // A body larger than the whole budget (a route's own limit above it) is read alone: told
    // to retry for ever, it would never be.
    if (n > cap ? held > 0 : n > cap - std::min(held, cap)) return false;
  } while (!bodies_held_.compare_exchange_weak(held, held + n));
  return true;
}

void Core::let_go_body(size_t n) { bodies_held_.fetch_sub(n); }

void Core::log(const std::string& msg) const { opts.log(msg); }

bool Core::admit(const std::string& peer) {
  std::lock_guard<std::mutex> g(mu_);
  if (open_ >= opts.limits.max_connections && !evict_one(nullptr)) {
    ++counters.refused_total;
    return false;
  }
  if (auto it = per_peer_.find(peer); it != per_peer_.end() &&
                                      it->second >= opts.limits.max_connections_per_peer &&
                                      !evict_one(&peer)) {
    ++counters.refused_per_peer;
    return false;
  }
  ++per_peer_[peer];
  ++open_;
  ++counters.accepted;
  return true;
}

bool Core::evict_one(const std::string* peer) {
  std::shared_ptr<ConnectionBase> victim;
  std::tuple<int, int64_t, uint64_t> least;  // standing, waiting since, id (the older first)
  for (auto& [id, w] : live_) {
    auto c = w.lock();
    if (!c || !c->counted || (peer && c->peer != *peer)) continue;
    int st = c->standing;
    if (st == ConnectionBase::kBusy) continue;
    std::tuple<int, int64_t, uint64_t> rank{st, c->waiting_since_ns.load(), id};
    if (!victim || rank < least) {
      victim = std::move(c);
      least = rank;
    }
  }
  if (!victim || !victim->counted.exchange(false)) return false;
  give_back(victim->peer);
  ++counters.evicted;
  victim->evict();
  return true;
}

void Core::give_back(const std::string& peer) {
  if (auto it = per_peer_.find(peer); it != per_peer_.end() && --it->second == 0)
    per_peer_.erase(it);
  if (--open_ == 0) closed_cv_.notify_all();
}

void Core::release(ConnectionBase& c) {
  if (!c.counted.exchange(false)) return;
  std::lock_guard<std::mutex> g(mu_);
  give_back(c.peer);
}

void Core::track(const std::shared_ptr<ConnectionBase>& c, uint64_t& id) {
  std::lock_guard<std::mutex> g(mu_);
  id = next_id_++;
  live_[id] = c;
}

void Core::untrack(uint64_t id) {
  std::lock_guard<std::mutex> g(mu_);
  live_.erase(id);
}

std::vector<std::shared_ptr<ConnectionBase>> Core::live_connections() {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::shared_ptr<ConnectionBase>> out;
  for (auto& [id, w] : live_)
    if (auto c = w.lock()) out.push_back(std::move(c));
  return out;
}

size_t Core::open_connections() {
  std::lock_guard<std::mutex> g(mu_);
  return open_;
}

bool Core::wait_closed(std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> l(mu_);
  return closed_cv_.wait_until(l, until, [&] { return open_ == 0; });
}

std::string detail::peer_address(const tcp::endpoint& ep) {
  auto a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6()).to_string();
  return a.to_string();
}

// --- Server -----------------------------------------------------------------------------

struct Server::Impl {
  explicit Impl(ServerOptions o) : core(std::move(o)) {}

  void accept();
  void on_accept(boost::system::error_code ec, tcp::socket s);

  Core core;
  std::unique_ptr<net::io_context> ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> accept_retry;
  std::optional<net::ssl::context> ssl;
  std::vector<std::thread> io_threads;
  std::string address;
  uint16_t port = 0;
  bool loopback = true, wildcard = false, started = false, stopped = false;
  std::mutex stop_mu;
};

void Server::Impl::accept() {
  acceptor->async_accept(
      net::make_strand(*ioc),
      [this](boost::system::error_code ec, tcp::socket s) { on_accept(ec, std::move(s)); });
}

void Server::Impl::on_accept(boost::system::error_code ec, tcp::socket s) {
  if (core.stopping || !acceptor->is_open()) return;
  if (ec) {
    // Out of descriptors (EMFILE/ENFILE) or memory: the pending connection stays in the
    // backlog; try again shortly instead of spinning.
    if (ec != net::error::connection_aborted) {
      core.log("accept: " + ec.message());
      accept_retry->expires_after(std::chrono::milliseconds(100));
      accept_retry->async_wait([this](boost::system::error_code e) {
        if (!e && !core.stopping) accept();
      });
      return;
    }
    return accept();
  }
  close_on_exec(s.native_handle());
  boost::system::error_code e2;
  tcp::endpoint remote = s.remote_endpoint(e2);
  if (e2) return accept();  // already gone
  std::string peer = peer_address(remote);
  if (!core.admit(peer)) {
    if (!core.tls) {
      s.non_blocking(true, e2);
      s.send(net::buffer(kRefused.data(), kRefused.size()), 0, e2);
    }
    s.close(e2);
    return accept();
  }
  s.set_option(tcp::no_delay(true), e2);
  start_connection(core, std::move(s), ssl ? &*ssl : nullptr, peer, remote.port());
  accept();
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { stop(); }

void Server::route(std::string method, std::string path, Handler handler, RouteOptions options) {
  if (impl_->started) throw std::logic_error("http: route() after start()");
  Route r;
  r.method = std::move(method);
  if (path.size() >= 2 && path.compare(path.size() - 2, 2, "/*") == 0) {
    r.prefix = true;
    path.pop_back();
  }
  r.path = std::move(path);
  r.handler = std::move(handler);
  r.options = std::move(options);
  impl_->core.routes.push_back(std::move(r));
}

Status Server::start() {
  auto& im = *impl_;
  if (im.started) return make_error("http: start() called twice");
  auto& o = im.core.opts;
  auto la = parse_listen_address(o.listen);
  if (!la) return la.error();
  if (o.workers == 0 || o.io_threads == 0) return make_error("http: workers and io_threads >= 1");
  // Room for the connections the caps allow beside the files the process holds: the soft limit
  // of open files is raised toward the hard one (systemd gives a service 1,024), where accepts
  // failed (EMFILE) below the caps.
  if (rlimit r{}; getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    const rlim_t want = rlim_t(o.limits.max_connections) + 256;
    if (r.rlim_cur < want) {
      r.rlim_cur = r.rlim_max == RLIM_INFINITY ? want : std::min(want, r.rlim_max);
      (void)setrlimit(RLIMIT_NOFILE, &r);
    }
  }
  if (o.tls) {
    auto ctx = make_tls_context(*o.tls);
    if (!ctx) return ctx.error();
    im.ssl.emplace(ctx->release());
    im.core.tls = true;
  }
  im.ioc = std::make_unique<net::io_context>(int(o.io_threads));
  boost::system::error_code ec;
  tcp::resolver resolver(*im.ioc);
  auto results = resolver.resolve(la->host, std::to_string(la->port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) return make_error("cannot resolve '" + la->host + "': " + ec.message());
  std::string err = "no address";
  for (const auto& entry : results) {
    tcp::acceptor a(net::make_strand(*im.ioc));
    auto ep = entry.endpoint();
    a.open(ep.protocol(), ec);
    // Asio opens sockets without close-on-exec: a command the tracer runs would hold the
    // port, and leave it unanswered, after the tracer ends.
    if (!ec) close_on_exec(a.native_handle());
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      err = ec.message();
      continue;
    }
    im.acceptor.emplace(std::move(a));
    break;
  }
  if (!im.acceptor) return make_error("cannot listen on " + o.listen + ": " + err);
  auto local = im.acceptor->local_endpoint();
  im.port = local.port();
  im.address = local.address().to_string();
  im.wildcard = local.address().is_unspecified();
  im.loopback = local.address().is_loopback();
  im.core.hosts.emplace(o.hosts, im.address, im.wildcard);
  auto at_nice = [](std::optional<int> n) -> std::function<void()> {
    if (!n) return {};
    return [n] { (void)setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), *n); };
  };
  im.core.pool = std::make_unique<WorkerPool>(o.workers, o.max_queued, at_nice(o.nice));
  im.core.slow_auth = std::make_unique<WorkerPool>(1, o.max_queued_slow_auth, at_nice(19));
  im.accept_retry.emplace(im.acceptor->get_executor());
  im.work.emplace(im.ioc->get_executor());
  im.started = true;
  im.accept();
  for (size_t i = 0; i < o.io_threads; ++i)
    im.io_threads.emplace_back([&im, start = at_nice(o.nice)] {
      if (start) start();
      im.ioc->run();
    });
  return {};
}

uint16_t Server::port() const { return impl_->port; }
const std::string& Server::address() const { return impl_->address; }
bool Server::loopback_only() const { return impl_->loopback; }

std::string Server::url(std::string_view path) const {
  std::string host = impl_->wildcard ? "127.0.0.1" : url_host(impl_->address);
  return std::string(impl_->core.tls ? "https" : "http") + "://" + host + ":" +
         std::to_string(impl_->port) + std::string(path);
}

Stats Server::stats() const {
  auto& c = impl_->core.counters;
  Stats s;
  s.connections_accepted = c.accepted;
  s.connections_open = impl_->core.open_connections();
  s.refused_per_peer = c.refused_per_peer;
  s.refused_total = c.refused_total;
  s.evicted = c.evicted;
  s.requests = c.requests;
  s.timeouts = c.timeouts;
  s.bad_requests = c.bad_requests;
  s.forbidden = c.forbidden;
  s.unauthorized = c.unauthorized;
  s.too_large = c.too_large;
  s.busy = c.busy;
  s.handler_errors = c.handler_errors;
  s.body_bytes = c.body_bytes;
  s.bodies_held_bytes = impl_->core.bodies_held();
  if (impl_->core.pool) {
    s.workers_busy = impl_->core.pool->busy();
    s.queued = impl_->core.pool->queued();
  }
  return s;
}

void Server::stop(std::chrono::milliseconds grace) {
  auto& im = *impl_;
  std::lock_guard<std::mutex> g(im.stop_mu);
  if (!im.started || im.stopped) return;
  im.stopped = true;
  auto& core = im.core;
  core.stopping = true;
  net::post(im.acceptor->get_executor(), [&im] {
    boost::system::error_code ec;
    im.acceptor->close(ec);
    im.accept_retry->cancel();
  });
  for (auto& c : core.live_connections()) c->stop_gracefully();
  bool closed = core.wait_closed(std::chrono::steady_clock::now() + grace);
  // Handlers still running finish; their responses find closed connections. Those still
  // queued would answer no one: they are dropped (8 queued MCP queries ran for 8 s after their
  // clients had been disconnected, and held the exit). A worker that finishes between the
  // connections' close and the drop takes the next request: it sees `dropping` and runs none.
  core.dropping = true;
  if (!closed)
    for (auto& c : core.live_connections()) c->stop_now();
  core.pool->drop_queued();
  core.slow_auth->drop_queued();
  core.pool->stop();
  core.slow_auth->stop();
  core.wait_closed(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  {
    std::lock_guard<std::mutex> gg(core.gate->mu);
    core.gate->open = false;
  }
  im.work.reset();
  im.ioc->stop();
  for (auto& t : im.io_threads) t.join();
  im.io_threads.clear();
  // Destroys the handlers still queued, and with them the connections they hold.
  im.acceptor.reset();
  im.accept_retry.reset();
  im.ioc.reset();
}

}  // namespace ingero::serve::http

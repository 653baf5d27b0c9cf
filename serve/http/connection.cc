// One connection's life, as a state machine on its strand (Beast parser and serializer; the
// socket is plain TCP or TLS). No state ever waits on a thread: a slow client leaves a pending
// read and a timer behind, nothing more.
//
//   handshake (TLS) -> idle -> reading (head, checks, body) -> handling -> writing -> idle ...
//                                   \-> authorizing (a slow Authenticator on a worker)
//                                   handling -> streaming (chunks from a Stream) -> idle ...
//   any state -> closing (shutdown; a bounded drain of unread input) -> closed
#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http.hpp>
#include <limits>

#include "serve/http/beast_messages.h"
#include "serve/http/request_checks.h"
#include "serve/http/server_core.h"
#include "serve/http/stream_link.h"

namespace ingero::serve::http::detail {

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using error_code = boost::system::error_code;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// After a refused request the client may still be sending its body: read and drop at most
// this much, for at most this long, before closing, so that the close does not turn into a
// reset that destroys the response in flight.
constexpr size_t kMaxDrainBytes = 256 << 10;
constexpr auto kLinger = std::chrono::seconds(2);
constexpr size_t kMaxChunkBytes = 256 << 10;

template <class S>
constexpr bool kIsTls = !std::is_same_v<S, tcp::socket>;

template <class S>
class Connection final : public ConnectionBase, public std::enable_shared_from_this<Connection<S>> {
 public:
  Connection(Core& core, S stream, std::string peer, uint16_t port)
      : ConnectionBase(peer),
        core_(core),
        limits_(core.opts.limits),
        stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        buffer_(limits_.max_header_bytes + 4096),
        peer_(std::move(peer)),
        peer_port_(port) {}

  ~Connection() override {
    if (body_stream_) StreamLink::end(*body_stream_);
    release();
  }

  void start() {
    wait_from_now(kNothing);
    core_.track(this->shared_from_this(), id_);
    if (core_.stopping) return close_now();
    if constexpr (kIsTls<S>) {
      state_ = State::handshake;
      arm(limits_.request_timeout);
      stream_.async_handshake(net::ssl::stream_base::server, [self = self()](error_code ec) {
        if (self->state_ != State::handshake) return;
        if (ec) return self->close_now();  // not TLS, a failed handshake: nothing to answer
        self->disarm();
        self->wait_request();
      });
    } else {
      wait_request();
    }
  }

  void stop_gracefully() override {
    net::post(stream_.get_executor(), [self = self()] {
      self->stop_requested_ = true;
      switch (self->state_) {
        case State::handling:
        case State::writing:
          break;  // the response goes out with Connection: close
        case State::streaming:
          if (self->body_stream_) self->body_stream_->close();  // flush, last chunk, close
          break;
        default:
          self->close_now();
      }
    });
  }

  void stop_now() override {
    net::post(stream_.get_executor(), [self = self()] { self->close_now(); });
  }

  void evict() override {
    net::post(stream_.get_executor(), [self = self()] {
      switch (self->state_) {
        case State::handshake:
        case State::idle:
          return self->close_now();
        case State::reading:
          if (!self->head_done_) return self->close_now();
          break;
        default:
          break;
      }
      self->stop_requested_ = true;  // the request in progress is answered, then it closes
    });
  }

  auto executor() { return stream_.get_executor(); }

 private:
  enum class State {
    handshake,
    idle,
    reading,
    authorizing,
    handling,
    writing,
    streaming,
    closing,
    closed
  };

  std::shared_ptr<Connection> self() { return this->shared_from_this(); }

  // What Core::admit reads: from now on the connection waits, having shown `standing`.
  void wait_from_now(int standing_now) {
    waiting_since_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    standing = standing_now;
  }
  auto& socket() { return beast::get_lowest_layer(stream_); }

  // --- deadlines ---------------------------------------------------------------------

  void arm(std::chrono::milliseconds d) {
    ++gen_;
    timer_.expires_after(d);
    timer_.async_wait([self = self(), g = gen_](error_code ec) {
      if (!ec && g == self->gen_) self->on_deadline();
    });
  }

  void disarm() {
    ++gen_;
    timer_.cancel();
  }

  void on_deadline() {
    switch (state_) {
      case State::reading:  // the pending read completes with operation_aborted
        timed_out_ = true;
        socket().cancel();
        return;
      case State::authorizing:
        return on_timeout();
      case State::closed:
        return;
      default:  // idle, handshake, a reader too slow for our response, the end of a drain
        return close_now();
    }
  }

  void on_timeout() {
    ++core_.counters.timeouts;
    reject(Response::text(408, "the request was not received within " +
                                   std::to_string(limits_.request_timeout.count()) + " ms"));
  }

  // --- reading a request -----------------------------------------------------------------

  void wait_request() {
    if (stop_requested_ || core_.stopping) return close_gracefully();
    parser_.reset();
    route_ = nullptr;
    auth_ = nullptr;
    if (buffer_.size() > 0) return read_header();  // pipelined
    state_ = State::idle;
    wait_from_now(proven_);
    // A connection that never made a request has request_timeout to start one, not the
    // idle_timeout of a kept-alive one: idle sockets are not held for long.
    arm(proven_ == kNothing ? std::min(limits_.idle_timeout, limits_.request_timeout)
                            : limits_.idle_timeout);
    size_t room = std::min<size_t>(4096, buffer_.max_size() - buffer_.size());
    stream_.async_read_some(buffer_.prepare(room), [self = self()](error_code ec, size_t n) {
      if (self->state_ != State::idle) return;
      self->buffer_.commit(n);
      if (ec) return self->close_now();
      self->read_header();
    });
  }

  void read_header() {
    state_ = State::reading;
    head_done_ = false;
    // The head of a first request may still be a dribble; a known client's is a request.
    if (proven_ != kNothing) standing = kBusy;
    timed_out_ = false;
    version_ = 11;
    parser_.emplace();
    parser_->header_limit(uint32_t(limits_.max_header_bytes));
    // Set per route once the head is checked. (Not boost::none: Beast 1.74 compares the
    // Content-Length with an empty optional and reports body_limit.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    // One deadline for the head and the body together, however the bytes trickle in.
    arm(limits_.request_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_, [self = self()](error_code ec, size_t n) {
      if (self->state_ != State::reading) return;
      if (ec) return self->on_read_error(ec);
      // Beast bounds the request line and the fields each by header_limit (and the buffer
      // holds a little more): the head as a whole is bounded here, to the byte.
      if (n > self->limits_.max_header_bytes)
        return self->on_read_error(bhttp::error::header_limit);
      self->on_header();
    });
  }

  void on_read_error(error_code ec) {
    if (state_ == State::closed) return;
    if (timed_out_) return on_timeout();
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      ++core_.counters.too_large;
      return reject(Response::text(
          431, "the request head exceeds " + std::to_string(limits_.max_header_bytes) + " bytes"));
    }
    if (ec == bhttp::error::body_limit) {
      ++core_.counters.too_large;
      return reject(
          Response::text(413, "the body exceeds " + std::to_string(max_body_) + " bytes"));
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec.category() != bhttp::make_error_code(bhttp::error::bad_target).category())
      return close_now();  // the client left, or the network failed: nobody to answer
    ++core_.counters.bad_requests;
    reject(Response::text(400, "malformed request: " + ec.message()));
  }

  void on_header() {
    head_done_ = true;
    standing = kBusy;
    req_ = request_head(parser_->get());
    version_ = req_.version;
    req_.peer = peer_;
    req_.peer_port = peer_port_;
    req_.tls = kIsTls<S>;

    HeadCheck c = check_head(core_, req_, parser_->chunked());
    if (c.refuse) return reject(std::move(*c.refuse));
    route_ = c.route;
    auth_ = c.auth;
    if (!auth_) return after_auth({true, ""});
    if (auth_->quick(req_)) return after_auth(auth_->check(req_));
    // A slow check (bcrypt) runs on a worker; the request deadline keeps running.
    state_ = State::authorizing;
    bool queued = core_.pool->try_submit([self = self(), a = auth_, head = req_] {
      AuthDecision d;
      try {
        d = a->check(head);
      } catch (const std::exception& e) {
        self->core_.log(std::string("authenticator: ") + e.what());
      }
      net::post(self->executor(), [self, d] {
        if (self->state_ == State::authorizing) self->after_auth(d);
      });
    });
    if (!queued) {
      ++core_.counters.busy;
      auto r = Response::text(503, "busy, retry");
      r.headers.add("Retry-After", "1");
      reject(std::move(r));
    }
  }

  void after_auth(const AuthDecision& d) {
    state_ = State::reading;
    auto cl = parser_->content_length();
    auto refuse = check_admission(core_, *route_, auth_, d,
                                  cl ? std::optional<uint64_t>(*cl) : std::nullopt, req_);
    if (refuse) return reject(std::move(*refuse));
    req_.principal = d.principal;
    max_body_ = core_.max_body(*route_);
    parser_->body_limit(max_body_);
    if (parser_->is_done()) return dispatch();
    if (req_.headers.has("expect") && version_ >= 11) {  // 100-continue: send the body now
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = self()](error_code ec, size_t) {
                         if (self->state_ != State::reading) return;
                         if (ec) return self->on_read_error(ec);
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    bhttp::async_read(stream_, buffer_, *parser_, [self = self()](error_code ec, size_t) {
      if (self->state_ != State::reading) return;
      if (ec) return self->on_read_error(ec);
      self->req_.body = std::move(self->parser_->get().body());
      self->core_.counters.body_bytes += self->req_.body.size();
      self->dispatch();
    });
  }

  // --- running the handler ---------------------------------------------------------------

  Response invoke() {
    try {
      return route_->handler(req_);
    } catch (const std::exception& e) {
      ++core_.counters.handler_errors;
      core_.log(req_.method + " " + req_.path + ": " + e.what());
    } catch (...) {
      ++core_.counters.handler_errors;
      core_.log(req_.method + " " + req_.path + ": unknown exception");
    }
    return Response::text(500, "internal error");
  }

  void dispatch() {
    disarm();  // no deadline while the handler runs
    proven_ = std::max(proven_, auth_ ? int(kAuthenticated) : int(kServed));
    keep_alive_ = parser_->keep_alive();
    state_ = State::handling;
    ++core_.counters.requests;
    if (route_->options.run_on == RunOn::io_thread) return send(invoke());
    // The strand leaves req_ and route_ alone while the state is `handling`.
    bool queued = core_.pool->try_submit([self = self()] {
      Response r = self->invoke();
      net::post(self->executor(), [self, r = std::move(r)]() mutable { self->send(std::move(r)); });
    });
    if (!queued) {
      --core_.counters.requests;
      ++core_.counters.busy;
      auto r = Response::text(503, "busy, retry");
      r.headers.add("Retry-After", "1");
      send(std::move(r));
    }
  }

  // --- writing the response --------------------------------------------------------------

  void add_headers(bhttp::fields& f, const Headers& h) {
    response_fields(f, h, core_.opts.response_headers, [&](const std::string& name) {
      core_.log("dropped an invalid response header '" + name + "' (" + req_.path + ")");
    });
  }

  // Answers a request whose body was not (completely) read, then closes.
  void reject(Response r) {
    r.close = true;
    state_ = State::handling;
    send(std::move(r));
  }

  void send(Response r) {
    if (state_ == State::closed) {
      if (r.stream) StreamLink::end(*r.stream);
      return;
    }
    if (r.close || stop_requested_ || core_.stopping) keep_alive_ = false;
    if (r.stream) return start_stream(std::move(r));
    res_.emplace(static_cast<bhttp::status>(r.status), version_);
    res_->reason(std::string(reason_phrase(r.status)));
    add_headers(*res_, r.headers);
    res_->body() = std::move(r.body);
    res_->keep_alive(keep_alive_);
    res_->prepare_payload();
    state_ = State::writing;
    arm(limits_.write_timeout);
    bhttp::async_write(stream_, *res_, [self = self()](error_code ec, size_t) {
      if (self->state_ != State::writing) return;
      self->disarm();
      self->res_.reset();
      if (ec) return self->close_now();
      if (!self->keep_alive_) return self->close_gracefully();
      self->wait_request();
    });
  }

  void start_stream(Response r) {
    body_stream_ = std::move(r.stream);
    http10_ = version_ < 11;
    if (http10_) keep_alive_ = false;  // the body ends when the connection does
    shead_.emplace(static_cast<bhttp::status>(r.status), version_);
    shead_->reason(std::string(reason_phrase(r.status)));
    add_headers(*shead_, r.headers);
    if (!http10_) shead_->chunked(true);
    shead_->keep_alive(keep_alive_);
    sser_.emplace(*shead_);
    state_ = State::streaming;
    writing_ = true;
    arm(limits_.write_timeout);
    bhttp::async_write_header(stream_, *sser_, [self = self()](error_code ec, size_t) {
      if (self->state_ != State::streaming) return;
      self->writing_ = false;
      self->disarm();
      if (ec) return self->close_now();
      std::weak_ptr<Connection> weak = self;
      StreamLink::attach(*self->body_stream_, self->limits_.max_stream_buffer,
                         self->limits_.write_timeout, [weak, gate = self->core_.gate] {
                           std::lock_guard<std::mutex> g(gate->mu);
                           if (!gate->open) return;
                           if (auto c = weak.lock())
                             net::post(c->executor(), [weak] {
                               if (auto c2 = weak.lock()) c2->pump();
                             });
                         });
      self->pump();
    });
  }

  void pump() {
    if (state_ != State::streaming || writing_ || !body_stream_) return;
    if (StreamLink::ended(*body_stream_)) return close_now();  // a writer gave up on us
    chunk_.clear();
    bool done = StreamLink::take(*body_stream_, chunk_, kMaxChunkBytes);
    if (chunk_.empty() && !done) {
      // Nothing to send until the producer writes: a wait without end is what keeps this
      // connection alive meanwhile (the Stream holds only a weak reference to it).
      ++gen_;
      timer_.expires_at(net::steady_timer::time_point::max());
      timer_.async_wait([self = self()](error_code) {});
      return;
    }
    writing_ = true;
    arm(limits_.write_timeout);
    bool last = done && chunk_.empty();
    auto on_written = [self = self(), last](error_code ec, size_t) {
      self->on_chunk_written(ec, last);
    };
    if (http10_) {
      if (last) return on_chunk_written({}, true);
      net::async_write(stream_, net::buffer(chunk_), std::move(on_written));
    } else if (last) {
      net::async_write(stream_, bhttp::make_chunk_last(), std::move(on_written));
    } else {
      net::async_write(stream_, bhttp::make_chunk(net::buffer(chunk_)), std::move(on_written));
    }
  }

  void on_chunk_written(error_code ec, bool last) {
    if (state_ != State::streaming) return;
    writing_ = false;
    disarm();
    if (ec) return close_now();
    if (!last) return pump();
    auto s = std::move(body_stream_);
    StreamLink::end(*s);
    sser_.reset();
    shead_.reset();
    if (!keep_alive_) return close_gracefully();
    wait_request();
  }

  // --- closing ---------------------------------------------------------------------------

  void close_gracefully() {
    if (state_ == State::closed || state_ == State::closing) return;
    state_ = State::closing;
    arm(kLinger);
    if constexpr (kIsTls<S>) {
      stream_.async_shutdown([self = self()](error_code) { self->close_now(); });
    } else {
      error_code ec;
      socket().shutdown(tcp::socket::shutdown_send, ec);
      if (ec) return close_now();
      buffer_.consume(buffer_.size());
      drain();
    }
  }

  void drain() {
    stream_.async_read_some(buffer_.prepare(buffer_.max_size()),
                            [self = self()](error_code ec, size_t n) {
                              if (self->state_ != State::closing) return;
                              self->drained_ += n;
                              if (ec || self->drained_ >= kMaxDrainBytes) return self->close_now();
                              self->drain();
                            });
  }

  void close_now() {
    if (state_ == State::closed) return;
    state_ = State::closed;
    standing = kBusy;
    ++gen_;
    timer_.cancel();
    error_code ec;
    socket().close(ec);
    if (body_stream_) {
      auto s = std::move(body_stream_);
      StreamLink::end(*s);
    }
    release();
  }

  void release() {
    if (released_) return;
    released_ = true;
    core_.release(*this);
    if (id_) core_.untrack(id_);
  }

  Core& core_;
  const Limits& limits_;
  S stream_;
  net::steady_timer timer_;
  uint64_t gen_ = 0;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::response<bhttp::string_body>> res_;
  std::optional<bhttp::response<bhttp::empty_body>> shead_;
  std::optional<bhttp::response_serializer<bhttp::empty_body>> sser_;
  std::shared_ptr<Stream> body_stream_;
  std::string chunk_;
  Request req_;
  const Route* route_ = nullptr;
  const Authenticator* auth_ = nullptr;
  size_t max_body_ = 0;
  std::string peer_;
  uint16_t peer_port_;
  uint64_t id_ = 0;
  size_t drained_ = 0;
  int version_ = 11;
  int proven_ = kNothing;  // the most a request of this connection has shown (Standing)
  State state_ = State::idle;
  bool keep_alive_ = true, stop_requested_ = false, timed_out_ = false, writing_ = false,
       http10_ = false, released_ = false, head_done_ = false;
};

}  // namespace

void start_connection(Core& core, tcp::socket socket, net::ssl::context* ssl, std::string peer,
                      uint16_t peer_port) {
  if (ssl) {
    using Tls = net::ssl::stream<tcp::socket>;
    auto c = std::make_shared<Connection<Tls>>(core, Tls(std::move(socket), *ssl), std::move(peer),
                                               peer_port);
    net::dispatch(c->executor(), [c] { c->start(); });
  } else {
    auto c = std::make_shared<Connection<tcp::socket>>(core, std::move(socket), std::move(peer),
                                                       peer_port);
    net::dispatch(c->executor(), [c] { c->start(); });
  }
}

}  // namespace ingero::serve::http::detail

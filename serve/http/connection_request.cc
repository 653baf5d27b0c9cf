// A connection reads a request: the wait for it, its head and the checks on it, the
// authentication (on a worker when slow), 100-continue, and its body, up to the handler.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <limits>

#include "serve/http/beast_messages.h"
#include "serve/http/connection.h"
#include "serve/http/request_checks.h"

namespace ingero::serve::http::detail {

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

template <class S>
void Connection<S>::wait_request() {
  if (stop_requested_ || core_.stopping) return close_gracefully();
  parser_.reset();
  let_go_body();
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

template <class S>
void Connection<S>::read_header() {
  state_ = State::reading;
  head_done_ = false;
  // A head still arriving, first request or not, may be a dribble: until it is in, the
  // connection is among the first to make room (Core::admit), as one that has shown nothing.
  // A kept-alive client that sent one request and then dribbled the next head was counted
  // busy, never closed for room: 32 of them held the per-address cap, and every other local
  // client met 503. A head that comes whole is in at once.
  standing = kNothing;
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
    if (n > self->limits_.max_header_bytes) return self->on_read_error(bhttp::error::header_limit);
    self->on_header();
  });
}

template <class S>
void Connection<S>::on_read_error(error_code ec) {
  if (state_ == State::closed) return;
  req_.method.clear();  // the request before this one's: a HEAD's would drop this answer's body
  if (timed_out_) return on_timeout();
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    ++core_.counters.too_large;
    return reject(Response::text(
        431, "the request head exceeds " + std::to_string(limits_.max_header_bytes) + " bytes"));
  }
  if (ec == bhttp::error::body_limit) {
    ++core_.counters.too_large;
    return reject(Response::text(413, "the body exceeds " + std::to_string(max_body_) + " bytes"));
  }
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec.category() != bhttp::make_error_code(bhttp::error::bad_target).category())
    return close_now();  // the client left, or the network failed: nobody to answer
  ++core_.counters.bad_requests;
  reject(Response::text(400, "malformed request: " + ec.message()));
}

template <class S>
void Connection<S>::on_header() {
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
  // A slow check (bcrypt) runs on the slow-check thread (ServerOptions::max_queued_slow_auth);
  // the request deadline keeps running.
  state_ = State::authorizing;
  bool queued = core_.slow_auth->try_submit([self = self(), a = auth_, head = req_] {
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

template <class S>
void Connection<S>::after_auth(const AuthDecision& d) {
  state_ = State::reading;
  auto cl = parser_->content_length();
  auto refuse = check_admission(core_, *route_, auth_, d,
                                cl ? std::optional<uint64_t>(*cl) : std::nullopt, req_);
  if (refuse) return reject(std::move(*refuse));
  req_.principal = d.principal;
  max_body_ = core_.max_body(*route_);
  parser_->body_limit(max_body_);
  if (parser_->is_done()) return dispatch();
  // The body's bytes are held until the request is done: a chunked one's limit at once.
  size_t body = cl ? size_t(*cl) : max_body_;
  if (body && !core_.hold_body(body)) {
    ++core_.counters.busy;
    auto r =
        Response::text(503, "busy, retry: the server holds as many request bodies as it takes");
    r.headers.add("Retry-After", "1");
    return reject(std::move(r));
  }
  body_held_ = body;
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

template <class S>
void Connection<S>::read_body() {
  bhttp::async_read(stream_, buffer_, *parser_, [self = self()](error_code ec, size_t) {
    if (self->state_ != State::reading) return;
    if (ec) return self->on_read_error(ec);
    self->req_.body = std::move(self->parser_->get().body());
    self->core_.counters.body_bytes += self->req_.body.size();
    self->dispatch();
  });
}

// This file's members, for both sockets: the other files of the connection call them.
template void Connection<tcp::socket>::wait_request();
template void Connection<tcp::socket>::read_header();
template void Connection<tcp::socket>::on_read_error(error_code);
template void Connection<tcp::socket>::on_header();
template void Connection<tcp::socket>::after_auth(const AuthDecision&);
template void Connection<tcp::socket>::read_body();
template void Connection<net::ssl::stream<tcp::socket>>::wait_request();
template void Connection<net::ssl::stream<tcp::socket>>::read_header();
template void Connection<net::ssl::stream<tcp::socket>>::on_read_error(error_code);
template void Connection<net::ssl::stream<tcp::socket>>::on_header();
template void Connection<net::ssl::stream<tcp::socket>>::after_auth(const AuthDecision&);
template void Connection<net::ssl::stream<tcp::socket>>::read_body();

}  // namespace ingero::serve::http::detail

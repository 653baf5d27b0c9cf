// One connection's life: its start, the stops the server asks for, its deadlines, and its
// close. Reading a request is in connection_request.cc, answering it in connection_response.cc.
#include "serve/http/connection.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

namespace ingero::serve::http::detail {

namespace {

// After a refused request the client may still be sending its body: read and drop at most
// this much, for at most this long, before closing, so that the close does not turn into a
// reset that destroys the response in flight.
constexpr size_t kMaxDrainBytes = 256 << 10;
constexpr auto kLinger = std::chrono::seconds(2);

}  // namespace

template <class S>
void Connection<S>::start() {
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

template <class S>
void Connection<S>::stop_gracefully() {
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

template <class S>
void Connection<S>::stop_now() {
  net::post(stream_.get_executor(), [self = self()] { self->close_now(); });
}

template <class S>
void Connection<S>::evict() {
  net::post(stream_.get_executor(), [self = self()] {
    switch (self->state_) {
      case State::handshake:
      case State::idle:
        return self->close_now();
      case State::reading:
        if (!self->head_done_) return self->close_now();
        break;
      case State::closing:  // answered already: only draining what the client still sends
        return self->close_now();
      default:
        break;
    }
    self->stop_requested_ = true;  // the request in progress is answered, then it closes
  });
}

// --- deadlines ---------------------------------------------------------------------

template <class S>
void Connection<S>::arm(std::chrono::milliseconds d) {
  ++gen_;
  timer_.expires_after(d);
  timer_.async_wait([self = self(), g = gen_](error_code ec) {
    if (!ec && g == self->gen_) self->on_deadline();
  });
}

template <class S>
void Connection<S>::disarm() {
  ++gen_;
  timer_.cancel();
}

template <class S>
void Connection<S>::on_deadline() {
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

template <class S>
void Connection<S>::on_timeout() {
  ++core_.counters.timeouts;
  reject(Response::text(408, "the request was not received within " +
                                 std::to_string(limits_.request_timeout.count()) + " ms"));
}

// --- closing ---------------------------------------------------------------------------

template <class S>
void Connection<S>::close_gracefully() {
  if (state_ == State::closed || state_ == State::closing) return;
  state_ = State::closing;
  // Its answer is sent; it lingers only so that what the client still sends is not met with a
  // reset. The first to make room: 130 refused requests without a token, lingering, held the
  // per-address cap, and the token holder met 503 for as long as they were sent again.
  wait_from_now(kNothing);
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

template <class S>
void Connection<S>::drain() {
  stream_.async_read_some(buffer_.prepare(buffer_.max_size()),
                          [self = self()](error_code ec, size_t n) {
                            if (self->state_ != State::closing) return;
                            self->drained_ += n;
                            if (ec || self->drained_ >= kMaxDrainBytes) return self->close_now();
                            self->drain();
                          });
}

template <class S>
void Connection<S>::close_now() {
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

// Not in release(): a handler on a worker may still read the body of a connection closed
// meanwhile; the bytes go with the connection (its destructor) or at its next request.
template <class S>
void Connection<S>::let_go_body() {
  req_.body = std::string();
  if (body_held_) core_.let_go_body(body_held_);
  body_held_ = 0;
}

template <class S>
void Connection<S>::release() {
  if (released_) return;
  released_ = true;
  core_.release(*this);
  if (id_) core_.untrack(id_);
}

// This file's members, for both sockets: the other files of the connection call them.
template void Connection<tcp::socket>::start();
template void Connection<tcp::socket>::stop_gracefully();
template void Connection<tcp::socket>::stop_now();
template void Connection<tcp::socket>::evict();
template void Connection<tcp::socket>::arm(std::chrono::milliseconds);
template void Connection<tcp::socket>::disarm();
template void Connection<tcp::socket>::on_deadline();
template void Connection<tcp::socket>::on_timeout();
template void Connection<tcp::socket>::close_gracefully();
template void Connection<tcp::socket>::drain();
template void Connection<tcp::socket>::close_now();
template void Connection<tcp::socket>::release();
template void Connection<tcp::socket>::let_go_body();
template void Connection<net::ssl::stream<tcp::socket>>::start();
template void Connection<net::ssl::stream<tcp::socket>>::stop_gracefully();
template void Connection<net::ssl::stream<tcp::socket>>::stop_now();
template void Connection<net::ssl::stream<tcp::socket>>::evict();
template void Connection<net::ssl::stream<tcp::socket>>::arm(std::chrono::milliseconds);
template void Connection<net::ssl::stream<tcp::socket>>::disarm();
template void Connection<net::ssl::stream<tcp::socket>>::on_deadline();
template void Connection<net::ssl::stream<tcp::socket>>::on_timeout();
template void Connection<net::ssl::stream<tcp::socket>>::close_gracefully();
template void Connection<net::ssl::stream<tcp::socket>>::drain();
template void Connection<net::ssl::stream<tcp::socket>>::close_now();
template void Connection<net::ssl::stream<tcp::socket>>::release();
template void Connection<net::ssl::stream<tcp::socket>>::let_go_body();

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

// A connection answers a request: the handler run (on the I/O thread or a worker), then its
// response written whole, or streamed in chunks from a Stream (HTTP/1.0: until the close).
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>

#include "serve/http/beast_messages.h"
#include "serve/http/connection.h"

namespace ingero::serve::http::detail {

namespace {

constexpr size_t kMaxChunkBytes = 256 << 10;

}  // namespace

// --- running the handler ---------------------------------------------------------------

template <class S>
Response Connection<S>::invoke() {
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

template <class S>
void Connection<S>::dispatch() {
  disarm();  // no deadline while the handler runs
  proven_ = std::max(proven_, auth_ ? int(kAuthenticated) : int(kServed));
  keep_alive_ = parser_->keep_alive();
  state_ = State::handling;
  ++core_.counters.requests;
  if (route_->options.run_on == RunOn::io_thread ||
      (route_->options.io_thread_if && route_->options.io_thread_if(req_)))
    return send(invoke());
  req_.client = std::make_shared<ClientWatch>();
  watch_client();
  // The strand leaves req_ and route_ alone while the state is `handling`.
  bool queued = core_.pool->try_submit([self = self()] {
    if (self->core_.dropping) return self->stop_now();  // the server stopped: answers no one
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

// While a worker has the request: readable with nothing to read is the end of the connection.
// Bytes (a pipelined request, a TLS record) end the watch: nothing more can be told.
template <class S>
void Connection<S>::watch_client() {
  socket().async_wait(tcp::socket::wait_read, [self = self(), w = req_.client](error_code ec) {
    if (ec || self->state_ != State::handling || self->req_.client != w) return;
    char c;
    ssize_t n = ::recv(self->socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      self->req_.client->set_gone();
    else if (n < 0)
      self->watch_client();  // woken for nothing
  });
}

// --- writing the response --------------------------------------------------------------

template <class S>
void Connection<S>::add_headers(bhttp::fields& f, const Headers& h) {
  response_fields(f, h, core_.opts.response_headers, [&](const std::string& name) {
    core_.log("dropped an invalid response header '" + name + "' (" + req_.path + ")");
  });
}

template <class S>
void Connection<S>::reject(Response r) {
  r.close = true;
  state_ = State::handling;
  send(std::move(r));
}

template <class S>
void Connection<S>::send(Response r) {
  if (state_ == State::closed) {
    if (r.stream) StreamLink::end(*r.stream);
    return;
  }
  if (r.close || stop_requested_ || core_.stopping) keep_alive_ = false;
  const bool head = req_.method == "HEAD";
  const bool streamed = head && r.stream;
  if (streamed) {  // a stream's length is not known: its head, then the connection ends
    StreamLink::end(*r.stream);
    r.stream.reset();
    keep_alive_ = false;
  }
  if (r.stream) return start_stream(std::move(r));
  res_.emplace(static_cast<bhttp::status>(r.status), version_);
  res_->reason(std::string(reason_phrase(r.status)));
  add_headers(*res_, r.headers);
  res_->body() = std::move(r.body);
  res_->keep_alive(keep_alive_);
  res_->prepare_payload();
  if (head) {  // the GET's Content-Length, without its body; a stream's has none
    const size_t length = res_->body().size();
    res_->body().clear();
    if (streamed)
      res_->erase(bhttp::field::content_length);
    else
      res_->content_length(length);
  }
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

template <class S>
void Connection<S>::start_stream(Response r) {
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

template <class S>
void Connection<S>::pump() {
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

template <class S>
void Connection<S>::on_chunk_written(error_code ec, bool last) {
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

// This file's members, for both sockets: the other files of the connection call them.
template Response Connection<tcp::socket>::invoke();
template void Connection<tcp::socket>::dispatch();
template void Connection<tcp::socket>::watch_client();
template void Connection<tcp::socket>::add_headers(bhttp::fields&, const Headers&);
template void Connection<tcp::socket>::reject(Response);
template void Connection<tcp::socket>::send(Response);
template void Connection<tcp::socket>::start_stream(Response);
template void Connection<tcp::socket>::pump();
template void Connection<tcp::socket>::on_chunk_written(error_code, bool);
template Response Connection<net::ssl::stream<tcp::socket>>::invoke();
template void Connection<net::ssl::stream<tcp::socket>>::dispatch();
template void Connection<net::ssl::stream<tcp::socket>>::watch_client();
template void Connection<net::ssl::stream<tcp::socket>>::add_headers(bhttp::fields&,
                                                                     const Headers&);
template void Connection<net::ssl::stream<tcp::socket>>::reject(Response);
template void Connection<net::ssl::stream<tcp::socket>>::send(Response);
template void Connection<net::ssl::stream<tcp::socket>>::start_stream(Response);
template void Connection<net::ssl::stream<tcp::socket>>::pump();
template void Connection<net::ssl::stream<tcp::socket>>::on_chunk_written(error_code, bool);

}  // namespace ingero::serve::http::detail

// Internal: one HTTP connection (connection.cc starts it, server.cc admits its socket). Includes
// Asio and Beast; only the connection's own translation units include it. The members are
// defined, and instantiated for both sockets, in connection.cc (its life: start, stops,
// deadlines, closing), connection_request.cc (reading a request) and connection_response.cc
// (running the handler, writing the response).
//
// One connection's life, as a state machine on its strand (Beast parser and serializer; the
// socket is plain TCP or TLS). No state ever waits on a thread: a slow client leaves a pending
// read and a timer behind, nothing more.
//
//   handshake (TLS) -> idle -> reading (head, checks, body) -> handling -> writing -> idle ...
//                                   \-> authorizing (a slow Authenticator on a worker)
//                                   handling -> streaming (chunks from a Stream) -> idle ...
//   any state -> closing (shutdown; a bounded drain of unread input) -> closed
#pragma once

#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "serve/http/server_core.h"
#include "serve/http/stream_link.h"

namespace ingero::serve::http::detail {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using error_code = boost::system::error_code;

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
    let_go_body();
  }

  void start();

  void stop_gracefully() override;
  void stop_now() override;
  void evict() override;

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

  // --- deadlines (connection.cc) -------------------------------------------------------

  void arm(std::chrono::milliseconds d);
  void disarm();
  void on_deadline();
  void on_timeout();

  // --- reading a request (connection_request.cc) ----------------------------------------

  void wait_request();
  void read_header();
  void on_read_error(error_code ec);
  void on_header();
  void after_auth(const AuthDecision& d);
  void read_body();

  // --- running the handler (connection_response.cc) -------------------------------------

  Response invoke();
  void dispatch();
  void watch_client();  // Request::client

  // --- writing the response (connection_response.cc) ------------------------------------

  void add_headers(bhttp::fields& f, const Headers& h);
  // Answers a request whose body was not (completely) read, then closes.
  void reject(Response r);
  void send(Response r);
  void start_stream(Response r);
  void pump();
  void on_chunk_written(error_code ec, bool last);

  // --- closing (connection.cc) ----------------------------------------------------------

  void close_gracefully();
  void drain();
  void close_now();
  void release();
  void let_go_body();  // the request's body and its share of max_bodies_bytes

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
  size_t body_held_ = 0;  // bytes of Limits::max_bodies_bytes this request holds (Core::hold_body)
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

}  // namespace ingero::serve::http::detail

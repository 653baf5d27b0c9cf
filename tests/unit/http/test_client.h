// A deliberately low-level HTTP/1.1 client for the server tests: it controls every byte and
// when it is sent (dribbling, idle and greedy clients), can bind a chosen loopback source
// address (127.0.0.0/8 is all loopback on Linux: distinct "peers" for the per-peer cap),
// keeps a connection for several requests, and speaks TLS (with a client certificate).
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ingero::serve::http::test {

using namespace std::chrono_literals;

struct Reply {
  int status = 0;                              // 0: no response
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  std::string raw_body;                        // as sent (chunk framing included)
  std::string error;                           // why status is 0
};

struct TlsClient {
  std::string ca_file;              // verify the server against it
  std::string cert_file, key_file;  // a client certificate, optional
};

class Conn {
 public:
  // Connects to 127.0.0.1:port from `source` (TCP connect and, with `tls`, the handshake).
  // !ok() on failure, with error().
  Conn(uint16_t port, const std::string& source = "127.0.0.1", const TlsClient* tls = nullptr);
  ~Conn();
  Conn(Conn&& o) noexcept;
  Conn(const Conn&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  int fd() const { return fd_; }
  uint16_t local_port() const { return local_port_; }

  // Sends everything; false on an error (the peer closed: EPIPE/ECONNRESET).
  bool send(std::string_view data);
  // Reads one response (Content-Length, chunked, or until close).
  Reply read_response(std::chrono::milliseconds timeout = 10s);
  // Reads until `delim` has arrived and returns everything up to and including it ("" on
  // timeout or close).
  std::string read_until(std::string_view delim, std::chrono::milliseconds timeout = 10s);
  // Reads until the peer closes (EOF or reset) or `timeout`; true when it closed. What
  // arrived meanwhile is appended to *got.
  bool wait_closed(std::chrono::milliseconds timeout, std::string* got = nullptr);
  // True when the peer has closed already (non-blocking check; data is consumed).
  bool closed_now();
  void close();

 private:
  // Reads more into in_; false on EOF/error/timeout (sets eof_ on EOF or reset).
  bool fill(std::chrono::steady_clock::time_point until);
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string in_;
  std::string error_;
  bool eof_ = false;
  uint16_t local_port_ = 0;
};

// "METHOD target HTTP/1.1" with Host: 127.0.0.1, the given headers, and Content-Length
// when `body` is not empty.
std::string request_text(std::string_view method, std::string_view target,
                         const std::map<std::string, std::string>& headers = {},
                         std::string_view body = {});

// One request on a new connection.
Reply request(uint16_t port, std::string_view method, std::string_view target,
              const std::map<std::string, std::string>& headers = {}, std::string_view body = {},
              const TlsClient* tls = nullptr);

// Raises RLIMIT_NOFILE's soft limit to the hard limit (tests holding 1,000+ sockets).
void raise_fd_limit();

// p-th percentile (0..100) of `v` (sorted in place), nearest rank.
double percentile(std::vector<double>& v, double p);

}  // namespace ingero::serve::http::test

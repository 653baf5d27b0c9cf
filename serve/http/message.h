// What handlers see and return: a request (method, target, headers, body, who sent it and who
// they authenticated as) and a response (status, headers, and either a body or a Stream).
// Plain data, no Boost: users of the HTTP library never include Asio or Beast.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ingero::serve::http {

class Stream;

// Header fields in arrival order. Names compare case-insensitively; a repeated field is kept
// as several entries (get() joins them with ", ", as RFC 9110 allows for list fields).
class Headers {
 public:
  using Field = std::pair<std::string, std::string>;

  void add(std::string name, std::string value);
  // Replaces every field of that name with one.
  void set(std::string name, std::string value);
  // The value, or nullopt when absent; repeated fields joined with ", ".
  std::optional<std::string> get(std::string_view name) const;
  // get() or "" when absent.
  std::string value(std::string_view name) const;
  size_t count(std::string_view name) const;
  bool has(std::string_view name) const { return count(name) > 0; }

  const std::vector<Field>& fields() const { return fields_; }
  auto begin() const { return fields_.begin(); }
  auto end() const { return fields_.end(); }
  size_t size() const { return fields_.size(); }

 private:
  std::vector<Field> fields_;
};

bool iequals(std::string_view a, std::string_view b);

// Whether the client of a request a worker handles has left: the server watches its
// connection while the handler waits or runs, and an end of the connection (the client closed
// it, or half-closed its side: as in Go's net/http, the two cannot be told apart) marks it
// gone. A handler that can stop early (an MCP tool's SQL) asks to be told.
class ClientWatch {
 public:
  // `f` runs once the client is gone: at once if it is, else on the server's I/O thread.
  void on_gone(std::function<void()> f);
  void set_gone();  // the server's

 private:
  std::mutex mu_;
  bool gone_ = false;
  std::function<void()> on_gone_;
};

struct Request {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // "/mcp?x=1"
  std::string path;    // "/mcp" (the target up to '?', not percent-decoded)
  std::string query;   // "x=1" (after '?', not decoded)
  int version = 11;    // 10 for HTTP/1.0, 11 for HTTP/1.1
  Headers headers;
  // The whole body. Handlers always get it complete: it is read only after the route, the
  // Host/Origin checks and authentication accepted the request's headers.
  std::string body;
  std::string peer;  // the client's IP address, "127.0.0.1" or "::1" (IPv4-mapped shown as IPv4)
  uint16_t peer_port = 0;
  // The name the route's Authenticator gave the client (a token's name, a basic-auth user);
  // "" on a route without authentication.
  std::string principal;
  bool tls = false;  // arrived over TLS
  // Set for requests handled on a worker (RunOn::worker); null on the I/O thread.
  std::shared_ptr<ClientWatch> client;
};

struct Response {
  int status = 200;
  Headers headers;  // Content-Length, Transfer-Encoding and Connection are set by the server
  std::string body;
  // When set, `body` is ignored and the body comes from the stream, sent with chunked transfer
  // coding as the producer writes it (to an HTTP/1.0 client: raw, then the connection closes).
  // The handler returns at once and its worker is free; the producer keeps the Stream.
  std::shared_ptr<Stream> stream;
  // Close the connection after this response even if the client asked to keep it.
  bool close = false;

  static Response text(int status, std::string text);  // text/plain; charset=utf-8
  static Response json(int status, std::string json);  // application/json
  // A response whose body is a new Stream (also returned). For SSE pass "text/event-stream".
  static std::pair<Response, std::shared_ptr<Stream>> streaming(int status,
                                                                std::string content_type);
};

// One Server-Sent Event ("event: E\nid: I\ndata: line\n...\n\n"); a multi-line `data` becomes
// several data lines. `event` and `id` may be empty; they must not contain line breaks.
std::string sse_event(std::string_view data, std::string_view event = {}, std::string_view id = {});

// The standard reason phrase ("Not Found"), or "Unknown".
std::string_view reason_phrase(int status);

}  // namespace ingero::serve::http

// A minimal HTTP/1.1 client for tests that talk to local servers (Prometheus, /metrics,
// the MCP endpoint): one request per connection, Content-Length or chunked bodies.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace ingero::test {

struct HttpResponse {
  int status = 0;  // 0: no response (connection refused, timeout, garbage)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string error;  // why status is 0
};

// `headers` may override Host. With `tls_ca` set the connection is HTTPS, verified against
// that CA file (and the IP address `host`).
HttpResponse http_request(const std::string& host, int port, const std::string& method,
                          const std::string& target, const std::string& body = "",
                          const std::map<std::string, std::string>& headers = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(10),
                          const std::string& tls_ca = "");
inline HttpResponse http_get(const std::string& host, int port, const std::string& target) {
  return http_request(host, port, "GET", target);
}
std::string url_encode(const std::string& s);
// A TCP port on 127.0.0.1 that was free a moment ago, and not handed out before by this process
// (two servers asked for ports before either binds get two).
int free_tcp_port();

}  // namespace ingero::test

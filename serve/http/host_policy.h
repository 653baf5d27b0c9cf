// DNS-rebinding protection: which Host and Origin headers a server accepts. A web page on
// another site that gets its name re-pointed at 127.0.0.1 still sends its own name as Host,
// and a page calling us from a browser sends its Origin; both are refused here, from the
// headers alone, before authentication and before the body is read.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "serve/http/message.h"

namespace ingero::serve::http {

struct HostPolicy {
  // Refuse (403) a Host that names neither loopback (localhost, 127.0.0.1, [::1]), the bound
  // address (unless it is a wildcard), nor one of `allow_hosts`. Turn off only for endpoints
  // that are meant to be reached by any name and carry nothing a browser page may steal
  // (a /metrics scraped by a remote Prometheus).
  bool check_host = true;
  std::vector<std::string> allow_hosts;    // more host names, without port: "gpu-node-01"
  std::vector<std::string> allow_origins;  // Origins accepted exactly: "https://x.example"
};

class HostChecker {
 public:
  // `bound_host` as listened on ("127.0.0.1", "::1", "0.0.0.0", "localhost").
  HostChecker(HostPolicy policy, const std::string& bound_host, bool wildcard);
  // nullopt when `head` may proceed; otherwise the response to send (400 for a missing or
  // repeated Host, 403 for a refused Host or Origin).
  std::optional<Response> check(const Request& head) const;

  // "Example.COM:8080" -> "example.com"; "[::1]:8081" -> "[::1]".
  static std::string host_name(const std::string& authority);

 private:
  bool origin_ok(const std::string& origin) const;
  HostPolicy policy_;
  std::set<std::string> hosts_;  // lower-case host names, IPv6 in brackets
};

}  // namespace ingero::serve::http

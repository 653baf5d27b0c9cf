// Where a server listens, from what a user types after --http or --prometheus.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hal/result.h"

namespace ingero::serve::http {

struct ListenAddress {
  std::string host;       // brackets removed: "127.0.0.1", "::1", "0.0.0.0", "::", "localhost"
  uint16_t port = 0;      // 0: any free port (tests)
  bool wildcard = false;  // 0.0.0.0 or :: : every interface
};

// "PORT" and ":PORT" mean 127.0.0.1:PORT: a bare port never exposes the server. Otherwise
// "HOST:PORT" or "[IPV6]:PORT". A missing or non-numeric port, or one above 65535, is an Error.
Result<ListenAddress> parse_listen_address(std::string_view spec);

// "[::1]" for IPv6 literals, the host as is otherwise: what goes before ":PORT" in a URL.
std::string url_host(const std::string& host);

}  // namespace ingero::serve::http

#include "serve/http/listen_address.h"

namespace ingero::serve::http {

Result<ListenAddress> parse_listen_address(std::string_view spec) {
  auto bad = [&](const std::string& why) {
    return make_error("bad listen address '" + std::string(spec) + "': " + why +
                      " (use PORT, :PORT, HOST:PORT or [IPV6]:PORT)");
  };
  ListenAddress a;
  std::string_view port;
  if (!spec.empty() && spec.front() == '[') {
    size_t close = spec.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    a.host = std::string(spec.substr(1, close - 1));
    if (a.host.empty()) return bad("empty IPv6 address");
    if (close + 1 >= spec.size() || spec[close + 1] != ':') return bad("missing :PORT");
    port = spec.substr(close + 2);
  } else if (size_t colon = spec.rfind(':'); colon != std::string_view::npos) {
    a.host = std::string(spec.substr(0, colon));
    if (a.host.find(':') != std::string::npos) return bad("write IPv6 addresses as [ADDR]:PORT");
    port = spec.substr(colon + 1);
  } else {
    port = spec;
  }
  if (a.host.empty()) a.host = "127.0.0.1";
  if (port.empty()) return bad("missing port");
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
    return bad("the port is not a number");
  unsigned long p = std::stoul(std::string(port));
  if (p > 65535) return bad("the port is above 65535");
  a.port = uint16_t(p);
  a.wildcard = a.host == "0.0.0.0" || a.host == "::" || a.host == "0:0:0:0:0:0:0:0";
  return a;
}

std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace ingero::serve::http

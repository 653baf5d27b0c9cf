#include "fleet/clickhouse_endpoint.h"

#include <cstdlib>
#include <span>

namespace ingero::fleet {

bool is_identifier(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

ingero::Result<Endpoint> parse_endpoint(std::string_view url) {
  // A password written into the URL is refused, and not said back: the line would carry it
  // into a service's logs.
  std::string shown(url);
  if (size_t from = shown.find("://"); from != std::string::npos) {
    size_t end = shown.find('/', from + 3), at = shown.rfind('@', end);
    size_t colon = at == std::string::npos ? at : shown.find(':', from + 3);
    if (at != std::string::npos && at > from && colon < at)
      shown.replace(colon + 1, at - colon - 1, "***");
  }
  auto bad = [&](const std::string& why) {
    return ingero::make_error("bad ClickHouse URL '" + shown + "': " + why);
  };
  struct Scheme {
    std::string_view prefix, http;
    int port;
  };
  static constexpr Scheme kSchemes[] = {{"clickhouse://", "http", 8123},
                                        {"clickhouses://", "https", 8443},
                                        {"http://", "http", 8123},
                                        {"https://", "https", 8443}};
  const Scheme* scheme = nullptr;
  for (const Scheme& s : kSchemes)
    if (url.substr(0, s.prefix.size()) == s.prefix) scheme = &s;
  if (!scheme)
    return bad(
        "expected clickhouse://HOST:8123/DB or http://HOST:8123/DB (clickhouses:// or https:// for "
        "TLS)");
  std::string_view rest = url.substr(scheme->prefix.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.find_first_of("?#") != std::string_view::npos)
    return bad("no query string or fragment: settings are chosen by ingero");
  Endpoint ep;
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view user = authority.substr(0, at);
    if (user.find(':') != std::string_view::npos)
      return bad(std::string("no password in the URL: set ") + kPasswordEnv + " instead");
    if (!is_identifier(user)) return bad("the user must be a plain name");
    ep.user = std::string(user);
    authority = authority.substr(at + 1);
  }
  if (authority.empty()) return bad("no host");
  std::string host(authority), port = std::to_string(scheme->port);
  if (size_t colon = authority.rfind(':');
      colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    host = std::string(authority.substr(0, colon));
    port = std::string(authority.substr(colon + 1));
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) == 0 ||
        std::stoi(port) > 65535)
      return bad("bad port '" + port + "'");
  }
  if (host.empty() || host.find_first_of(" /?#") != std::string::npos) return bad("bad host");
  ep.database = path.empty() ? "ingero" : std::string(path);
  if (!is_identifier(ep.database))
    return bad("the database '" + ep.database + "' must be a plain name ([A-Za-z_][A-Za-z0-9_]*)");
  // ClickHouse's own: ship made its tables in `system`.
  for (const char* own : {"system", "information_schema", "INFORMATION_SCHEMA"})
    if (ep.database == own)
      return bad("the database '" + ep.database +
                 "' is ClickHouse's own: name the one that holds ingero's tables (default "
                 "ingero)");
  ep.base = std::string(scheme->http) + "://" + host + ":" + port;
  if (const char* pw = std::getenv(kPasswordEnv)) ep.password = pw;
  return ep;
}

}  // namespace ingero::fleet

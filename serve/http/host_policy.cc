#include "serve/http/host_policy.h"

#include <algorithm>
#include <cctype>

#include "serve/http/listen_address.h"

namespace ingero::serve::http {

namespace {
std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

HostChecker::HostChecker(HostPolicy policy, const std::string& bound_host, bool wildcard)
    : policy_(std::move(policy)) {
  for (const char* l : {"localhost", "127.0.0.1", "[::1]"}) hosts_.insert(l);
  if (!wildcard) hosts_.insert(lower(url_host(bound_host)));
  for (const auto& h : policy_.allow_hosts) hosts_.insert(host_name(h));
}

std::string HostChecker::host_name(const std::string& authority) {
  if (!authority.empty() && authority[0] == '[') {
    size_t e = authority.find(']');
    return lower(e == std::string::npos ? authority : authority.substr(0, e + 1));
  }
  return lower(authority.substr(0, authority.find(':')));
}

bool HostChecker::origin_ok(const std::string& origin) const {
  if (std::find(policy_.allow_origins.begin(), policy_.allow_origins.end(), origin) !=
      policy_.allow_origins.end())
    return true;
  size_t scheme = origin.find("://");
  if (scheme == std::string::npos) return false;  // "null" (sandboxed pages, files) included
  std::string s = lower(origin.substr(0, scheme));
  if (s != "http" && s != "https") return false;
  std::string authority = origin.substr(scheme + 3);
  if (authority.find('/') != std::string::npos || authority.find('@') != std::string::npos)
    return false;
  return hosts_.count(host_name(authority)) > 0;
}

std::optional<Response> HostChecker::check(const Request& head) const {
  size_t n = head.headers.count("host");
  if (n > 1) return Response::text(400, "more than one Host header");
  if (n == 0) {
    // HTTP/1.0 clients may omit Host; browsers never do.
    if (head.version >= 11) return Response::text(400, "missing Host header");
  } else if (head.headers.value("host").empty()) {
    // An origin-form request names no authority of its own: an empty Host names nothing.
    return Response::text(400, "empty Host header");
  } else if (policy_.check_host) {
    std::string h = host_name(head.headers.value("host"));
    if (!hosts_.count(h))
      return Response::text(
          403, "Host '" + h + "' is not accepted (DNS-rebinding protection; allow it explicitly)");
  }
  if (head.headers.count("origin") > 1) return Response::text(400, "more than one Origin header");
  if (auto origin = head.headers.get("origin"); origin && !origin_ok(*origin))
    return Response::text(403, "Origin '" + *origin + "' is not accepted (allow it explicitly)");
  return std::nullopt;
}

}  // namespace ingero::serve::http

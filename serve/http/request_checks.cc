#include "serve/http/request_checks.h"

namespace ingero::serve::http::detail {

HeadCheck check_head(Core& core, const Request& head, bool chunked) {
  HeadCheck c;
  if (head.path.empty() || head.path[0] != '/') {
    ++core.counters.bad_requests;
    c.refuse = Response::text(400, "the request target must be a path");
    return c;
  }
  // Only "chunked" is understood, alone; anything else would leave the body's end unknown.
  // `gzip, chunked` was de-chunked and taken as the body, its gzip ignored.
  auto coding = head.headers.get("transfer-encoding");
  auto only_chunked = [](std::string v) {
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
    size_t b = v.find_first_not_of(" \t");
    return b != std::string::npos && iequals(std::string_view(v).substr(b), "chunked");
  };
  if (coding && (!chunked || !only_chunked(*coding))) {
    ++core.counters.bad_requests;
    c.refuse = Response::text(501, "unsupported Transfer-Encoding");
    return c;
  }
  if (auto r = core.hosts->check(head)) {
    ++core.counters.forbidden;
    c.refuse = std::move(*r);
    return c;
  }
  auto match = core.find(head.method, head.path);
  if (!match.route) {
    if (match.allow.empty()) {
      c.refuse = Response::text(404, "no such endpoint");
    } else {
      c.refuse = Response::text(405, "method not allowed");
      c.refuse->headers.add("Allow", match.allow);
    }
    return c;
  }
  c.route = match.route;
  c.auth = core.auth_for(*match.route);
  return c;
}

std::optional<Response> check_admission(Core& core, const Route& route, const Authenticator* auth,
                                        const AuthDecision& d,
                                        std::optional<uint64_t> content_length,
                                        const Request& head) {
  if (auth && !d.ok) {
    ++core.counters.unauthorized;
    auto r = Response::text(401, auth->refusal());
    r.headers.add("WWW-Authenticate", auth->challenge());
    return r;
  }
  size_t limit = core.max_body(route);
  if (content_length && *content_length > limit) {
    ++core.counters.too_large;
    if (limit == 0) return Response::text(413, route.method + " " + head.path + " takes no body");
    return Response::text(413, "the body (" + std::to_string(*content_length) + " bytes) exceeds " +
                                   std::to_string(limit) + " bytes");
  }
  if (auto e = head.headers.get("expect"); e && !iequals(*e, "100-continue"))
    return Response::text(417, "unsupported Expect");
  return std::nullopt;
}

}  // namespace ingero::serve::http::detail

#include "serve/http/beast_messages.h"

namespace ingero::serve::http::detail {

namespace bhttp = boost::beast::http;

Request request_head(const bhttp::request_header<>& h) {
  Request r;
  r.method = std::string(h.method_string());
  r.target = std::string(h.target());
  size_t q = r.target.find('?');
  r.path = r.target.substr(0, q);
  if (q != std::string::npos) r.query = r.target.substr(q + 1);
  r.version = h.version() >= 11 ? 11 : 10;
  for (const auto& f : h) r.headers.add(std::string(f.name_string()), std::string(f.value()));
  return r;
}

bool valid_field(std::string_view name, std::string_view value) {
  static constexpr std::string_view kTokenPunct = "!#$%&'*+-.^_`|~";
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && kTokenPunct.find(char(c)) == std::string_view::npos) return false;
  for (unsigned char c : value)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  return true;
}

void response_fields(bhttp::fields& out, const Headers& headers,
                     const std::vector<std::pair<std::string, std::string>>& extra,
                     const std::function<void(const std::string& name)>& dropped) {
  for (const auto& [k, v] : headers) {
    if (iequals(k, "content-length") || iequals(k, "transfer-encoding") || iequals(k, "connection"))
      continue;
    if (!valid_field(k, v)) {
      dropped(k);
      continue;
    }
    out.insert(k, v);
  }
  for (const auto& [k, v] : extra)
    if (out.count(k) == 0 && valid_field(k, v)) out.insert(k, v);
  if (out.count(bhttp::field::cache_control) == 0) out.set(bhttp::field::cache_control, "no-store");
  if (out.count("X-Content-Type-Options") == 0) out.set("X-Content-Type-Options", "nosniff");
}

}  // namespace ingero::serve::http::detail

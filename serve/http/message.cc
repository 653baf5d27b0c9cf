#include "serve/http/message.h"

#include <algorithm>
#include <cctype>

#include "serve/http/stream.h"

namespace ingero::serve::http {

void ClientWatch::on_gone(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!gone_) {
      on_gone_ = std::move(f);
      return;
    }
  }
  f();
}

void ClientWatch::set_gone() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (gone_) return;
    gone_ = true;
    f = std::move(on_gone_);
  }
  if (f) f();
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

void Headers::add(std::string name, std::string value) {
  fields_.emplace_back(std::move(name), std::move(value));
}

void Headers::set(std::string name, std::string value) {
  std::erase_if(fields_, [&](const Field& f) { return iequals(f.first, name); });
  fields_.emplace_back(std::move(name), std::move(value));
}

std::optional<std::string> Headers::get(std::string_view name) const {
  std::optional<std::string> v;
  for (const auto& [k, x] : fields_) {
    if (!iequals(k, name)) continue;
    if (v)
      *v += ", " + x;
    else
      v = x;
  }
  return v;
}

std::string Headers::value(std::string_view name) const { return get(name).value_or(""); }

size_t Headers::count(std::string_view name) const {
  return size_t(std::count_if(fields_.begin(), fields_.end(),
                              [&](const Field& f) { return iequals(f.first, name); }));
}

Response Response::text(int status, std::string text) {
  Response r;
  r.status = status;
  r.headers.add("Content-Type", "text/plain; charset=utf-8");
  r.body = std::move(text);
  if (r.body.empty() || r.body.back() != '\n') r.body += '\n';
  return r;
}

Response Response::json(int status, std::string json) {
  Response r;
  r.status = status;
  r.headers.add("Content-Type", "application/json");
  r.body = std::move(json);
  return r;
}

std::pair<Response, std::shared_ptr<Stream>> Response::streaming(int status,
                                                                 std::string content_type) {
  Response r;
  r.status = status;
  r.headers.add("Content-Type", std::move(content_type));
  r.stream = std::make_shared<Stream>();
  auto s = r.stream;
  return {std::move(r), std::move(s)};
}

std::string sse_event(std::string_view data, std::string_view event, std::string_view id) {
  std::string out;
  if (!event.empty()) out.append("event: ").append(event).append("\n");
  if (!id.empty()) out.append("id: ").append(id).append("\n");
  size_t pos = 0;
  while (true) {
    size_t nl = data.find('\n', pos);
    std::string_view line = data.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.append("data: ").append(line).append("\n");
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  out += "\n";
  return out;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace ingero::serve::http

#include "serve/otlp/http_post.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "compress/gzip.h"

namespace ingero::serve::otlp {
namespace {

constexpr size_t kMaxAnswer = 64 << 10;

int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

struct Call {
  std::string body;
  std::optional<std::chrono::seconds> retry_after;
  const std::atomic<int64_t>* deadline_ns = nullptr;
  bool cut = false;
};

size_t on_write(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<Call*>(user);
  size_t len = size * n;
  if (c->body.size() < kMaxAnswer) c->body.append(data, std::min(len, kMaxAnswer - c->body.size()));
  return len;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<Call*>(user);
  size_t len = size * n;
  std::string_view h(data, len);
  constexpr std::string_view kName = "retry-after:";
  if (h.size() > kName.size() && strncasecmp(h.data(), kName.data(), kName.size()) == 0) {
    std::string v(h.substr(kName.size()));
    v.erase(0, v.find_first_not_of(" \t"));
    v.erase(v.find_last_not_of(" \t\r\n") + 1);
    // Seconds only; an HTTP date falls back to our own backoff.
    if (!v.empty() && v.size() < 7 && v.find_first_not_of("0123456789") == std::string::npos)
      c->retry_after = std::chrono::seconds(std::stol(v));
  }
  return len;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* c = static_cast<Call*>(user);
  if (steady_ns(std::chrono::steady_clock::now()) >= c->deadline_ns->load()) {
    c->cut = true;
    return 1;  // aborts the transfer (CURLE_ABORTED_BY_CALLBACK)
  }
  return 0;
}

}  // namespace

HttpPost::HttpPost(const ExporterConfig& config) : config_(config) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
}

HttpPost::~HttpPost() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

void HttpPost::set_deadline(std::chrono::steady_clock::time_point t) {
  deadline_ns_.store(steady_ns(t));
}

PostResult HttpPost::post(const std::string& url, const std::string& payload) {
  PostResult r;
  auto* h = static_cast<CURL*>(curl_);
  if (!h) {
    r.error = "cannot initialise libcurl";
    return r;
  }
  int64_t now = steady_ns(std::chrono::steady_clock::now());
  int64_t left_ms = (deadline_ns_.load() - now) / 1'000'000;
  if (left_ms <= 0) {
    r.deadline = true;
    r.error = "not sent: the time allowed at exit ran out";
    return r;
  }
  long timeout_ms = long(std::min<int64_t>(config_.timeout.count(), left_ms));
  std::string compressed;
  const std::string* body = &payload;
  if (config_.gzip) {
    auto z = compress::gzip(payload, 6);
    if (!z) {
      r.outcome = PostResult::Outcome::kRejected;
      r.error = z.error().message;
      return r;
    }
    compressed = std::move(*z);
    body = &compressed;
  }
  curl_easy_reset(h);
  Call call;
  call.deadline_ns = &deadline_ns_;
  curl_slist* headers = curl_slist_append(nullptr, "Expect:");
  headers = curl_slist_append(headers, "Content-Type: application/x-protobuf");
  if (config_.gzip) headers = curl_slist_append(headers, "Content-Encoding: gzip");
  for (const auto& [k, v] : config_.headers)
    headers = curl_slist_append(headers, (k + ": " + v).c_str());
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body->data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body->size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ingero/" INGERO_VERSION);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &call);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &call);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &call);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  if (!config_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, config_.ca_file.c_str());
  if (!config_.client_cert.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, config_.client_cert.c_str());
    curl_easy_setopt(h, CURLOPT_SSLKEY, config_.client_key.c_str());
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
  r.body = std::move(call.body);
  r.retry_after = call.retry_after;
  // The receiver took the request once it answered 2xx: a body then cut short or not as its
  // headers said (a broken gzip) loses only its partial-success details. Sent again, it arrived
  // up to four times and was then counted dropped.
  if (rc != CURLE_OK && r.status >= 200 && r.status < 300) {
    r.outcome = PostResult::Outcome::kSent;
    return r;
  }
  if (rc != CURLE_OK) {
    r.status = 0;
    r.outcome = PostResult::Outcome::kRetryable;
    std::string what = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (call.cut) {
      r.deadline = true;
      r.error = "cut at the exit deadline";
    } else if (rc == CURLE_OPERATION_TIMEDOUT && timeout_ms < config_.timeout.count()) {
      r.deadline = true;  // the exit's deadline shortened this request
      r.error = "no answer before the exit deadline (" + what + ")";
    } else if (rc == CURLE_OPERATION_TIMEDOUT)
      r.error = "no answer within " + std::to_string(timeout_ms) + " ms (" + what + ")";
    else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
      r.error = "cannot connect (" + what + ")";
    else
      r.error = what;
    return r;
  }
  if (r.status >= 200 && r.status < 300) {
    r.outcome = PostResult::Outcome::kSent;
    return r;
  }
  bool retryable = r.status == 429 || r.status == 502 || r.status == 503 || r.status == 504;
  r.outcome = retryable ? PostResult::Outcome::kRetryable : PostResult::Outcome::kRejected;
  std::string text = r.body.substr(0, 200);
  for (auto& ch : text)
    if (static_cast<unsigned char>(ch) < ' ' || static_cast<unsigned char>(ch) > '~') ch = '.';
  r.error = "HTTP " + std::to_string(r.status) + (text.empty() ? "" : ": " + text);
  return r;
}

}  // namespace ingero::serve::otlp

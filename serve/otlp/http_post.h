// One OTLP/HTTP request at a time, with libcurl (the HTTP client ingero already links for
// ClickHouse): POST a protobuf body with the configured headers, TLS and timeout, and classify
// the answer as the OTLP/HTTP specification asks. Keeps its connection alive between requests.
// Used by one thread; set_deadline() may be called from any other.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "serve/otlp/config.h"

namespace ingero::serve::otlp {

struct PostResult {
  enum class Outcome {
    kSent,       // 2xx
    kRetryable,  // no answer (connect, timeout, reset), or 429, 502, 503, 504
    kRejected,   // any other status: the specification forbids retrying it
  };
  Outcome outcome = Outcome::kRetryable;
  long status = 0;    // HTTP status; 0 when no answer came
  std::string error;  // why, when not sent: "HTTP 503: ...", "cannot connect (...)"
  std::string body;   // the answer's body (at most 64 KiB): an Export*ServiceResponse on 2xx
  std::optional<std::chrono::seconds> retry_after;  // from a 429/503 Retry-After in seconds
  bool deadline = false;                            // not sent, or cut, because of set_deadline()
};

class HttpPost {
 public:
  explicit HttpPost(const ExporterConfig& config);
  ~HttpPost();
  HttpPost(const HttpPost&) = delete;
  HttpPost& operator=(const HttpPost&) = delete;

  // POSTs `body` (an encoded Export*ServiceRequest) to `url`, gzip-compressed when the config
  // says so. Bounded by the config's timeout and by the deadline, whichever comes first.
  PostResult post(const std::string& url, const std::string& body);
  // No request runs past `t`: one in flight is cut (libcurl's progress callback checks at least
  // once a second), and none starts after it (kRetryable, "the time allowed ran out").
  void set_deadline(std::chrono::steady_clock::time_point t);

 private:
  const ExporterConfig& config_;
  void* curl_ = nullptr;
  std::atomic<int64_t> deadline_ns_{INT64_MAX};  // steady clock, ns since its epoch
};

}  // namespace ingero::serve::otlp

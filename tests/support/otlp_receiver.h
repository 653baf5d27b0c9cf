// A loopback OTLP/HTTP receiver for tests (on ingero's own HTTP server, serve/http): POST
// /v1/metrics, /v1/logs and /v1/traces, every body inflated when gzip-encoded and decoded with
// the same .proto definitions the exporter uses. Answers are scripted: the first requests get
// the given statuses (503, 429, 400, ...), the rest 200. A silent receiver accepts connections
// and never answers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace ingero::serve::http {
class Server;
}

namespace ingero::test {

namespace otlp_col = opentelemetry::proto::collector;

struct OtlpReceiverOptions {
  std::vector<int> statuses;       // the answers to the first requests, in order; then 200
  std::optional<int> retry_after;  // seconds, on every 429/503 answer
  std::string tls_cert, tls_key;   // both: HTTPS
  // A 2xx answer's partial success: this many items rejected (the first accepted request).
  int64_t partial_reject = 0;
};

class OtlpReceiver {
 public:
  explicit OtlpReceiver(OtlpReceiverOptions o = {});
  ~OtlpReceiver();
  std::string url() const;  // "http://127.0.0.1:PORT" (https with TLS)

  // Requests answered 2xx, decoded, in arrival order.
  std::vector<otlp_col::metrics::v1::ExportMetricsServiceRequest> metrics() const;
  std::vector<otlp_col::logs::v1::ExportLogsServiceRequest> logs() const;
  std::vector<otlp_col::trace::v1::ExportTraceServiceRequest> traces() const;
  std::vector<std::string> raw_metrics() const;  // the accepted metrics bodies, inflated
  size_t requests() const;                       // every POST, answered 2xx or not
  size_t undecodable() const;                    // bodies that did not parse
  // When each request arrived (steady clock), in order.
  std::vector<std::chrono::steady_clock::time_point> arrivals() const;
  // Values of header `name` of every request, in order ("" when absent).
  std::vector<std::string> header(const std::string& name) const;
  // Waits until `pred()` holds (checked after each request and every 50 ms).
  bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout) const;

 private:
  struct Got;
  std::unique_ptr<Got> got_;
  std::unique_ptr<serve::http::Server> server_;
};

// Accepts TCP connections on 127.0.0.1 and never reads or answers (the peer hangs until its
// own timeout). Connections are closed when it is destroyed.
class SilentReceiver {
 public:
  SilentReceiver();
  ~SilentReceiver();
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  size_t connections() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> accepted_{0};
  std::vector<int> clients_;
  std::thread thread_;
};

}  // namespace ingero::test

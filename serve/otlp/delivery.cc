#include "serve/otlp/delivery.h"

#include <algorithm>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace ingero::serve::otlp {
namespace {

using Clock = std::chrono::steady_clock;

// Items the receiver refused in a 2xx answer (OTLP partial success); 0 when the body does not
// parse or says nothing.
uint64_t partially_rejected(Signal s, const std::string& body, std::string* message) {
  namespace col = opentelemetry::proto::collector;
  int64_t n = 0;
  switch (s) {
    case Signal::kMetrics: {
      col::metrics::v1::ExportMetricsServiceResponse r;
      if (r.ParseFromString(body) && r.has_partial_success()) {
        n = r.partial_success().rejected_data_points();
        *message = r.partial_success().error_message();
      }
      break;
    }
    case Signal::kLogs: {
      col::logs::v1::ExportLogsServiceResponse r;
      if (r.ParseFromString(body) && r.has_partial_success()) {
        n = r.partial_success().rejected_log_records();
        *message = r.partial_success().error_message();
      }
      break;
    }
    case Signal::kTraces: {
      col::trace::v1::ExportTraceServiceResponse r;
      if (r.ParseFromString(body) && r.has_partial_success()) {
        n = r.partial_success().rejected_spans();
        *message = r.partial_success().error_message();
      }
      break;
    }
  }
  return n > 0 ? uint64_t(n) : 0;
}

}  // namespace

Delivery::Delivery(ExporterConfig config, DeliveryOptions options)
    : config_(std::move(config)),
      options_(options),
      http_(config_),
      jitter_state_(uint64_t(Clock::now().time_since_epoch().count()) | 1) {
  thread_ = std::thread([this] { run(); });
}

Delivery::~Delivery() { finish(Clock::now()); }

void Delivery::drop_locked(const Request& r, uint64_t SignalStats::*reason) {
  SignalStats& s = stats_.signals[size_t(r.signal)];
  s.*reason += r.items;
  s.dropped += r.items;
}

void Delivery::enqueue(Signal signal, std::string body, uint64_t items) {
  std::lock_guard<std::mutex> g(mu_);
  Request r{signal, std::move(body), items};
  stats_.signals[size_t(signal)].queued += items;
  if (stopping_) {
    drop_locked(r, &SignalStats::at_exit);
    return;
  }
  queued_bytes_ += r.body.size();
  queue_.push_back(std::move(r));
  // Over a bound: the oldest go (the newest metrics supersede them; fresh logs and spans are
  // worth more than old ones). The request just queued always stays.
  while (queue_.size() > 1 && (queue_.size() > options_.max_queue_requests ||
                               queued_bytes_ > options_.max_queue_bytes)) {
    drop_locked(queue_.front(), &SignalStats::queue_full);
    queued_bytes_ -= queue_.front().body.size();
    queue_.pop_front();
  }
  cv_.notify_all();
}

std::chrono::milliseconds Delivery::backoff(uint32_t attempts,
                                            std::optional<std::chrono::seconds> hint) {
  auto wait = options_.initial_backoff;
  for (uint32_t i = 1; i < attempts && wait < options_.max_backoff; ++i) wait *= 2;
  wait = std::min(wait, options_.max_backoff);
  jitter_state_ ^= jitter_state_ << 13;
  jitter_state_ ^= jitter_state_ >> 7;
  jitter_state_ ^= jitter_state_ << 17;
  wait -= std::chrono::milliseconds(
      int64_t(double(wait.count()) * 0.2 * double(jitter_state_ % 1000) / 1000.0));
  // A server's Retry-After wins when longer, up to max_elapsed.
  if (hint)
    wait = std::max<std::chrono::milliseconds>(
        wait, std::min<std::chrono::milliseconds>(*hint, options_.max_elapsed));
  return wait;
}

void Delivery::account(Request& r, const PostResult& res) {
  SignalStats& s = stats_.signals[size_t(r.signal)];
  ++stats_.attempts;
  if (r.attempts++) ++stats_.retries;
  std::string name(signal_name(r.signal));
  if (res.outcome == PostResult::Outcome::kSent) {
    std::string message;
    uint64_t refused = std::min(r.items, partially_rejected(r.signal, res.body, &message));
    s.sent += r.items - refused;
    ++s.requests;
    if (refused) {
      s.rejected += refused;
      s.dropped += refused;
      stats_.last_error = name + ": the receiver rejected " + std::to_string(refused) + " of " +
                          std::to_string(r.items) + (message.empty() ? "" : ": " + message);
    }
    return;
  }
  ++stats_.failures;
  // The exit's own cut says nothing about the receiver: the failure before it is kept.
  if (!res.deadline || stats_.last_error.empty()) stats_.last_error = name + ": " + res.error;
  if (res.outcome == PostResult::Outcome::kRejected) {
    drop_locked(r, &SignalStats::rejected);
    return;
  }
  auto now = Clock::now();
  if (stopping_ && now >= deadline_) {
    drop_locked(r, &SignalStats::at_exit);
    return;
  }
  if (now - r.first_try >= options_.max_elapsed) {
    drop_locked(r, &SignalStats::expired);
    return;
  }
  r.next_try = now + backoff(r.attempts, res.retry_after);
  queued_bytes_ += r.body.size();
  queue_.push_front(std::move(r));
}

void Delivery::run() {
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    if (queue_.empty()) {
      if (stopping_) break;
      cv_.wait(lk);
      continue;
    }
    auto now = Clock::now();
    if (stopping_ && now >= deadline_) break;
    if (queue_.front().next_try > now) {
      if (stopping_ && queue_.front().next_try >= deadline_) break;
      cv_.wait_until(lk, std::min(queue_.front().next_try, deadline_));
      continue;
    }
    Request r = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= r.body.size();
    if (!r.attempts) r.first_try = now;
    lk.unlock();
    PostResult res = http_.post(config_.url(r.signal), r.body);
    lk.lock();
    account(r, res);
  }
}

void Delivery::finish(Clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (finished_) return;
    finished_ = true;
    stopping_ = true;
    deadline_ = deadline;
    http_.set_deadline(deadline);
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> g(mu_);
  for (const Request& r : queue_) drop_locked(r, &SignalStats::at_exit);
  queue_.clear();
  queued_bytes_ = 0;
}

DeliveryStats Delivery::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

}  // namespace ingero::serve::otlp

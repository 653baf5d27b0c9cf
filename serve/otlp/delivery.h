// The OTLP exporter's sending side: a bounded queue of encoded requests and one thread that
// POSTs them in order, retrying with exponential backoff. Callers never wait on the network:
// enqueue() takes a mutex and returns. Every item handed over ends sent or dropped, and is
// counted as such by signal (stats()); after finish(), queued == sent + dropped.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "serve/otlp/config.h"
#include "serve/otlp/http_post.h"

namespace ingero::serve::otlp {

struct DeliveryOptions {
  size_t max_queue_bytes = size_t(32) << 20;  // encoded requests waiting, in all
  size_t max_queue_requests = 256;
  // After a retryable failure: wait initial_backoff, doubling up to max_backoff, with up to 20%
  // less at random so that agents restarted together do not retry together; a server's
  // Retry-After (seconds), when longer, wins. A request still unsent max_elapsed after its
  // first try is dropped.
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{30'000};
  std::chrono::milliseconds max_elapsed{300'000};
};

// Items are metric data points, log records or spans.
struct SignalStats {
  uint64_t queued = 0;      // items handed to enqueue()
  uint64_t sent = 0;        // items the receiver accepted (2xx, less partial rejections)
  uint64_t dropped = 0;     // items that will never be sent: the sum of the reasons below
  uint64_t queue_full = 0;  //   the queue was full: the oldest requests made room
  uint64_t rejected = 0;    //   a status the specification forbids retrying, or a partial
                            //   success's rejected items
  uint64_t expired = 0;     //   still failing max_elapsed after the first try
  uint64_t at_exit = 0;     //   left when finish()'s deadline came
  uint64_t requests = 0;    // requests accepted
};

struct DeliveryStats {
  std::array<SignalStats, kSignals> signals;
  uint64_t attempts = 0;   // POSTs made, retries included
  uint64_t retries = 0;    // POSTs that repeated an earlier failed one
  uint64_t failures = 0;   // POSTs that failed (retryable or not)
  std::string last_error;  // the latest failure, with its signal: "metrics: HTTP 503"
  const SignalStats& of(Signal s) const { return signals[size_t(s)]; }
};

class Delivery {
 public:
  Delivery(ExporterConfig config, DeliveryOptions options = {});
  ~Delivery();  // finish(now) if not finished
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  // Queues one encoded Export*ServiceRequest of `items` items for `signal`. When the queue is
  // over its bounds the oldest requests are dropped (queue_full). After finish(): dropped.
  void enqueue(Signal signal, std::string body, uint64_t items);
  // Sends what is queued until `deadline` (the request in flight is cut there), then counts
  // what is left as dropped (at_exit) and joins the thread. Idempotent.
  void finish(std::chrono::steady_clock::time_point deadline);
  DeliveryStats stats() const;
  const ExporterConfig& config() const { return config_; }

 private:
  struct Request {
    Signal signal;
    std::string body;
    uint64_t items;
    uint32_t attempts = 0;
    std::chrono::steady_clock::time_point first_try{}, next_try{};
  };
  void run();
  void drop_locked(const Request& r, uint64_t SignalStats::*reason);
  // The wait before attempt `attempts + 1`.
  std::chrono::milliseconds backoff(uint32_t attempts, std::optional<std::chrono::seconds> hint);
  void account(Request& r, const PostResult& res);  // with mu_ held

  ExporterConfig config_;
  DeliveryOptions options_;
  HttpPost http_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_;
  size_t queued_bytes_ = 0;
  bool stopping_ = false, finished_ = false;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  DeliveryStats stats_;
  uint64_t jitter_state_;
  std::thread thread_;
};

}  // namespace ingero::serve::otlp

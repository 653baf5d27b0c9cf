// `ingero trace --otlp ENDPOINT`: OTLP/HTTP (protobuf) export while tracing.
//   - metrics: every series of the Prometheus registry (serve/metrics), every `interval`, as
//     OTLP metrics (metrics_convert.h), and once more at the end;
//   - logs: the causal chains the tracer's live analysis finds (log_records.h);
//   - traces, with `spans`: slow calls and collectives (spans.h), as a sink of every event.
// Two threads of its own: a batcher (collects the registry, packs logs and spans into requests
// of at most kMaxBatch items, at least every flush interval) and the delivery thread
// (delivery.h: bounded queue, retry with backoff). The tracer's thread only copies a span's
// fields or a chain's record into a buffer under a mutex: nothing it does waits on the
// network. What is dropped is counted (stats()).
#pragma once

#include <prometheus/collectable.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/chain.h"
#include "hal/error_codes.h"
#include "hal/event_sink.h"
#include "serve/otlp/config.h"
#include "serve/otlp/delivery.h"
#include "serve/otlp/log_records.h"
#include "serve/otlp/resource.h"
#include "serve/otlp/spans.h"

namespace ingero::serve::otlp {

struct ExporterOptions {
  std::chrono::milliseconds interval{10'000};  // metrics (--otlp-interval)
  std::chrono::milliseconds flush{1'000};      // logs and spans wait at most this long
  bool spans = false;                          // --otlp-spans
  uint64_t span_threshold_ns = 1'000'000;      // --otlp-span-threshold
  uint32_t spans_per_second = 100;             // --otlp-span-rate
  int64_t mono_to_wall_ns = 0;                 // events' CLOCK_MONOTONIC -> Unix ns (the
                                               // metric points' clock too; 0: the wall's)
  int64_t start_ns = 0;                        // Unix ns the counters started (the trace's start)
  std::string node;                            // ingero.node of records and spans
  Attributes resource;                         // agent_resource()
  std::string proc_root = "/proc";             // processes' cgroups, for container ids
  hal::ErrorCodeFn error_codes;                // names failed calls' codes in spans
  DeliveryOptions delivery;
};

struct ExporterStats {
  DeliveryStats delivery;
  uint64_t metric_exports = 0;   // registry collections queued
  uint64_t chain_records = 0;    // chains turned into log records
  uint64_t spans_over_rate = 0;  // slow calls and collectives past --otlp-span-rate (not queued)
  uint64_t buffer_full = 0;      // spans or records dropped before a request was made (see
                                 // kMaxBuffered): counted in the signal's dropped too
};

class Exporter final : public hal::EventSink {
 public:
  static constexpr size_t kMaxBatch = 512;       // items per logs or traces request
  static constexpr size_t kMaxBuffered = 16384;  // items waiting for the batcher, per signal

  // `registry`: the series to export, collected at each export (serve::Metrics::collectable();
  // null: no metrics). Starts both threads.
  Exporter(ExporterConfig config, ExporterOptions options,
           std::shared_ptr<prometheus::Collectable> registry);
  ~Exporter() override;  // finish(now) if not finished

  // Spans (with options.spans); otherwise nothing. Never fails.
  Status on_event(const hal::Event& ev) override;
  Status on_stack(uint64_t stack_id, const std::vector<hal::StackFrame>& frames) override;
  // The chains of one analysis at `now_ns` (Unix ns): the new ones become log records.
  Status on_chains(const std::vector<engine::Chain>& chains, int64_t now_ns) override;
  // The end: stops the batcher, queues the registry's last values and every buffered record
  // and span, and delivers until `deadline` (then what is left is dropped, counted). Once.
  void finish(std::chrono::steady_clock::time_point deadline);
  ExporterStats stats() const;
  const ExporterConfig& config() const { return delivery_.config(); }

 private:
  void run();
  void export_metrics();                           // the batcher's thread, or finish()'s after it
  void flush();                                    // packs buffered logs and spans into requests
  const ContainerIds& container_of(uint32_t pid);  // batcher-side cache

  ExporterOptions options_;
  std::shared_ptr<prometheus::Collectable> registry_;
  Delivery delivery_;
  SpanFilter filter_;
  std::mt19937_64 rng_;                                    // batcher only
  std::unordered_map<uint32_t, ContainerIds> containers_;  // batcher only

  mutable std::mutex mu_;  // what the tracer hands over, and the counters
  StackTexts stacks_;
  ChainTracker chains_;
  std::condition_variable cv_;
  std::vector<SpanInput> spans_in_;
  std::vector<opentelemetry::proto::logs::v1::LogRecord> logs_in_;
  ExporterStats counts_;
  uint64_t buffer_full_logs_ = 0, buffer_full_spans_ = 0;
  bool stop_ = false, finished_ = false;
  std::thread thread_;
};

}  // namespace ingero::serve::otlp

#include "serve/otlp/exporter.h"

#include "hal/clock.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "serve/otlp/attributes.h"
#include "serve/otlp/metrics_convert.h"

namespace ingero::serve::otlp {
namespace {

namespace col = opentelemetry::proto::collector;
namespace pl = opentelemetry::proto::logs::v1;
namespace pt = opentelemetry::proto::trace::v1;
using Clock = std::chrono::steady_clock;

// Now on the session's clock (hal::TraceClock), which the spans, the log records and the
// counters' start time are on: a wall clock stepped while tracing moves none of them apart.
// Without an offset, the wall clock.
int64_t session_now_ns(int64_t mono_to_wall_ns) {
  return mono_to_wall_ns ? hal::TraceClock{mono_to_wall_ns}.now() : hal::wall_now_ns();
}

template <class ResourceX>
void describe(ResourceX* rx, const Attributes& resource) {
  for (const auto& [k, v] : resource) add_attr(rx->mutable_resource()->mutable_attributes(), k, v);
}

template <class ScopeX>
void name_scope(ScopeX* sx) {
  sx->mutable_scope()->set_name("ingero");
  sx->mutable_scope()->set_version(INGERO_VERSION);
}

}  // namespace

Exporter::Exporter(ExporterConfig config, ExporterOptions options,
                   std::shared_ptr<prometheus::Collectable> registry)
    : options_(std::move(options)),
      registry_(std::move(registry)),
      delivery_(std::move(config), options_.delivery),
      filter_(options_.span_threshold_ns, options_.spans_per_second),
      rng_(std::random_device{}()) {
  thread_ = std::thread([this] { run(); });
}

Exporter::~Exporter() { finish(Clock::now()); }

Status Exporter::on_event(const hal::Event& ev) {
  if (!options_.spans) return {};
  SpanFilter::Verdict v = filter_.check(ev);
  if (v == SpanFilter::Verdict::kSkip) return {};
  std::lock_guard<std::mutex> g(mu_);
  if (v == SpanFilter::Verdict::kOverRate) {
    ++counts_.spans_over_rate;
    return {};
  }
  if (finished_ || spans_in_.size() >= kMaxBuffered) {
    ++buffer_full_spans_;
    return {};
  }
  spans_in_.push_back(span_input(ev, options_.mono_to_wall_ns,
                                 ev.stack_id ? stacks_.find(ev.stack_id) : nullptr,
                                 &options_.error_codes));
  if (spans_in_.size() >= kMaxBatch) cv_.notify_all();
  return {};
}

Status Exporter::on_stack(uint64_t stack_id, const std::vector<hal::StackFrame>& frames) {
  if (!options_.spans) return {};
  std::lock_guard<std::mutex> g(mu_);
  stacks_.add(stack_id, frames);
  return {};
}

Status Exporter::on_chains(const std::vector<engine::Chain>& chains, int64_t now_ns) {
  std::vector<const engine::Chain*> fresh;
  {
    std::lock_guard<std::mutex> g(mu_);
    fresh = chains_.fresh(chains, options_.node, now_ns);
  }
  if (fresh.empty()) return {};
  // The processes' cgroups are read here, once per chain: chains are few.
  std::vector<pl::LogRecord> records(fresh.size());
  for (size_t i = 0; i < fresh.size(); ++i) {
    const engine::Chain& c = *fresh[i];
    ContainerIds ids =
        c.pids.empty() ? ContainerIds{} : process_container(c.pids.front(), options_.proc_root);
    chain_record(c, options_.node, now_ns, ids, &records[i]);
  }
  std::lock_guard<std::mutex> g(mu_);
  for (auto& r : records) {
    if (finished_ || logs_in_.size() >= kMaxBuffered) {
      ++buffer_full_logs_;
      continue;
    }
    logs_in_.push_back(std::move(r));
    ++counts_.chain_records;
  }
  cv_.notify_all();
  return {};
}

const ContainerIds& Exporter::container_of(uint32_t pid) {
  if (containers_.size() > 4096) containers_.clear();
  auto it = containers_.find(pid);
  if (it == containers_.end())
    it = containers_.emplace(pid, process_container(pid, options_.proc_root)).first;
  return it->second;
}

void Exporter::export_metrics() {
  if (!registry_) return;
  col::metrics::v1::ExportMetricsServiceRequest req;
  auto* rm = req.add_resource_metrics();
  describe(rm, options_.resource);
  auto* sm = rm->add_scope_metrics();
  name_scope(sm);
  size_t points = add_metrics(registry_->Collect(), uint64_t(options_.start_ns),
                              uint64_t(session_now_ns(options_.mono_to_wall_ns)), sm);
  if (!points) return;
  delivery_.enqueue(Signal::kMetrics, req.SerializeAsString(), points);
  std::lock_guard<std::mutex> g(mu_);
  ++counts_.metric_exports;
}

void Exporter::flush() {
  std::vector<SpanInput> spans;
  std::vector<pl::LogRecord> logs;
  {
    std::lock_guard<std::mutex> g(mu_);
    spans.swap(spans_in_);
    logs.swap(logs_in_);
  }
  for (size_t i = 0; i < logs.size(); i += kMaxBatch) {
    col::logs::v1::ExportLogsServiceRequest req;
    auto* rl = req.add_resource_logs();
    describe(rl, options_.resource);
    auto* sl = rl->add_scope_logs();
    name_scope(sl);
    size_t end = std::min(logs.size(), i + kMaxBatch);
    for (size_t k = i; k < end; ++k) sl->add_log_records()->Swap(&logs[k]);
    delivery_.enqueue(Signal::kLogs, req.SerializeAsString(), end - i);
  }
  for (size_t i = 0; i < spans.size(); i += kMaxBatch) {
    col::trace::v1::ExportTraceServiceRequest req;
    auto* rs = req.add_resource_spans();
    describe(rs, options_.resource);
    auto* ss = rs->add_scope_spans();
    name_scope(ss);
    size_t end = std::min(spans.size(), i + kMaxBatch);
    for (size_t k = i; k < end; ++k)
      make_span(spans[k], container_of(spans[k].pid), options_.node, rng_, ss->add_spans());
    delivery_.enqueue(Signal::kTraces, req.SerializeAsString(), end - i);
  }
}

void Exporter::run() {
  auto next_metrics = Clock::now() + options_.interval;
  auto next_flush = Clock::now() + options_.flush;
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_.wait_until(lk, std::min(next_metrics, next_flush), [&] {
      return stop_ || spans_in_.size() >= kMaxBatch || logs_in_.size() >= kMaxBatch;
    });
    if (stop_) break;
    auto now = Clock::now();
    bool full = spans_in_.size() >= kMaxBatch || logs_in_.size() >= kMaxBatch;
    lk.unlock();
    if (now >= next_metrics) {
      export_metrics();
      next_metrics = now + options_.interval;
    }
    if (full || now >= next_flush) {
      flush();
      next_flush = now + options_.flush;
    }
    lk.lock();
  }
}

void Exporter::finish(Clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;
    stop_ = true;
    finished_ = true;  // what comes after this is counted as dropped, never silently lost
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  export_metrics();
  flush();
  delivery_.finish(deadline);
}

ExporterStats Exporter::stats() const {
  ExporterStats s;
  {
    std::lock_guard<std::mutex> g(mu_);
    s = counts_;
    s.buffer_full = buffer_full_logs_ + buffer_full_spans_;
  }
  s.delivery = delivery_.stats();
  auto fold = [&](Signal sig, uint64_t n) {
    SignalStats& x = s.delivery.signals[size_t(sig)];
    x.queued += n;
    x.dropped += n;
  };
  std::lock_guard<std::mutex> g(mu_);
  fold(Signal::kLogs, buffer_full_logs_);
  fold(Signal::kTraces, buffer_full_spans_);
  return s;
}

}  // namespace ingero::serve::otlp

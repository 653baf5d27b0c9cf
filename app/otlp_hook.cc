#include "app/otlp_hook.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "app/builtin_backends.h"

namespace ingero::app {

namespace otlp = serve::otlp;

std::optional<otlp::ExporterConfig> resolve_otlp(const TraceOptions& o) {
  auto env = otlp::process_env();
  auto c = otlp::resolve_config(o.otlp, env);
  if (!c) {
    std::cerr << "ingero trace: " << c.error().message << "\n";
    return std::nullopt;
  }
  // The resource is made once the session's host is known; its variable is checked now.
  if (auto r = otlp::agent_resource("", "", "", env); !r) {
    std::cerr << "ingero trace: " << r.error().message << "\n";
    return std::nullopt;
  }
  return std::move(*c);
}

std::unique_ptr<otlp::Exporter> make_otlp_exporter(
    const TraceOptions& o, otlp::ExporterConfig config, const OtlpSession& s,
    std::shared_ptr<prometheus::Collectable> registry) {
  std::ifstream f("/proc/self/cgroup");
  std::stringstream cg;
  cg << f.rdbuf();
  auto resource = otlp::agent_resource(s.host, s.node, cg.str(), otlp::process_env());
  if (!resource) {
    std::cerr << "ingero trace: " << resource.error().message << "\n";
    return nullptr;
  }
  otlp::ExporterOptions eo;
  eo.interval = std::chrono::milliseconds(int64_t(o.otlp_interval_s * 1000));
  eo.spans = o.otlp_spans;
  eo.span_threshold_ns = uint64_t(o.otlp_span_threshold_s * 1e9);
  eo.spans_per_second = o.otlp_span_rate;
  eo.mono_to_wall_ns = s.mono_offset_ns;
  eo.start_ns = s.started_at_ns;
  eo.node = s.node;
  eo.resource = std::move(*resource);
  eo.error_codes = builtin_error_codes();
  std::string display = config.display;
  auto e = std::make_unique<otlp::Exporter>(std::move(config), std::move(eo), std::move(registry));
  if (!o.quiet)
    std::cerr << "ingero: exporting OTLP to " << display << " (metrics every " << o.otlp_interval_s
              << " s, causal chains as logs"
              << (o.otlp_spans ? ", slow calls and collectives as spans" : "") << ")\n";
  return e;
}

void add_otlp_stats(nlohmann::json& j, const otlp::ExporterStats& s) {
  const char* names[otlp::kSignals] = {"otlp_metric_points", "otlp_log_records", "otlp_spans"};
  for (size_t i = 0; i < otlp::kSignals; ++i) {
    const auto& x = s.delivery.signals[i];
    std::string n = names[i];
    j[n + "_queued"] = x.queued;
    j[n + "_sent"] = x.sent;
    j[n + "_dropped"] = x.dropped;
  }
  uint64_t full = 0, rejected = 0, expired = 0, at_exit = 0;
  for (const auto& x : s.delivery.signals) {
    full += x.queue_full;
    rejected += x.rejected;
    expired += x.expired;
    at_exit += x.at_exit;
  }
  j["otlp_dropped_queue_full"] = full + s.buffer_full;
  j["otlp_dropped_rejected"] = rejected;
  j["otlp_dropped_expired"] = expired;
  j["otlp_dropped_at_exit"] = at_exit;
  j["otlp_spans_over_rate"] = s.spans_over_rate;
  j["otlp_requests"] = s.delivery.attempts;
  j["otlp_retries"] = s.delivery.retries;
  j["otlp_failed_requests"] = s.delivery.failures;
}

void print_otlp_summary(std::ostream& out, const otlp::Exporter& e, bool quiet) {
  otlp::ExporterStats s = e.stats();
  const auto& m = s.delivery.of(otlp::Signal::kMetrics);
  const auto& l = s.delivery.of(otlp::Signal::kLogs);
  const auto& t = s.delivery.of(otlp::Signal::kTraces);
  uint64_t dropped = m.dropped + l.dropped + t.dropped;
  if (!quiet)
    out << "ingero: OTLP to " << e.config().display << ": sent " << m.sent << " metric points ("
        << m.requests << " exports), " << l.sent << " log records, " << t.sent << " spans"
        << (s.spans_over_rate
                ? "; " + std::to_string(s.spans_over_rate) + " spans over --otlp-span-rate not sent"
                : "")
        << (s.delivery.retries ? "; " + std::to_string(s.delivery.retries) + " retries" : "")
        << "\n";
  if (!dropped) return;
  uint64_t full = s.buffer_full, rejected = 0, expired = 0, at_exit = 0;
  for (const auto& x : s.delivery.signals) {
    full += x.queue_full;
    rejected += x.rejected;
    expired += x.expired;
    at_exit += x.at_exit;
  }
  out << "ingero: OTLP dropped " << m.dropped << " metric points, " << l.dropped
      << " log records and " << t.dropped << " spans (";
  std::string why;
  auto reason = [&](uint64_t n, const char* what) {
    if (n) why += (why.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  reason(full, "queue full");
  reason(rejected, "rejected by the receiver");
  reason(expired, "still failing after 5 minutes of retries");
  // A request cut at the deadline may have reached the receiver: unanswered is all it is.
  reason(at_exit, "unsent or unanswered at the exit deadline (--otlp-exit-timeout)");
  out << why
      << "); last error: " << (s.delivery.last_error.empty() ? "none" : s.delivery.last_error)
      << "\n";
}

}  // namespace ingero::app

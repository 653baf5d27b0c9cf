#include "app/check_otlp.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "serve/otlp/config.h"
#include "serve/otlp/http_post.h"
#include "store/trace_reader.h"

namespace ingero::app {

namespace otlp = serve::otlp;

void check_otlp_endpoint(const std::string& endpoint, CheckReport& rep) {
  auto c = otlp::resolve_config(endpoint, otlp::process_env());
  if (!c) {
    rep.add("otlp_endpoint", CheckStatus::kOptional, "misconfigured", c.error().message,
            "fix the value or the variable named; `ingero trace --otlp` refuses to start with it");
    return;
  }
  otlp::HttpPost http(*c);
  // An ExportMetricsServiceRequest with no resource_metrics: zero bytes of protobuf.
  otlp::PostResult r = http.post(c->url(otlp::Signal::kMetrics), "");
  const std::string& url = c->url(otlp::Signal::kMetrics);
  if (r.outcome == otlp::PostResult::Outcome::kSent) {
    rep.add("otlp_endpoint", CheckStatus::kPass, "HTTP " + std::to_string(r.status),
            url + " accepts OTLP/HTTP metrics (an empty export)", "");
    return;
  }
  std::string fix =
      r.status == 401 || r.status == 403
          ? "set the receiver's credentials in INGERO_OTLP_HEADERS or OTEL_EXPORTER_OTLP_HEADERS"
      : r.status == 404 ? "check the endpoint's path: /v1/metrics is appended to --otlp"
      : r.status == 0   ? "start the collector, or check the address, port, firewall and TLS "
                          "(OTEL_EXPORTER_OTLP_CERTIFICATE)"
                        : "see the receiver's logs";
  // What `trace` does with this answer: the post classified it as the exporter does.
  bool retried = r.outcome == otlp::PostResult::Outcome::kRetryable;
  rep.add("otlp_endpoint", CheckStatus::kOptional,
          r.status ? "HTTP " + std::to_string(r.status) : "no answer",
          url + ": " + r.error +
              (retried ? " (tracing works; the exporter retries with backoff, then drops and "
                         "counts)"
                       : " (tracing works; the exporter does not retry this answer: what it "
                         "sends is dropped and counted as rejected)"),
          fix);
}

void check_otlp_delivery(const std::string& db, bool explicit_db, CheckReport& rep) {
  struct stat st {};
  if (stat(db.c_str(), &st) != 0) {
    if (explicit_db)
      rep.add("otlp_delivery", CheckStatus::kOptional, "no trace file", db + " does not exist", "");
    return;
  }
  auto reader = store::TraceReader::open(db);
  if (!reader) {
    if (explicit_db)
      rep.add("otlp_delivery", CheckStatus::kOptional, "unreadable", reader.error().message, "");
    return;
  }
  auto& d = (*reader)->db();
  if (!d.table_exists("sessions")) return;
  auto q = d.prepare(
      "SELECT id, bpf_stats FROM sessions WHERE bpf_stats LIKE '%\"otlp_requests\"%' "
      "ORDER BY id DESC LIMIT 1");
  if (!q) return;
  auto row = q->step();
  if (!row || !*row) {
    if (explicit_db)
      rep.add("otlp_delivery", CheckStatus::kPass, "no OTLP session",
              "no session of " + db + " exported OTLP", "");
    return;
  }
  int64_t id = q->int64(0);
  auto j = nlohmann::json::parse(q->text(1), nullptr, false);
  if (j.is_discarded()) return;
  auto n = [&](const char* k) { return j.value(k, uint64_t(0)); };
  uint64_t dropped =
      n("otlp_metric_points_dropped") + n("otlp_log_records_dropped") + n("otlp_spans_dropped");
  std::string detail = "session " + std::to_string(id) + " of " + db + ": sent " +
                       std::to_string(n("otlp_metric_points_sent")) + " metric points, " +
                       std::to_string(n("otlp_log_records_sent")) + " log records, " +
                       std::to_string(n("otlp_spans_sent")) + " spans";
  if (dropped)
    detail += "; dropped " + std::to_string(n("otlp_metric_points_dropped")) + " metric points, " +
              std::to_string(n("otlp_log_records_dropped")) + " log records, " +
              std::to_string(n("otlp_spans_dropped")) + " spans (queue full " +
              std::to_string(n("otlp_dropped_queue_full")) + ", rejected " +
              std::to_string(n("otlp_dropped_rejected")) + ", retries expired " +
              std::to_string(n("otlp_dropped_expired")) + ", at exit " +
              std::to_string(n("otlp_dropped_at_exit")) + ")";
  if (n("otlp_spans_over_rate"))
    detail += "; " + std::to_string(n("otlp_spans_over_rate")) + " spans over --otlp-span-rate";
  rep.add("otlp_delivery", dropped ? CheckStatus::kOptional : CheckStatus::kPass,
          std::to_string(dropped) + " dropped", detail,
          dropped ? "check the receiver (ingero check --otlp ENDPOINT) and, for drops at exit, "
                    "raise --otlp-exit-timeout"
                  : "");
}

}  // namespace ingero::app

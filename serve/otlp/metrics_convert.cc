#include "serve/otlp/metrics_convert.h"

#include <cmath>

#include "serve/otlp/attributes.h"

namespace ingero::serve::otlp {
namespace {

namespace pm = opentelemetry::proto::metrics::v1;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

template <class Point>
void stamp(Point* p, const prometheus::ClientMetric& m, uint64_t start_ns, uint64_t now_ns) {
  p->set_start_time_unix_nano(start_ns);
  p->set_time_unix_nano(m.timestamp_ms > 0 ? uint64_t(m.timestamp_ms) * 1'000'000 : now_ns);
  for (const auto& l : m.label) add_attr(p->mutable_attributes(), l.name, l.value);
}

void add_histogram(const prometheus::ClientMetric& m, pm::HistogramDataPoint* p) {
  p->set_count(m.histogram.sample_count);
  p->set_sum(m.histogram.sample_sum);
  uint64_t below = 0;
  for (const auto& b : m.histogram.bucket) {
    if (!std::isinf(b.upper_bound)) p->add_explicit_bounds(b.upper_bound);
    uint64_t c = b.cumulative_count >= below ? b.cumulative_count - below : 0;
    p->add_bucket_counts(c);
    below = std::max(below, b.cumulative_count);
  }
  // A layout without a +Inf bucket still needs its last, open one.
  if (m.histogram.bucket.empty() || !std::isinf(m.histogram.bucket.back().upper_bound))
    p->add_bucket_counts(m.histogram.sample_count >= below ? m.histogram.sample_count - below : 0);
}

}  // namespace

std::string unit_of(std::string_view name) {
  if (ends_with(name, "_total")) name.remove_suffix(6);
  if (ends_with(name, "_seconds")) return "s";
  if (ends_with(name, "_bytes")) return "By";
  if (ends_with(name, "_ratio")) return "1";
  return "";
}

size_t add_metrics(const std::vector<prometheus::MetricFamily>& families, uint64_t start_ns,
                   uint64_t now_ns, pm::ScopeMetrics* out) {
  size_t points = 0;
  for (const auto& f : families) {
    if (f.metric.empty()) continue;
    pm::Metric* metric = out->add_metrics();
    metric->set_name(f.name);
    metric->set_description(f.help);
    metric->set_unit(unit_of(f.name));
    switch (f.type) {
      case prometheus::MetricType::Counter: {
        auto* sum = metric->mutable_sum();
        sum->set_aggregation_temporality(pm::AGGREGATION_TEMPORALITY_CUMULATIVE);
        sum->set_is_monotonic(true);
        for (const auto& m : f.metric) {
          auto* p = sum->add_data_points();
          stamp(p, m, start_ns, now_ns);
          p->set_as_double(m.counter.value);
        }
        break;
      }
      case prometheus::MetricType::Gauge:
      case prometheus::MetricType::Untyped: {
        auto* gauge = metric->mutable_gauge();
        for (const auto& m : f.metric) {
          auto* p = gauge->add_data_points();
          stamp(p, m, start_ns, now_ns);
          p->set_as_double(f.type == prometheus::MetricType::Gauge ? m.gauge.value
                                                                   : m.untyped.value);
        }
        break;
      }
      case prometheus::MetricType::Histogram: {
        auto* h = metric->mutable_histogram();
        h->set_aggregation_temporality(pm::AGGREGATION_TEMPORALITY_CUMULATIVE);
        for (const auto& m : f.metric) {
          auto* p = h->add_data_points();
          stamp(p, m, start_ns, now_ns);
          add_histogram(m, p);
        }
        break;
      }
      case prometheus::MetricType::Summary: {
        auto* s = metric->mutable_summary();
        for (const auto& m : f.metric) {
          auto* p = s->add_data_points();
          stamp(p, m, start_ns, now_ns);
          p->set_count(m.summary.sample_count);
          p->set_sum(m.summary.sample_sum);
          for (const auto& q : m.summary.quantile) {
            auto* v = p->add_quantile_values();
            v->set_quantile(q.quantile);
            v->set_value(q.value);
          }
        }
        break;
      }
    }
    points += f.metric.size();
  }
  return points;
}

}  // namespace ingero::serve::otlp

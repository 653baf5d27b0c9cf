// prometheus-cpp's registry as OTLP metrics: what `--prometheus` serves at /metrics, family by
// family, with the same names, help, labels and values. Pure.
//
//   Prometheus                  OTLP
//   counter                     Sum, monotonic, cumulative (as_double)
//   gauge, untyped              Gauge (as_double)
//   histogram                   Histogram, cumulative, explicit bounds: the buckets' upper
//                               bounds but +Inf; per-bucket counts (Prometheus's are cumulative)
//   summary                     Summary (count, sum, quantiles)
// Labels become string attributes. The unit comes from the name's Prometheus unit suffix:
// _seconds[_total] -> "s", _bytes[_total] -> "By", _ratio -> "1"; otherwise none.
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "opentelemetry/proto/metrics/v1/metrics.pb.h"

namespace ingero::serve::otlp {

std::string unit_of(std::string_view prometheus_name);

// Appends one Metric per family that has series to `out`; every point carries
// start_time_unix_nano = start_ns (when the counters began: the trace's start) and
// time_unix_nano = now_ns. Returns the number of data points.
size_t add_metrics(const std::vector<prometheus::MetricFamily>& families, uint64_t start_ns,
                   uint64_t now_ns, opentelemetry::proto::metrics::v1::ScopeMetrics* out);

}  // namespace ingero::serve::otlp

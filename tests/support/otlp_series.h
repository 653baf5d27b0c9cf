// Comparing OTLP metrics with the Prometheus exposition they come from: both as
// "name{label="value",...}" -> value, labels sorted, histograms as Prometheus writes them
// (cumulative _bucket{le=...}, _sum, _count).
#pragma once

#include <map>
#include <string>

#include "opentelemetry/proto/metrics/v1/metrics.pb.h"

namespace ingero::test {

// Every sample line of a text exposition (comments skipped).
std::map<std::string, double> exposition_series(const std::string& text);
// The series of OTLP metrics. /metrics prints values with 16 significant digits
// (prometheus-cpp); OTLP carries the whole double: each value is rounded as /metrics prints
// it, so "equal" means "/metrics shows the same number".
std::map<std::string, double> otlp_series(
    const opentelemetry::proto::metrics::v1::ScopeMetrics& sm);
// "" when equal; otherwise one line per series missing, extra or different.
std::string series_diff(const std::map<std::string, double>& got,
                        const std::map<std::string, double>& want);
// Only the series whose name starts with `prefix`.
std::map<std::string, double> with_prefix(const std::map<std::string, double>& s,
                                          const std::string& prefix);

}  // namespace ingero::test

// `ingero trace --otlp ENDPOINT`: the tracer's few calls into the OTLP exporter
// (serve/otlp/exporter.h), kept here so the tracer only resolves, starts and finishes it.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "app/tracer.h"
#include "serve/otlp/exporter.h"

namespace ingero::app {

// At exit, delivery ends by this deadline after the tracer starts to stop it (--otlp-exit-
// timeout): what is still unsent then is dropped and counted, so a stalled collector cannot
// hold the exit past systemd's TimeoutStopSec=30.
inline constexpr double kDefaultOtlpExitSeconds = 10;

// --otlp and the OTel environment (serve/otlp/config.h); on a bad value prints why ("ingero
// trace: ...") and returns nullopt: a usage error, before anything is attached.
std::optional<serve::otlp::ExporterConfig> resolve_otlp(const TraceOptions& o);

struct OtlpSession {
  std::string host, node;
  int64_t started_at_ns = 0, mono_offset_ns = 0;
};
// Starts the exporter; on a bad OTEL_RESOURCE_ATTRIBUTES prints why and returns null.
std::unique_ptr<serve::otlp::Exporter> make_otlp_exporter(
    const TraceOptions& o, serve::otlp::ExporterConfig config, const OtlpSession& s,
    std::shared_ptr<prometheus::Collectable> registry);

// The exporter's counters for the session row's bpf_stats (otlp_* keys, docs/schema.md).
void add_otlp_stats(nlohmann::json& stats, const serve::otlp::ExporterStats& s);
// After finish(): one line of what was sent and dropped; the drops even with -q.
void print_otlp_summary(std::ostream& out, const serve::otlp::Exporter& e, bool quiet);

}  // namespace ingero::app

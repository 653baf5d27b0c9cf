// The engine's results as JSON: one shape for `explain --json`, the MCP tools and the report.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/analysis.h"
#include "engine/tenants.h"

namespace ingero::engine {

struct ReportHeader {
  std::string title;     // e.g. the trace path
  std::string subtitle;  // e.g. "ingero-go schema 0.8 (read-only)" or "SYNTHETIC DEMO DATA"
  bool per_process = false;
  // `explain --group-by`: the text report gets a TENANTS section, grouped so; the JSON always has
  // `tenants` (by pod unless this says otherwise).
  std::optional<TenantGrouping> group_by;
  // `explain --all-chains`: the text report prints every chain in full; by default the tails
  // with no host-side cause (no_host_cause) are folded into one line. The JSON always has all.
  bool all_chains = false;
};

// A process's step summary (median, shares of wait/enqueue/api/host, GPU idle, the gap's cause
// and where): one shape for explain --json, MCP get_step_breakdown and the HTML report.
// The off-CPU intervals not kept (HostContext::offcpu_dropped): count, kept_from_ns /
// kept_until_ns; null when none were dropped.
nlohmann::json offcpu_not_kept_json(const HostContext& h);

nlohmann::json step_summary_json(const StepSummary& s);
// One step: start, duration, the exclusive host breakdown, GPU idle, the host gap by cause,
// and its calls.
nlohmann::json step_json(const Step& s);
// One GPU process: pid, name, cadence (how steps were found, or why none) and summary.
nlohmann::json step_series_json(const StepSeries& s, const std::string& name);
// step_series_json for every GPU process of the analysis.
nlohmann::json steps_overview_json(const Analysis& a);

// One process's kernels (engine/kernels.h): counts, per-step figures and the launching line of
// its first `limit` kernels (most launched first).
nlohmann::json process_kernels_json(const ProcessKernels& p, const std::string& name,
                                    size_t limit = 50);
// Its steps with their kernels: [{step, start_ns, dur_ns, warmup, kernels: [{name, launches}]}]
// for the steps at `steps` (indexes into s.steps).
nlohmann::json kernel_steps_json(const ProcessKernels& p, const StepSeries& s,
                                 const std::vector<size_t>& steps);
// The report's "kernels" object: what could not be named, and every process's kernels.
nlohmann::json kernels_json(const Analysis& a, size_t limit = 50);

// Losses as the session rows counted them: calls_lost, per-kind drops (schema v5 files),
// lower_bounds (true when calls are missing) and the report's one-line summary.
nlohmann::json losses_json(const TraceLosses& l);
nlohmann::json report_json(const Analysis& a, const ReportHeader& o);
// The per-tenant view: grouping, whether names were known, tenants (GPU API time, preempted
// time, time taken from others) and the cross-tenant preemptions (victim, by, ns, count, the
// task that took most).
nlohmann::json tenants_json(const TenantReport& r);
nlohmann::json chain_json(const Chain& c);
nlohmann::json op_stats_json(const OpStats& s);
// A process of the per-process breakdown, without its ops (each caller lists those its way).
nlohmann::json process_json(const ProcessReport& p);

}  // namespace ingero::engine

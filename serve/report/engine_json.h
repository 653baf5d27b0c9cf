// The engine's results in the report model: step series (columnar, averaged in groups when
// long), causal chains, collectives per rank, and the per-process host activity.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/analysis.h"
#include "engine/tenants.h"

namespace ingero::serve::report {

// One process's steps. Times are seconds since `t0_ns` (the report's start), durations in µs;
// at most `max_points` points: beyond, consecutive steps are averaged in equal groups
// (`group` says how many per point; a group is warm-up if any of its steps is).
nlohmann::json step_series_json(const engine::StepSeries& s, const std::string& node,
                                const std::string& name, int64_t t0_ns, size_t max_points);

// One process's kernels (engine/kernels.h): its kernels table (at most `max_rows`, most
// launched first) and, when it has steps, its launches per step by kernel, columnar as the
// step series (`points.t`, `points.warmup`, one `series` per kernel with a per-step count and
// `other` for the rest), averaged in the same groups.
nlohmann::json kernel_series_json(const engine::ProcessKernels& k, const engine::StepSeries* s,
                                  const std::string& node, const std::string& name, int64_t t0_ns,
                                  size_t max_points, size_t max_rows);

nlohmann::json chain_json(const engine::Chain& c, const std::string& node);

// Per (communicator, op): each rank's calls, bytes, lag behind the first arrival (median),
// the wait it imposed on the others and its barrier wait; at most `max_ranks` ranks each.
nlohmann::json collectives_json(const engine::CollectiveReport& r, const std::string& node,
                                size_t max_ranks);

// Host activity of one process as the engine summarised it (role, off-CPU, switches, ...).
nlohmann::json process_activity_json(const engine::ProcessReport& p);
// The tenants section: {named, rows[] (node, name, kind, gpu_pids, calls, api_ns, preempted_ns,
// preempted_by_others_ns, preempting_ns), preemptions[] (node, victim, by, ns, count, top_pid,
// top_comm)}, from each node's analysis.
nlohmann::json tenants_json(
    const std::vector<std::pair<std::string, engine::TenantReport>>& per_node);

}  // namespace ingero::serve::report

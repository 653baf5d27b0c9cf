// The engine's results in the report model. Each is the engine's one JSON shape
// (engine/result_json.h: what explain --json and the MCP tools give) with the node added, and,
// for the report's charts, columnar per-step points (averaged in groups when long); the
// collectives per rank are the report's own table.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/analysis.h"
#include "engine/tenants.h"

namespace ingero::serve::report {

// One process's steps: engine::step_series_json, with node, steps (their count), group and
// points. Times are seconds since `t0_ns` (the report's start), durations in µs; at most
// `max_points` points: beyond, consecutive steps are averaged in equal groups (`group` says how
// many per point; a group is warm-up if any of its steps is).
nlohmann::json step_series_json(const engine::StepSeries& s, const std::string& node,
                                const std::string& name, int64_t t0_ns, size_t max_points);

// One process's kernels: engine::process_kernels_json (at most `max_rows` kernels, most
// launched first), with node and, when it has steps, its launches per step by kernel, columnar
// as the step series (`points.t`, `points.warmup`, one `series` per kernel with a per-step
// count and `other` for the rest), averaged in the same groups.
nlohmann::json kernel_series_json(const engine::ProcessKernels& k, const engine::StepSeries* s,
                                  const std::string& node, const std::string& name, int64_t t0_ns,
                                  size_t max_points, size_t max_rows);

nlohmann::json chain_json(const engine::Chain& c, const std::string& node);

// Per (communicator, op): each rank's calls, bytes, lag behind the first arrival (median),
// the wait it imposed on the others and its barrier wait; at most `max_ranks` ranks each.
nlohmann::json collectives_json(const engine::CollectiveReport& r, const std::string& node,
                                size_t max_ranks);

// One process as the engine summarised it (engine::process_json: role, off-CPU, switches,
// tenant, ...), with its node.
nlohmann::json process_json(const engine::ProcessReport& p, const std::string& node);
// The tenants section: {named, rows[], preemptions[]}: each node's engine::tenants_json
// tenants and preemptions, with their node.
nlohmann::json tenants_json(
    const std::vector<std::pair<std::string, engine::TenantReport>>& per_node);

}  // namespace ingero::serve::report

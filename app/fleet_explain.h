// `ingero explain` over several nodes: a merged trace file, or a ClickHouse fleet database
// (--source clickhouse://...). Clock offsets are estimated first (engine/fleet.h), then every
// node is analysed on its own (pids collide across nodes) and the fleet rules run across them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/fleet.h"
#include "engine/tenants.h"
#include "store/sql_trace_source.h"

namespace ingero::app {

struct FleetExplainOptions {
  std::string title;               // the file or the URL
  std::string subtitle;            // e.g. the legacy format
  std::vector<std::string> nodes;  // the nodes to analyse (at least one)
  std::string only_node;           // nodes == {""}: the one node the trace holds, if named
  engine::Window window;
  bool per_process = false, json = false;
  bool all_chains = false;                         // --all-chains: no folded tails
  std::optional<engine::TenantGrouping> group_by;  // --group-by: the TENANTS section
  // The source applies clock offsets itself (ClickHouse): called with them once estimated.
  // Unset: the engine applies them (merged files).
  std::function<void(const engine::ClockShift&)> apply_offsets;
  // The nodes' clocks, estimated and applied by the caller before it resolved `window` on the
  // reference clock (ClickHouse); unset: estimated here, over `window`.
  std::optional<std::vector<engine::NodeClock>> clocks;
  // Limits every read to one node (nullopt: all); unset for sources that need no scope.
  std::function<void(const std::optional<std::string>&)> scope;
  // The first read error, checked after each analysis ("" when none).
  std::function<std::string()> error;
};

// Prints the report(s); returns the exit code.
int explain_nodes(engine::TraceSource& source, const FleetExplainOptions& o, std::ostream& out);

void print_fleet(std::ostream& out, const engine::FleetAnalysis& f);
nlohmann::json fleet_json(const engine::FleetAnalysis& f);

}  // namespace ingero::app

#include "app/fleet_explain.h"

#include <cstdio>
#include <iostream>

#include "app/commands.h"
#include "app/explain_report.h"

namespace ingero::app {
namespace {

std::string offset_text(const engine::NodeClock& c) {
  char b[96];
  std::snprintf(b, sizeof(b), "%+.3f ms \u00b1 %.3f ms", double(c.offset_ns) / 1e6,
                double(c.error_ns) / 1e6);
  return b;
}

engine::Window shifted(engine::Window w, int64_t by) {
  if (w.from_ns != std::numeric_limits<int64_t>::min()) w.from_ns += by;
  if (w.to_ns != std::numeric_limits<int64_t>::max()) w.to_ns += by;
  return w;
}

}  // namespace

void print_fleet(std::ostream& out, const engine::FleetAnalysis& f) {
  out << "INGERO FLEET REPORT \u2014 " << f.nodes.size() << " nodes, " << f.cross_node_communicators
      << " communicator" << (f.cross_node_communicators == 1 ? "" : "s")
      << " spanning nodes\n\nClocks (offset of each node from the reference, removed from every "
         "timestamp below):\n";
  for (const auto& c : f.clocks) {
    out << "  " << c.node << (c.reference ? " (reference)" : "") << ": ";
    if (c.method == "collective completion")
      out << offset_text(c) << " from " << engine::format_count(c.samples) << " collectives\n";
    else
      out << c.method << "\n";
  }
  size_t high = 0;
  for (const auto& c : f.chains) high += c.severity == engine::Severity::kHigh;
  out << "\nACROSS NODES \u2014 " << f.chains.size() << " chain"
      << (f.chains.size() == 1 ? "" : "s") << " (" << high << " HIGH)\n";
  if (f.chains.empty()) out << "  No cross-node finding in this window.\n";
  for (const auto& c : f.chains) {
    print_chain(out, c);
    if (c.window_start)
      out << "  Window: " << format_wall(c.window_start) << " \u2192 " << format_wall(c.window_end)
          << " (reference clock)\n";
  }
}

nlohmann::json fleet_json(const engine::FleetAnalysis& f) {
  nlohmann::json j;
  j["nodes"] = f.nodes;
  j["communicators"] = f.communicators;
  j["cross_node_communicators"] = f.cross_node_communicators;
  j["clocks"] = nlohmann::json::array();
  for (const auto& c : f.clocks)
    j["clocks"].push_back({{"node", c.node},
                           {"offset_ns", c.offset_ns},
                           {"error_ns", c.error_ns},
                           {"samples", c.samples},
                           {"reference", c.reference},
                           {"method", c.method}});
  j["profiles"] = nlohmann::json::array();
  for (const auto& p : f.profiles)
    j["profiles"].push_back({{"node", p.node},
                             {"step_ns", p.step_ns},
                             {"launch_rate", p.launch_rate},
                             {"gpu_processes", p.gpu_processes}});
  j["chains"] = nlohmann::json::array();
  for (const auto& c : f.chains) j["chains"].push_back(chain_json(c));
  return j;
}

int explain_nodes(engine::TraceSource& source, const FleetExplainOptions& o, std::ostream& out) {
  auto failed = [&](const char* what) {
    std::string e = o.error ? o.error() : "";
    if (e.empty()) return false;
    std::cerr << "ingero explain: " << what << " " << o.title << ": " << e << "\n";
    return true;
  };
  const bool fleet = o.nodes.size() >= 2;
  std::vector<engine::NodeClock> clocks;
  engine::ClockShift shift;  // applied by the engine (sources that do not apply offsets)
  if (fleet) {
    clocks = engine::estimate_clock_offsets(
        engine::gather_fleet_collectives(source, o.window, o.nodes), o.nodes);
    if (failed("reading")) return kExitFailure;
    if (o.apply_offsets)
      o.apply_offsets(engine::clock_shift(clocks));
    else
      shift = engine::clock_shift(clocks);
  }
  std::vector<engine::Analysis> analyses;
  analyses.reserve(o.nodes.size());
  for (const std::string& node : o.nodes) {
    if (o.scope) o.scope(node.empty() ? std::nullopt : std::optional<std::string>(node));
    engine::Window nw = shifted(o.window, shift.count(node) ? shift.at(node) : 0);
    if (!node.empty()) nw.node = node;
    analyses.push_back(engine::analyze(source, nw));
    if (failed("reading")) return kExitFailure;
  }
  if (o.scope) o.scope(std::nullopt);
  std::optional<engine::FleetAnalysis> f;
  if (fleet) {
    std::map<std::string, const engine::Analysis*> per_node;
    for (size_t i = 0; i < o.nodes.size(); ++i) per_node[o.nodes[i]] = &analyses[i];
    f = engine::analyze_fleet(source, o.window, o.nodes, per_node, clocks, shift);
    if (failed("reading")) return kExitFailure;
  }
  nlohmann::json all = nlohmann::json::array();
  if (f && !o.json) print_fleet(out, *f);
  for (size_t i = 0; i < o.nodes.size(); ++i) {
    const std::string& node = o.nodes[i];
    ReportOptions ro{node.empty() ? o.title : o.title + " [node " + node + "]", o.subtitle,
                     o.per_process};
    if (o.json) {
      auto j = report_json(analyses[i], ro);
      if (!node.empty()) j["node"] = node;
      all.push_back(std::move(j));
    } else {
      if (i || f) out << "\n";
      print_report(out, analyses[i], ro);
    }
  }
  if (o.json) {
    nlohmann::json j = all.size() == 1 && !f ? all[0] : nlohmann::json{{"nodes", all}};
    if (f) j["fleet"] = fleet_json(*f);
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return kExitOk;
}

}  // namespace ingero::app

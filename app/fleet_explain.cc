#include "app/fleet_explain.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <vector>

#include "app/commands.h"
#include "app/explain_report.h"
#include "app/read_error.h"
#include "engine/result_json.h"

namespace ingero::app {

namespace {

// explain --json has one shape whatever the number of nodes: the top level always holds the
// whole trace's events, window, losses, stats, host, steps and chains (rows tagged with their
// node when there are several), and `nodes` lists each node with its events, window and
// losses. The caller sets the whole trace's losses where there are several nodes.
nlohmann::json one_shape(const nlohmann::json& per_node, const std::string& title,
                         const std::vector<std::string>& names) {
  size_t at = 0;
  auto node_entry = [&](const nlohmann::json& r) {
    std::string name = at < names.size() ? names[at] : r.value("node", "");
    ++at;
    nlohmann::json n{{"node", name}, {"events", r["events"]}, {"window", r["window"]}};
    if (r.contains("losses")) n["losses"] = r["losses"];
    if (r.contains("quantiles")) n["quantiles"] = r["quantiles"];
    return n;
  };
  if (per_node.empty()) return nlohmann::json::object();
  if (per_node.size() == 1) {
    nlohmann::json j = per_node[0];
    j["nodes"] = nlohmann::json::array({node_entry(j)});
    return j;
  }
  nlohmann::json j = {{"trace", title},
                      {"events", 0},
                      {"stats", nlohmann::json::array()},
                      {"host", nlohmann::json::object()},
                      {"steps", nlohmann::json::array()},
                      {"chains", nlohmann::json::array()},
                      {"nodes", nlohmann::json::array()}};
  int64_t start = 0, end = 0;
  uint64_t events = 0;
  for (const auto& r : per_node) {
    std::string node = r.value("node", "");
    events += r["events"].get<uint64_t>();
    int64_t s = r["window"]["start_ns"], e = r["window"]["end_ns"];
    if (s && (!start || s < start)) start = s;
    end = std::max(end, e);
    for (const char* list : {"stats", "steps", "chains"})
      for (auto row : r.value(list, nlohmann::json::array())) {
        row["node"] = node;
        j[list].push_back(std::move(row));
      }
    for (const auto& [name, h] : r["host"].items()) {
      auto& m = j["host"][name];
      if (m.is_null()) m = nlohmann::json::object();
      uint64_t n0 = m.value("count", uint64_t(0)), n1 = h["count"];
      uint64_t a0 = m.value("avg_ns", uint64_t(0)), a1 = h["avg_ns"];
      m["count"] = n0 + n1;
      m["avg_ns"] = n0 + n1 ? (a0 * n0 + a1 * n1) / (n0 + n1) : 0;
      m["max_ns"] = std::max(m.value("max_ns", uint64_t(0)), h["max_ns"].get<uint64_t>());
    }
    j["nodes"].push_back(node_entry(r));
  }
  // Tenants live on one node: each node's rows, tagged with it.
  nlohmann::json tenants = {{"grouping", per_node[0]["tenants"]["grouping"]},
                            {"named", false},
                            {"tenants", nlohmann::json::array()},
                            {"tenants_omitted", 0},
                            {"preemptions", nlohmann::json::array()},
                            {"preemptions_omitted", 0}};
  for (const auto& r : per_node) {
    const auto& t = r["tenants"];
    std::string node = r.value("node", "");
    tenants["named"] = tenants["named"].get<bool>() || t["named"].get<bool>();
    for (const char* list : {"tenants", "preemptions"})
      for (auto row : t[list]) {
        row["node"] = node;
        tenants[list].push_back(std::move(row));
      }
    for (const char* n : {"tenants_omitted", "preemptions_omitted"})
      tenants[n] = tenants[n].get<uint64_t>() + t[n].get<uint64_t>();
  }
  j["tenants"] = std::move(tenants);
  if (per_node[0].contains("note")) j["note"] = per_node[0]["note"];  // the file's, not a node's
  j["events"] = events;
  // Sketches where any node's come from them.
  j["quantiles"] = "exact";
  for (const auto& r : per_node)
    if (r.value("quantiles", "exact") != "exact") j["quantiles"] = r["quantiles"];
  j["window"] = {{"start_ns", start},
                 {"end_ns", end},
                 {"seconds", end > start ? double(end - start) / 1e9 : 0.0}};
  return j;
}

}  // namespace
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
  auto failed = [&] {
    std::string e = o.error ? o.error() : "";
    if (e.empty()) return false;
    std::cerr << "ingero explain: " << reading_error(o.title, e) << "\n";
    return true;
  };

  const bool fleet = o.nodes.size() >= 2;
  std::vector<engine::NodeClock> clocks;
  engine::ClockShift shift;  // applied by the engine (sources that do not apply offsets)
  if (fleet && o.clocks) {
    clocks = *o.clocks;
  } else if (fleet) {
    clocks = engine::estimate_clock_offsets(
        engine::gather_fleet_collectives(source, o.window, o.nodes), o.nodes);
    if (failed()) return kExitFailure;
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
    if (failed()) return kExitFailure;
  }
  if (o.scope) o.scope(std::nullopt);
  std::optional<engine::FleetAnalysis> f;
  if (fleet) {
    std::map<std::string, const engine::Analysis*> per_node;
    for (size_t i = 0; i < o.nodes.size(); ++i) per_node[o.nodes[i]] = &analyses[i];
    f = engine::analyze_fleet(source, o.window, o.nodes, per_node, clocks, shift);
    if (failed()) return kExitFailure;
  }
  nlohmann::json all = nlohmann::json::array();
  if (f && !o.json) print_fleet(out, *f);
  for (size_t i = 0; i < o.nodes.size(); ++i) {
    const std::string& node = o.nodes[i];
    ReportOptions ro{node.empty() ? o.title : o.title + " [node " + node + "]", o.subtitle,
                     o.per_process, o.group_by, o.all_chains};
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
    // A one-node file is analysed without a node filter; nodes[] still names its node.
    std::vector<std::string> names = o.nodes;
    if (names.size() == 1 && names[0].empty()) names[0] = o.only_node;
    nlohmann::json j = one_shape(all, o.title, names);
    if (names.size() > 1)  // every node's sessions (a scoped source was reset above)
      if (auto l = source.losses()) j["losses"] = engine::losses_json(*l);
    if (f) j["fleet"] = fleet_json(*f);
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return kExitOk;
}

}  // namespace ingero::app

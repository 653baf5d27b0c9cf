// MCP tools for the causal chains: the engine's chains of the open trace, and of a synthetic
// demo incident.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>

#include "engine/analysis.h"
#include "engine/fleet.h"
#include "engine/loss_notes.h"
#include "engine/result_json.h"
#include "serve/mcp/tool_support.h"
#include "store/trace_writer.h"

namespace ingero::serve::mcp {
namespace {

Json compact_chain(const engine::Chain& c, bool verbose) {
  Json j = chain_json(c);
  if (!verbose) {
    j.erase("explanation");
    if (j["timeline"].size() > 8) {
      Json tl = Json::array();
      for (size_t i = 0; i < 8; ++i) tl.push_back(j["timeline"][i]);
      j["timeline_omitted"] = j["timeline"].size() - 8;
      j["timeline"] = tl;
    }
  }
  return j;
}

// The chains of one window, with its extent and event count.
struct Found {
  std::vector<engine::Chain> chains;
  std::pair<int64_t, int64_t> span;
  uint64_t events = 0;
  // Off-CPU intervals not kept, which the chains are attributed without: a line each (by node
  // over a fleet), and as JSON (an object by node over a fleet); none when all were kept.
  std::vector<std::string> not_kept_lines;
  Json not_kept;
};

Found one_source(engine::Analysis a) {
  Found f{std::move(a.chains), a.span, a.events, {}, nullptr};
  if (a.host.offcpu_dropped) {
    f.not_kept_lines.push_back(engine::offcpu_kept_line(a.host));
    f.not_kept = engine::offcpu_not_kept_json(a.host);
  }
  return f;
}

// Over a fleet database, as `explain --source` reads it (app/fleet_explain.h): clock offsets
// from the collectives first, then each node analysed on its own (pids collide across nodes),
// then the fleet rules across them (stragglers, mismatched collectives, collective hangs).
// Each node's chains carry their node; the fleet's come first.
Found fleet_chains(FleetSource& f, engine::Window w, const engine::EngineOptions& eo) {
  Found out;
  std::vector<std::string> nodes = f.nodes();
  if (w.to_ns == std::numeric_limits<int64_t>::max()) w.to_ns = f.source().time_span().second;
  std::vector<engine::NodeClock> clocks;
  if (nodes.size() >= 2) {
    clocks = engine::estimate_clock_offsets(engine::gather_fleet_collectives(f.source(), w, nodes),
                                            nodes);
    f.set_clock_offsets(engine::clock_shift(clocks));
  }
  std::vector<engine::Analysis> per;
  per.reserve(nodes.size());
  for (const auto& n : nodes) {
    f.set_scope(n);
    engine::Window nw = w;
    nw.node = n;
    per.push_back(engine::analyze(f.source(), nw, eo));
    for (auto& c : per.back().chains)
      if (c.node.empty()) c.node = n;
  }
  f.set_scope(std::nullopt);
  if (nodes.size() >= 2) {
    std::map<std::string, const engine::Analysis*> by_node;
    for (size_t i = 0; i < nodes.size(); ++i) by_node[nodes[i]] = &per[i];
    auto fa = engine::analyze_fleet(f.source(), w, nodes, by_node, clocks);
    out.chains = std::move(fa.chains);
  }
  out.span = {0, 0};
  for (size_t i = 0; i < per.size(); ++i) {
    engine::Analysis& a = per[i];
    if (a.host.offcpu_dropped) {
      out.not_kept_lines.push_back("node " + nodes[i] + ": " + engine::offcpu_kept_line(a.host));
      out.not_kept[nodes[i]] = engine::offcpu_not_kept_json(a.host);
    }
    out.events += a.events;
    if (a.span.first && (!out.span.first || a.span.first < out.span.first))
      out.span.first = a.span.first;
    out.span.second = std::max(out.span.second, a.span.second);
    for (auto& c : a.chains) out.chains.push_back(std::move(c));
  }
  return out;
}

ToolOutput get_causal_chains(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto w = window_of(call.args, *op->source);
  if (!w) return error_output(w.error().message);
  engine::EngineOptions eo;
  eo.breakdown = false;
  Found a = op->fleet && !w->node ? fleet_chains(*op->fleet, *w, eo)
                                  : one_source(engine::analyze(*op->source, *w, eo));
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  std::string sev = arg_str(call.args, "severity");
  int min_sev = sev == "HIGH" ? 2 : sev == "MEDIUM" ? 1 : 0;
  size_t limit = size_t(arg_int(call.args, "limit", 10));
  bool verbose = call.args.value("verbose", false);
  Json chains = Json::array();
  std::map<std::string, uint64_t> by_sev;
  std::ostringstream t;
  size_t shown = 0, matching = 0;
  for (const auto& c : a.chains) {
    if (int(c.severity) < min_sev) continue;
    if (w->pid && std::find(c.pids.begin(), c.pids.end(), *w->pid) == c.pids.end() &&
        !c.pids.empty())
      continue;
    ++matching;
    ++by_sev[engine::severity_name(c.severity)];
    if (shown >= limit) continue;
    ++shown;
    chains.push_back(compact_chain(c, verbose));
    t << "[" << engine::severity_name(c.severity) << "] " << ident(c.rule) << " " << ident(c.id)
      << "\n"
      << "  summary: " << as_data(c.summary, 400) << "\n"
      << "  root cause: " << as_data(c.root_cause, 400) << "\n";
    size_t n = 0;
    for (const auto& e : c.timeline) {
      if (!verbose && n++ >= 8) break;
      t << "  [" << ident(e.layer) << "] " << ident(e.op) << ": " << as_data(e.detail, 300) << "\n";
    }
    for (const auto& f : c.fixes) t << "  fix: " << as_data(f, 300) << "\n";
  }
  std::string head = format_count(matching) + " causal chain" + (matching == 1 ? "" : "s");
  if (matching) {
    head += " (";
    bool first = true;
    for (const char* s : {"HIGH", "MEDIUM", "LOW"})
      if (by_sev.count(s))
        head += std::string(first ? "" : ", ") + std::to_string(by_sev[s]) + " " + s, first = false;
    head += ")";
  }
  head += " in " + window_line(*w, a.span, a.events);
  if (matching > shown) head += "; showing " + std::to_string(shown) + " (raise limit)";
  if (!matching)
    head +=
        "\nno causal chains: nothing in this window crossed the engine's thresholds "
        "(docs/engine.md)";
  for (const auto& l : a.not_kept_lines) head += "\n" + l;
  ToolOutput o;
  o.text = head + "\n" + t.str();
  o.structured = {{"window", window_json(*w, a.span)},
                  {"total", matching},
                  {"shown", shown},
                  {"chains", chains}};
  if (!a.not_kept.is_null()) o.structured["offcpu_intervals_not_kept"] = a.not_kept;
  return o;
}

ToolOutput run_demo(ToolContext& ctx, const ToolCall& call) {
  std::string scenario = arg_str(call.args, "scenario");
  std::string desc;
  for (const auto& s : ctx.host().demos)
    if (s.name == scenario) desc = s.description;
  char dir[] = "/tmp/ingero-mcp-demo-XXXXXX";
  if (!mkdtemp(dir)) return error_output("cannot create a temporary directory for the demo trace");
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};
  std::string db = std::string(dir) + "/demo.db";
  {
    auto w = store::TraceWriter::open(db, ctx.host().views);
    if (!w) return error_output(w.error().message);
    if (auto st = ctx.host().write_demo(scenario, **w); !st)
      return error_output(st.error().message);
  }
  auto reader = store::TraceReader::open(db, ctx.host().views, ctx.host().error_codes);
  if (!reader) return error_output(reader.error().message);
  store::SqlTraceSource src(**reader);
  engine::Window w;
  auto a = engine::analyze(src, w, {});
  std::ostringstream t;
  t << "SYNTHETIC DEMO DATA (scenario " << scenario << ": " << desc << ")\n"
    << window_line(w, a.span, a.events) << "\n";
  Json stats = Json::array();
  std::vector<const engine::OpStats*> ops;
  for (const auto& s : a.stats.overall) ops.push_back(&s);
  std::sort(ops.begin(), ops.end(), [](auto* x, auto* y) { return x->sum_ns > y->sum_ns; });
  if (ops.size() > 10) ops.resize(10);
  for (const auto* s : ops) {
    stats.push_back(op_stats_json(*s));
    t << "  " << format_count(s->count) << " " << ident(s->key.op) << " p50 " << dur(s->p50)
      << " p99 " << dur(s->p99) << "\n";
  }
  Json chains = Json::array();
  for (const auto& c : a.chains) {
    chains.push_back(compact_chain(c, false));
    t << "[" << engine::severity_name(c.severity) << "] " << as_data(c.summary, 400)
      << "\n  root cause: " << as_data(c.root_cause, 400) << "\n";
  }
  ToolOutput o;
  o.text = t.str();
  o.structured = {{"scenario", scenario}, {"description", desc}, {"synthetic", true},
                  {"events", a.events},   {"stats", stats},      {"chains", chains}};
  return o;
}

}  // namespace

void add_chain_tools(std::vector<Tool>& t, const ToolHost& host) {
  std::vector<std::string> scenarios;
  for (const auto& d : host.demos) scenarios.push_back(d.name);
  t.push_back(
      {"get_causal_chains", "Causal chains (why it was slow)",
       "The engine's causal chains: a symptom on a GPU call path (tail latency, launch collapse, "
       "repeated "
       "syncs, graph re-capture, collective straggler, OOM, fabric errors) joined with host "
       "evidence "
       "(preemptions and who preempted, memory pressure, block I/O, TCP), a root cause and fixes. "
       "HIGH "
       "first. Quote numbers from here; do not infer new ones." +
           kDataNote,
       object_schema(with_window(
           {{"pid", pid_prop()},
            {"severity",
             {{"type", "string"},
              {"enum", {"HIGH", "MEDIUM", "LOW"}},
              {"description", "Minimum severity"}}},
            {"limit", limit_prop(10, 50, "chains")},
            {"verbose", {{"type", "boolean"}, {"description", "Full timeline and explanation"}}}})),
       out_schema({{"window", kObj}, {"total", kInt}, {"shown", kInt}, {"chains", kArr}},
                  {"window", "total", "chains"}),
       get_causal_chains, /*cacheable=*/true});
  if (!host.write_demo) return;
  t.push_back(
      {"run_demo", "Synthetic demo incident",
       "Builds a synthetic trace of a known incident in a temporary file (the open trace is not "
       "touched) "
       "and returns the engine's statistics and chains for it. The data is SYNTHETIC: use it to "
       "learn the "
       "output shapes, never as evidence about the real trace.",
       object_schema({{"scenario", {{"type", "string"}, {"enum", scenarios}}}}, {"scenario"}),
       out_schema({{"scenario", kStr}, {"synthetic", kBool}, {"stats", kArr}, {"chains", kArr}},
                  {"scenario", "synthetic", "stats", "chains"}),
       run_demo});
}

}  // namespace ingero::serve::mcp

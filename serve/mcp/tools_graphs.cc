// MCP tools for CUDA/HIP graphs: lifecycle and launch frequency.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "engine/graphs.h"
#include "serve/mcp/tool_support.h"

namespace ingero::serve::mcp {
namespace {

ToolOutput graph_lifecycle(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto w = window_of(call.args, *op->source);
  if (!w) return error_output(w.error().message);
  auto rep = engine::compute_graphs(*op->source, *w);
  size_t limit = size_t(arg_int(call.args, "limit", 20));
  std::ostringstream t;
  Json procs = Json::array(), execs = Json::array();
  if (!rep.any()) t << "no CUDA/HIP graph calls in this window\n";
  auto names = op->source->processes();
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  for (const auto& [pid, p] : rep.processes) {
    std::string name = names.count(pid) ? names[pid].name : "";
    procs.push_back({{"pid", pid},
                     {"name", name},
                     {"captures", p.captures},
                     {"failed_captures", p.failed_captures},
                     {"instantiations", p.instantiations},
                     {"failed_instantiations", p.failed_instantiations},
                     {"launches", p.launches},
                     {"failed_launches", p.failed_launches},
                     {"captures_after_first_launch", p.captures_after_first_launch},
                     {"instantiations_after_first_launch", p.instantiations_after_first_launch},
                     {"launches_of_unknown_graphs", p.launches_unknown_exec}});
    t << "pid " << pid << " " << as_data(name) << ": " << p.captures << " captures, "
      << p.instantiations << " instantiations, " << format_count(p.launches) << " launches";
    if (p.failed_captures + p.failed_instantiations + p.failed_launches)
      t << " (failed: " << p.failed_captures << " captures, " << p.failed_instantiations
        << " instantiations, " << p.failed_launches << " launches)";
    if (p.instantiations_after_first_launch)
      t << "; " << p.instantiations_after_first_launch
        << " re-instantiations after the first launch";
    t << "\n";
  }
  size_t n = 0;
  for (const auto& e : rep.execs) {
    if (n++ >= limit) break;
    Json j = {{"pid", e.pid},
              {"exec", hex(e.exec)},
              {"graph", hex(e.graph)},
              {"captured_at_ns", e.captured_at},
              {"capture_ns", e.capture_ns},
              {"capture_stream", hex(e.capture_stream)},
              {"instantiated_at_ns", e.instantiated_at},
              {"instantiations", e.instantiations},
              {"instantiate_ns", e.instantiate_ns},
              {"launches", e.launches},
              {"failed_launches", e.failed_launches},
              {"first_launch_ns", e.first_launch},
              {"last_launch_ns", e.last_launch},
              {"launch_p50_ns", e.launch_p50_ns},
              {"launch_p99_ns", e.launch_p99_ns},
              {"launch_max_ns", e.launch_max_ns}};
    Json streams = Json::array();
    for (auto s : e.streams) streams.push_back(hex(s));
    j["launch_streams"] = streams;
    std::string state = e.launches         ? "launched"
                        : e.instantiations ? "instantiated, never launched"
                                           : "unknown";
    j["state"] = state;
    execs.push_back(std::move(j));
    t << "  exec " << hex(e.exec) << " (pid " << e.pid << ", graph " << hex(e.graph) << "): ";
    if (e.captured_at)
      t << "captured in " << dur(uint64_t(e.capture_ns)) << " on stream " << hex(e.capture_stream)
        << ", ";
    if (e.instantiations)
      t << "instantiated " << e.instantiations << "x (" << dur(e.instantiate_ns) << "), ";
    else
      t << "instantiated before the trace, ";
    if (e.launches)
      t << format_count(e.launches) << " launches, p50 " << dur(e.launch_p50_ns) << " p99 "
        << dur(e.launch_p99_ns);
    else
      t << "never launched";
    t << "\n";
  }
  if (rep.execs.size() > limit)
    t << "(" << rep.execs.size() - limit << " more graphs; raise limit)\n";
  ToolOutput o;
  o.text = t.str();
  o.structured = {{"processes", procs}, {"graphs", execs}, {"graphs_total", rep.execs.size()}};
  return o;
}

ToolOutput graph_frequency(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto w = window_of(call.args, *op->source);
  if (!w) return error_output(w.error().message);
  auto rep = engine::compute_graphs(*op->source, *w);
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  size_t limit = size_t(arg_int(call.args, "limit", 10));
  std::vector<const engine::GraphExecUse*> execs;
  for (const auto& e : rep.execs)
    if (e.launches) execs.push_back(&e);
  std::sort(execs.begin(), execs.end(), [](auto* a, auto* b) { return a->launches > b->launches; });
  std::ostringstream t;
  Json jexecs = Json::array(), timeline = Json::array();
  if (!rep.any()) t << "no CUDA/HIP graph calls in this window\n";
  for (const auto* e : execs) {
    if (jexecs.size() >= limit) break;
    jexecs.push_back({{"pid", e->pid},
                      {"exec", hex(e->exec)},
                      {"launches", e->launches},
                      {"rate_hz", e->launch_rate_hz()},
                      {"instantiations", e->instantiations},
                      {"first_launch_ns", e->first_launch},
                      {"last_launch_ns", e->last_launch}});
    t << "exec " << hex(e->exec) << " (pid " << e->pid << "): " << format_count(e->launches)
      << " launches, " << fmt("%.1f", e->launch_rate_hz()) << "/s, instantiated "
      << e->instantiations << "x\n";
  }
  if (!rep.timeline.empty()) {
    t << "per " << dur(uint64_t(rep.bucket_ns)) << " (captures/instantiations/launches):";
    for (const auto& b : rep.timeline) {
      timeline.push_back({{"start_ns", b.start},
                          {"captures", b.captures},
                          {"instantiations", b.instantiations},
                          {"launches", b.launches}});
      t << " " << b.captures << "/" << b.instantiations << "/" << b.launches;
    }
    t << "\n";
  }
  ToolOutput o;
  o.text = t.str();
  o.structured = {{"graphs", jexecs}, {"bucket_ns", rep.bucket_ns}, {"timeline", timeline}};
  return o;
}

}  // namespace

void add_graph_tools(std::vector<Tool>& t) {
  t.push_back(
      {"graph_lifecycle", "CUDA/HIP graph lifecycle",
       "Each executable graph: captured (when, how long, which stream), instantiated (how often, "
       "cost), "
       "launched (count, p50/p99 launch latency) or never launched; per process, failed captures, "
       "instantiations and launches and re-instantiations after the first launch (re-capture "
       "storms)." +
           kDataNote,
       object_schema(with_window({{"pid", pid_prop()}, {"limit", limit_prop(20, 200, "graphs")}})),
       out_schema({{"processes", kArr}, {"graphs", kArr}, {"graphs_total", kInt}},
                  {"processes", "graphs"}),
       graph_lifecycle, /*cacheable=*/true});
  t.push_back(
      {"graph_frequency", "CUDA/HIP graph launch frequency",
       "Launch rate per executable graph, and captures / instantiations / launches per "
       "time bucket (at "
       "most 60 buckets) to spot launch-rate collapse and re-capture bursts." +
           kDataNote,
       object_schema(with_window({{"pid", pid_prop()}, {"limit", limit_prop(10, 100, "graphs")}})),
       out_schema({{"graphs", kArr}, {"bucket_ns", kInt}, {"timeline", kArr}},
                  {"graphs", "timeline"}),
       graph_frequency, /*cacheable=*/true});
}

}  // namespace ingero::serve::mcp

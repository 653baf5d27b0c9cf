// MCP tools that give the overview: the host and trace check, per-op statistics and the
// per-process breakdown.
#include <algorithm>
#include <set>
#include <sstream>

#include "engine/analysis.h"
#include "engine/loss_notes.h"
#include "engine/result_json.h"
#include "serve/mcp/tool_support.h"
#include "store/legacy_views.h"

namespace ingero::serve::mcp {
namespace {

ToolOutput get_check(ToolContext& ctx, const ToolCall&) {
  ToolOutput o;
  Json host = ctx.host_check();
  if (host.is_null())
    host = {{"can_trace", false},
            {"audited", false},
            {"checks", Json::array()},
            {"libraries", Json::array()}};
  auto r = ctx.engine_reader();
  if (!r) return error_output(r.error().message);
  auto sessions = sessions_json(**r);
  if (!sessions) return error_output(sessions.error().message);
  Json trace = {{"path", ctx.db_path()},
                {"format", (*r)->format_name()},
                {"read_only", true},
                {"sessions", std::move(*sessions)}};
  // A legacy file's driver calls made inside runtime calls are counted in them (calls view).
  if ((*r)->is_legacy()) trace["nested_calls_folded"] = (*r)->legacy_nested_calls();
  // And the damage it holds (store/legacy_views.h), as explain and the report say it.
  std::string damage;
  if ((*r)->is_legacy()) {
    auto d = store::legacy_damage_words((*r)->db());
    if (!d) return error_output(d.error().message);
    damage = std::move(*d);
    if (!damage.empty()) trace["damage"] = damage;
  }
  o.structured = {{"host", host}, {"trace", trace}};
  std::ostringstream t;
  t << "host: " << (host.value("can_trace", false) ? "can trace" : "CANNOT trace") << "\n";
  std::vector<std::string> passed;
  for (const auto& c : host["checks"]) {
    std::string st = c["status"];
    if (st == "pass") {
      passed.push_back(c["name"]);
      continue;
    }
    t << "  " << (st == "fail" ? "FAIL " : "optional ") << c["name"].get<std::string>() << ": "
      << as_data(c["value"].get<std::string>(), 80) << " "
      << as_data(c["detail"].get<std::string>(), 160);
    if (!c["fix"].get<std::string>().empty())
      t << " fix: " << as_data(c["fix"].get<std::string>(), 160);
    t << "\n";
  }
  t << "  pass: ";
  for (size_t i = 0; i < passed.size(); ++i) t << (i ? ", " : "") << passed[i];
  t << "\n";
  for (const auto& l : host["libraries"]) {
    t << "  library " << as_data(l.value("path", ""), 120) << " backend "
      << ident(l.value("backend", "")) << ": " << l.value("probes_resolved", 0) << " probes\n";
  }
  t << "trace: " << as_data(ctx.db_path(), 200) << " (" << (*r)->format_name() << "), "
    << trace["sessions"].size() << " session(s)\n";
  if (int64_t n = (*r)->legacy_nested_calls())
    t << "  " << n << " driver call(s) made inside runtime calls are counted in them in `calls` "
      << "(one launch is one row; the file's own `events` table keeps both)\n";
  if (!damage.empty()) t << "  " << damage << "\n";
  for (const auto& s : trace["sessions"]) {
    t << "  session " << s["id"].get<int64_t>() << ": kernel "
      << as_data(s["kernel"].get<std::string>()) << ", "
      << format_wall(s["started_ns"].get<int64_t>());
    if (s.contains("ringbuf_drops"))
      t << ", " << s["events_stored"].get<int64_t>() << " events stored, "
        << s["ringbuf_drops"].get<int64_t>() << " ring-buffer drops, "
        << s["lost_calls"].get<int64_t>() << " lost calls";
    t << "\n";
  }
  o.text = t.str();
  return o;
}

// One op of get_trace_stats: its JSON, and its line into `t`.
Json op_stats_row(const engine::OpStats& s, std::ostringstream& t) {
  // The op's figures as explain --json gives them, and what an agent sorts by.
  Json j = engine::op_stats_json(s);
  j["pids"] = s.pids.size();
  j["total_ns"] = s.timed() ? Json(s.sum_ns) : Json(nullptr);  // unknown, not 0
  j["tail_ratio"] = s.p50 ? double(s.p99) / double(s.p50) : 0.0;
  t << "  " << format_count(s.count) << " " << ident(s.key.op) << " [" << ident(s.key.vendor) << "/"
    << ident(s.key.api) << "] ";
  if (s.timed())
    t << "p50 " << dur(s.p50) << " p95 " << dur(s.p95) << " p99 " << dur(s.p99) << " max "
      << dur(s.max_ns);
  else
    t << "none timed (launches seen at entry only)";
  if (s.p50 && s.p99 >= 10 * s.p50)
    t << " (p99 " << fmt("%.0f", double(s.p99) / double(s.p50)) << "x p50)";
  if (s.errors) t << ", " << format_count(s.errors) << " errors";
  if (s.off_cpu_ns) t << ", " << dur(s.off_cpu_ns) << " off-CPU";
  t << "\n";
  return j;
}

ToolOutput get_trace_stats(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto& src = *op->source;
  auto w = window_of(call.args, src);
  if (!w) return error_output(w.error().message);
  std::string vendor = arg_str(call.args, "vendor");
  size_t limit = size_t(arg_int(call.args, "limit", 25));
  auto stats = engine::compute_op_stats(src, *w);
  auto host = engine::collect_host_context(src, *w);
  uint64_t events = src.event_count(*w);
  // A node's own span, as explain --node says it: the whole trace's gave a merged file's node
  // 519.8 s for its 163 ms, and a fleet's node 245 days (helper-77).
  auto span = w->node ? src.node_span(*w->node) : src.time_span();
  if (w->from_ns > span.first) span.first = w->from_ns;
  if (w->to_ns < span.second) span.second = w->to_ns;
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());

  std::vector<const engine::OpStats*> ops;
  std::set<std::string> vendors;
  for (const auto& s : stats.overall) {
    vendors.insert(std::string(s.key.vendor));
    if (vendor.empty() || s.key.vendor == vendor) ops.push_back(&s);
  }
  // A vendor the window has no call of is said with those it has ("bogus" was answered as a
  // window without GPU calls).
  if (!vendor.empty() && !vendors.empty() && !vendors.count(vendor)) {
    std::string have;
    for (const auto& v : vendors) have += (have.empty() ? "" : ", ") + v;
    return error_output("no calls of vendor " + as_data(vendor) +
                        " in this window (vendors: " + have + ")");
  }
  std::sort(ops.begin(), ops.end(), [](auto* a, auto* b) {
    return std::tie(b->sum_ns, b->count, a->key.op) < std::tie(a->sum_ns, a->count, b->key.op);
  });
  size_t omitted = ops.size() > limit ? ops.size() - limit : 0;
  if (omitted) ops.resize(limit);

  Json jops = Json::array();
  std::ostringstream t;
  // Losses first: with calls missing, every count below is a lower bound.
  auto losses = src.losses();
  if (std::string lost = engine::losses_line(losses); !lost.empty()) t << lost << "\n";
  t << window_line(*w, span, events) << "\n";
  if (ops.empty()) t << "no GPU API calls in this window\n";
  for (const auto* s : ops) jops.push_back(op_stats_row(*s, t));
  if (omitted) t << "  (" << omitted << " more ops; raise limit or filter by vendor)\n";
  Json jhost = Json::array();
  if (!host.ops.empty()) t << "host:";
  for (const auto& [name, h] : host.ops) {
    jhost.push_back({{"event", name},
                     {"count", h.count},
                     {"avg_ns", h.count ? h.sum_ns / h.count : 0},
                     {"max_ns", h.max_ns}});
    t << " " << format_count(h.count) << " " << ident(name)
      << (&name != &host.ops.rbegin()->first ? "," : "");
  }
  if (!host.ops.empty()) t << "\n";
  Json nodes = Json::array();
  for (const auto& n : op->fleet ? op->fleet->nodes() : op->file->nodes())
    if (!n.empty()) nodes.push_back(n);
  if (nodes.size() > 1) t << "nodes: " << nodes.size() << " (pass node to look at one)\n";
  ToolOutput o;
  o.structured = {{"window", window_json(*w, span)}, {"events", events}, {"ops", jops},
                  {"ops_omitted", omitted},          {"host", jhost},    {"nodes", nodes}};
  if (losses) o.structured["losses"] = engine::losses_json(*losses);
  o.text = t.str();
  return o;
}

ToolOutput get_process_breakdown(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto w = window_of(call.args, *op->source, false);
  if (!w) return error_output(w.error().message);
  engine::EngineOptions eo;
  eo.breakdown = true;
  auto a = engine::analyze(*op->source, *w, eo);
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  size_t limit = size_t(arg_int(call.args, "limit", 20));
  Json procs = Json::array();
  std::ostringstream t;
  t << format_count(a.processes.size()) << " processes in " << window_line(*w, a.span, a.events)
    << "\n";
  for (const auto& p : a.processes) {
    if (procs.size() >= limit) break;
    Json ops = Json::array();
    std::vector<const engine::OpStats*> top(p.ops.begin(), p.ops.end());
    std::sort(top.begin(), top.end(), [](auto* x, auto* y) { return x->sum_ns > y->sum_ns; });
    if (top.size() > 5) top.resize(5);
    for (const auto* s : top) {
      Json o = {{"op", s->key.op},       {"vendor", s->key.vendor}, {"calls", s->count},
                {"total_ns", s->sum_ns}, {"p50_ns", s->p50},        {"p99_ns", s->p99},
                {"errors", s->errors}};
      if (!s->timed())  // its durations are unknown, not 0
        for (const char* k : {"total_ns", "p50_ns", "p99_ns"}) o[k] = nullptr;
      ops.push_back(std::move(o));
    }
    Json pj = process_json(p);
    pj["top_ops"] = ops;
    procs.push_back(std::move(pj));
    std::string tenant = engine::tenant_label(p.cgroup);
    t << "pid " << p.pid << " " << as_data(p.name) << " (" << as_data(p.role) << ")"
      << (tenant.empty() ? "" : " in " + as_data(tenant, 160)) << ": " << format_count(p.calls)
      << " GPU calls, " << format_count(p.switches) << " switches (" << format_count(p.involuntary)
      << " preempted), " << dur(p.off_cpu_ns) << " off-CPU";
    if (p.page_allocs) t << ", " << format_count(p.page_allocs) << " page allocs";
    if (p.block_ios) t << ", " << format_count(p.block_ios) << " block I/Os";
    t << "\n";
    for (const auto* s : top)
      t << "    " << format_count(s->count) << " " << ident(s->key.op)
        << (s->timed() ? " total " + dur(s->sum_ns) + " p99 " + dur(s->p99)
                       : std::string(" none timed"))
        << "\n";
  }
  if (a.processes.size() > limit)
    t << "(" << a.processes.size() - limit << " more processes; raise limit)\n";
  ToolOutput o;
  o.text = t.str();
  o.structured = {
      {"window", window_json(*w, a.span)}, {"total", a.processes.size()}, {"processes", procs}};
  return o;
}

}  // namespace

void add_overview_tools(std::vector<Tool>& t) {
  t.push_back({"get_check", "Host and trace check",
               "Can this host trace GPU workloads (kernel, BTF, privileges, uprobes, tracepoints, "
               "vendor libraries "
               "found), and what is the trace file (format, sessions, ring-buffer drops, lost "
               "calls)? Call first: "
               "drops or lost calls mean counts are lower bounds." +
                   kDataNote,
               object_schema(Json::object()),
               out_schema({{"host", kObj}, {"trace", kObj}}, {"host", "trace"}), get_check});
  t.push_back(
      {"get_trace_stats", "GPU API latency statistics",
       "Per-op statistics of GPU API calls (CUDA runtime/driver, HIP, NCCL/RCCL, verbs): count, "
       "errors, "
       "exact nearest-rank p50/p95/p99, max, total time and off-CPU time, ordered by total time; "
       "plus host "
       "event counts (sched_switch, page allocations, block I/O, TCP retransmits). Start here, "
       "then "
       "get_causal_chains." +
           kDataNote,
       object_schema(with_window(
           {{"pid", pid_prop()},
            {"vendor",
             {{"type", "string"}, {"maxLength", 32}, {"description", "nvidia, amd or rdma"}}},
            {"limit", limit_prop(25, 200, "ops")}})),
       out_schema({{"window", kObj},
                   {"events", kInt},
                   {"ops", kArr},
                   {"ops_omitted", kInt},
                   {"host", kArr},
                   {"nodes", kArr}},
                  {"window", "events", "ops", "host"}),
       get_trace_stats, /*cacheable=*/true});
  t.push_back({"get_process_breakdown", "Per-process breakdown",
               "Every process in the window with its role (GPU process, its workers, preemptors), "
               "its cgroup and tenant (pod, namespace, container where known), GPU calls, top ops "
               "by time, context switches (preempted), off-CPU time, page allocations, forks and "
               "block I/O." +
                   kDataNote,
               object_schema(with_window({{"limit", limit_prop(20, 200, "processes")}})),
               out_schema({{"window", kObj}, {"total", kInt}, {"processes", kArr}},
                          {"window", "processes"}),
               get_process_breakdown, /*cacheable=*/true});
}

}  // namespace ingero::serve::mcp

#include "serve/report/report_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/analysis.h"
#include "engine/loss_notes.h"
#include "engine/result_json.h"
#include "serve/report/call_census.h"
#include "serve/report/call_pass.h"
#include "serve/report/engine_json.h"
#include "serve/report/flame_tree.h"
#include "serve/report/report_sql.h"
#include "store/legacy_views.h"
#include "store/read_snapshot.h"

namespace ingero::serve::report {
namespace {

using nlohmann::json;

struct NodeAnalysis {
  std::string node;
  engine::Analysis a;
};

double seconds_since(int64_t ts, int64_t t0) { return std::round(double(ts - t0) / 1e3) / 1e6; }

Result<json> header_json(store::Db& db, const engine::Window& w, const CallCensus& census,
                         json sessions, const std::vector<NodeAnalysis>& analyses) {
  json h;
  h["sessions"] = std::move(sessions);
  // The events explain counts (calls, folded ones included, and host events).
  uint64_t events = 0;
  for (const auto& na : analyses) events += na.a.events;
  auto host = query_count(db, "SELECT count(*) FROM host_events" + window_where(w, "ts_ns"),
                          "counting host events");
  if (!host) return host.error();
  h["events"] = events;
  h["host_events"] = *host;
  h["calls"] = census.totals.calls;
  h["processes"] = census.processes.size();
  h["errors"] = census.totals.errors;
  h["unfinished"] = census.totals.unfinished;
  // Indexes into kLoss; 4.. are the per-kind counters of schema v5 files.
  enum { kRing, kUntraced, kStore, kUnfinished, kCalls, kStacks, kHost, kSamples, kAtExit, kN };
  uint64_t loss[kN] = {};
  static constexpr const char* kLoss[] = {"ringbuf_drops",    "lost_calls",   "store_errors",
                                          "unfinished_calls", "call_drops",   "stack_drops",
                                          "host_drops",       "sample_drops", "calls_lost_at_exit"};
  bool live = false, has_loss = false, by_kind = false;
  for (const auto& s : h["sessions"]) {
    for (int i = 0; i < kN; ++i)
      if (s.contains(kLoss[i]) && s[kLoss[i]].is_number_integer()) {
        loss[i] += s[kLoss[i]].get<uint64_t>();
        has_loss = true;
        if (i == kCalls) by_kind = true;
      }
    if (s.contains("stopped_at") && s["stopped_at"] == 0) live = true;
  }
  json l = json::object();
  for (int i = 0; i < kN; ++i)
    if (i < kCalls || by_kind) l[kLoss[i]] = loss[i];
  h["loss"] = std::move(l);
  h["loss_recorded"] = has_loss;
  h["live"] = live;
  // Loud: what the trace lost. Each is {level: "error"|"notice", text}.
  json warn = json::array();
  auto add = [&](const char* level, std::string text) {
    warn.push_back({{"level", level}, {"text", std::move(text)}});
  };
  // What each node's trace lost, worded as explain and the MCP tools word it
  // (engine/loss_notes.h): drops, store errors, what retention deleted, late libraries.
  for (const auto& na : analyses) {
    if (!na.a.losses) continue;
    for (const auto& n : engine::loss_notes(*na.a.losses))
      add(n.error ? "error" : "notice", analyses.size() > 1 ? na.node + ": " + n.text : n.text);
  }
  if (loss[kUnfinished])
    add("notice", std::to_string(loss[kUnfinished]) +
                      " calls were still running when their thread exited (stored as unfinished)");
  if (!has_loss) add("notice", "this file records no loss counters: drops, if any, are unknown");
  // Tiered retention: folded launches have no rows; the page counts them from their runs
  // (serve/report/call_pass.cc) and says how many there are.
  uint64_t folded = 0;
  if (db.table_exists("call_runs")) {
    auto n = query_count(
        db, "SELECT coalesce(sum(calls), 0) FROM call_runs" + window_where(w, "timestamp"),
        "counting folded calls");
    if (!n) return n.error();
    folded = uint64_t(*n);
  }
  h["folded_calls"] = folded;
  // Whether the engine's percentiles come from per-second sketches (folded blocks) or every call.
  bool sketched = false;
  for (const auto& na : analyses) sketched = sketched || na.a.stats.sketch_quantiles;
  h["quantiles"] = sketched ? "sketches" : "exact";
  if (folded)
    add("notice", std::to_string(folded) +
                      " launches in this window were folded into runs (tiered retention, "
                      "--full-rows): every count, rate and chain includes them; in the latency "
                      "histograms each run's calls sit at its minimum, maximum and mean, and "
                      "percentiles come from 1%-accurate sketches");
  if (live)
    add("notice",
        "a session has not finished: the trace is being written (or its tracer did not stop "
        "cleanly)");
  h["warnings"] = std::move(warn);
  json host_ops = json::object();
  for (const auto& na : analyses)
    for (const auto& [name, st] : na.a.host.ops) {
      json& o = host_ops[name];
      if (o.is_null()) o = {{"count", 0}, {"sum_ns", 0}, {"max_ns", 0}};
      o["count"] = o.value("count", uint64_t(0)) + st.count;
      o["sum_ns"] = o.value("sum_ns", uint64_t(0)) + st.sum_ns;
      o["max_ns"] = std::max(o.value("max_ns", uint64_t(0)), st.max_ns);
    }
  h["host_ops"] = std::move(host_ops);
  return h;
}

// An op: engine::op_stats_json, with its total time, slow calls and latency histogram.
json op_json(const engine::OpStats& s, const OpAccum& acc) {
  json j = engine::op_stats_json(s);
  j["sum_ns"] = s.sum_ns;
  j["slow_calls"] = s.count >= 2 ? s.tail_count : 0;
  size_t lo = kLatencyBins, hi = 0;
  for (size_t b = 0; b < kLatencyBins; ++b)
    if (acc.hist[b]) {
      lo = std::min(lo, b);
      hi = b;
    }
  json edges = json::array(), counts = json::array();
  if (lo <= hi) {
    for (size_t b = lo; b <= hi; ++b) {
      edges.push_back(bin_lower_edge(b));
      counts.push_back(acc.hist[b]);
    }
    edges.push_back(bin_lower_edge(hi + 1));
  }
  j["hist"] = {{"edges_ns", std::move(edges)}, {"counts", std::move(counts)}};
  return j;
}

json rates_json(const CallPassInput& in, const CallPassResult& r, int64_t t0) {
  json t = json::array();
  for (size_t b = 0; b < r.buckets; ++b)
    t.push_back(seconds_since(r.t0 + int64_t(b) * r.bucket_ns, t0));
  double width_s = double(r.bucket_ns) / 1e9;
  json series = json::array();
  std::vector<uint64_t> other(r.buckets, 0);
  for (size_t i = 0; i < in.ops.size(); ++i) {
    const OpAccum& a = r.ops[i];
    if (!in.ops[i].rated) {
      for (size_t b = 0; b < r.buckets; ++b) other[b] += a.buckets[b];
      continue;
    }
    json calls = json::array(), p50 = json::array(), p99 = json::array();
    for (size_t b = 0; b < r.buckets; ++b) {
      calls.push_back(a.buckets[b]);
      const uint32_t* h = a.bucket_hist.data() + b * kLatencyBins;
      double q50 = hist_quantile(h, kLatencyBins, 0.50), q99 = hist_quantile(h, kLatencyBins, 0.99);
      p50.push_back(q50 < 0 ? json(nullptr) : json(std::round(q50 / 100) / 10));
      p99.push_back(q99 < 0 ? json(nullptr) : json(std::round(q99 / 100) / 10));
    }
    series.push_back({{"op", in.ops[i].op},
                      {"api", in.ops[i].api},
                      {"calls", std::move(calls)},
                      {"p50_us", std::move(p50)},
                      {"p99_us", std::move(p99)}});
  }
  return {{"bucket_s", width_s},
          {"t", std::move(t)},
          {"series", std::move(series)},
          {"other_calls", other}};
}

json flame_json(engine::TraceSource& source, const CallPassInput& in, const CallPassResult& r,
                size_t max_nodes) {
  FlameTree tree("slow calls", max_nodes);
  std::map<uint64_t, std::vector<engine::StackFrameInfo>> frames;
  for (const auto& [key, agg] : r.slow) {
    auto [stack, op] = key;
    auto it = frames.find(stack);
    if (it == frames.end())
      it =
          frames.emplace(stack, stack ? source.stack(stack) : std::vector<engine::StackFrameInfo>{})
              .first;
    tree.add(it->second, in.ops[op].op, "op", agg.calls, agg.sum_ns);
  }
  json j = {{"tree", tree.to_json()},        {"total", tree.total()},
            {"stacks", frames.size()},       {"without_stack", tree.without_stack()},
            {"truncated", tree.truncated()}, {"threshold", "p95"}};
  return j;
}

json samples_json(engine::TraceSource& source, const engine::Window& w, size_t max_nodes) {
  if (!source.has_cpu_samples()) return nullptr;
  std::map<uint64_t, uint64_t> by_stack;
  source.cpu_samples(w, [&](const engine::CpuSample& s) { ++by_stack[s.stack_id]; });
  FlameTree tree("on-CPU samples", max_nodes);
  for (const auto& [stack, n] : by_stack)
    tree.add(stack ? source.stack(stack) : std::vector<engine::StackFrameInfo>{}, "", "", n, 0);
  return {{"tree", tree.to_json()},
          {"locations", tree.locations()},
          {"total", tree.total()},
          {"stacks", by_stack.size()},
          {"truncated", tree.truncated()}};
}

// Steps, chains and collectives from each node's analysis.
void engine_sections(engine::TraceSource& source, const ReportOptions& o,
                     std::vector<NodeAnalysis>& analyses, const CallCensus& census, int64_t t0,
                     json& j) {
  json steps = json::array(), chains = json::array(), colls = json::array();
  json kernels = json::array();
  bool named = false;
  uint64_t unnamed = 0, unnamed_functions = 0;
  // The page draws the processes with the most steps: those go in the model, the rest are
  // counted (a trace of 92,000 short-lived GPU processes made a 129 MB page of series).
  std::vector<std::pair<const NodeAnalysis*, const engine::StepSeries*>> stepped;
  for (const auto& na : analyses)
    for (const auto& s : na.a.steps.processes)
      if (!s.steps.empty()) stepped.emplace_back(&na, &s);
  const size_t total_stepped = stepped.size();
  if (stepped.size() > o.max_step_processes) {
    std::stable_sort(stepped.begin(), stepped.end(), [](const auto& x, const auto& y) {
      return x.second->steps.size() > y.second->steps.size();
    });
    stepped.resize(o.max_step_processes);
  }
  for (const auto& [na, s] : stepped)
    steps.push_back(
        step_series_json(*s, na->node, na->a.process_name(s->pid), t0, o.max_step_points));
  for (auto& na : analyses) {
    for (const auto& c : na.a.chains) chains.push_back(chain_json(c, na.node));
    named = named || na.a.kernels.named;
    for (const auto& k : na.a.kernels.processes) {
      unnamed += k.unnamed_launches;
      unnamed_functions += k.unnamed_functions;
      kernels.push_back(kernel_series_json(k, na.a.steps.find(k.pid), na.node,
                                           na.a.process_name(k.pid), t0, o.max_step_points,
                                           o.max_kernel_rows));
    }
    if (census.collectives > 0)
      for (auto& c : collectives_json(engine::compute_collectives(source, na.a.window), na.node,
                                      o.max_collective_ranks))
        colls.push_back(std::move(c));
  }
  std::stable_sort(chains.begin(), chains.end(), [](const json& a, const json& b) {
    auto rank = [](const json& c) {
      const std::string& s = c["severity"].get_ref<const std::string&>();
      return s == "HIGH" ? 0 : s == "MEDIUM" ? 1 : 2;
    };
    return rank(a) < rank(b);
  });
  j["chains_total"] = chains.size();
  if (chains.size() > o.max_chains) chains.erase(chains.begin() + long(o.max_chains), chains.end());
  j["steps"] = std::move(steps);
  j["steps_total"] = total_stepped;
  std::stable_sort(kernels.begin(), kernels.end(), [](const json& a, const json& b) {
    return a["launches"].get<uint64_t>() > b["launches"].get<uint64_t>();
  });
  json kj = {{"named", named},
             {"unnamed_launches", unnamed},
             {"unnamed_functions", unnamed_functions},
             {"processes_total", kernels.size()}};
  if (kernels.size() > o.max_processes)
    kernels.erase(kernels.begin() + long(o.max_processes), kernels.end());
  kj["processes"] = std::move(kernels);
  j["kernels"] = std::move(kj);
  j["chains"] = std::move(chains);
  j["collectives"] = std::move(colls);
}

// The per-process table: the call totals of the processes with calls, joined with the
// engine's host activity; processes the engine knows without calls (DataLoader workers) are
// added.
Status process_section(store::Db& db, const ReportOptions& o,
                       const std::vector<NodeAnalysis>& analyses, const CallCensus& census,
                       json& j) {
  uint64_t total = census.processes.size();  // with calls; those without are added below
  auto procs = processes_json(db, census, o.max_processes);
  if (!procs) return procs.error();
  for (const auto& na : analyses)
    for (const auto& p : na.a.processes) {
      auto it = std::find_if(procs->begin(), procs->end(), [&](const json& r) {
        return r["node"] == na.node && r["pid"] == p.pid;
      });
      json pj = process_json(p, na.node);
      if (it != procs->end()) {
        // The row's calls and name are the census's (the table's other columns count the
        // same calls); the rest is the engine's.
        pj.erase("calls");
        pj.erase("name");
        it->update(pj);
      } else {
        // Past the table's cap, a process with calls was counted already.
        if (census.processes.count({na.node, p.pid})) continue;
        ++total;
        if (procs->size() >= o.max_processes) continue;
        procs->push_back(std::move(pj));
      }
    }
  j["processes"] = std::move(*procs);
  j["processes_total"] = total;
  std::vector<std::pair<std::string, engine::TenantReport>> tenants;
  for (const auto& na : analyses) tenants.emplace_back(na.node, engine::tenant_report(na.a));
  j["tenants"] = tenants_json(tenants);
  std::vector<std::string> names;
  for (const auto& na : analyses) names.push_back(na.node);
  j["nodes"] = nodes_json(census, names);
  return {};
}

// Ops (by total time), their histograms and rates, and the slow calls' flame graph: one pass
// over the calls. The busiest ops by calls get their own rate series.
void call_sections(engine::TraceSource& source, const ReportOptions& o,
                   const engine::OpStatsSet& whole, const std::vector<NodeWindow>& windows,
                   const CallCensus& census, int64_t t0, json& j) {
  std::vector<const engine::OpStats*> ops;
  for (const auto& s : whole.overall) ops.push_back(&s);
  std::sort(ops.begin(), ops.end(), [](auto* a, auto* b) {
    return a->sum_ns != b->sum_ns ? a->sum_ns > b->sum_ns : a->key < b->key;
  });
  std::vector<const engine::OpStats*> busiest = ops;
  std::stable_sort(busiest.begin(), busiest.end(),
                   [](auto* a, auto* b) { return a->count > b->count; });
  busiest.resize(std::min(o.max_rate_ops, busiest.size()));
  CallPassInput in;
  for (const auto& nw : windows) in.windows.push_back(nw.window);
  in.first_ns = census.totals.first_ns;
  in.last_ns = census.totals.last_end_ns;
  in.max_buckets = o.max_rate_buckets;
  for (const auto* s : ops) {
    bool rated = std::find(busiest.begin(), busiest.end(), s) != busiest.end();
    in.ops.push_back({s->key.vendor, s->key.api, s->key.op, s->p95, s->count, rated});
  }
  CallPassResult pass = run_call_pass(source, in);
  json ops_json = json::array();
  for (size_t i = 0; i < ops.size(); ++i) ops_json.push_back(op_json(*ops[i], pass.ops[i]));
  j["ops"] = std::move(ops_json);
  j["rates"] = rates_json(in, pass, t0);
  j["flame"] = {{"calls", flame_json(source, in, pass, o.max_flame_nodes)},
                {"samples", samples_json(source, o.window, o.max_flame_nodes)}};
}

Result<json> build_sections(store::TraceReader& reader, engine::TraceSource& source,
                            const ReportOptions& o) {
  store::Db& db = reader.db();
  const engine::Window& w = o.window;
  auto sessions = sessions_json(db);
  if (!sessions) return sessions.error();
  auto nodes = node_names(db);
  if (!nodes) return nodes.error();
  // A merged trace holds several nodes whose pids may collide: the engine runs per node.
  std::vector<NodeAnalysis> analyses;
  if (nodes->size() < 2) {
    analyses.push_back({nodes->empty() ? "" : nodes->front(), engine::analyze(source, w)});
  } else {
    for (const auto& n : *nodes) {
      engine::Window nw = w;
      nw.node = n;
      analyses.push_back({n, engine::analyze(source, nw)});
    }
  }
  json j;
  j["format"] = "ingero-report";
  j["version"] = kModelVersion;
  j["generated_at_ns"] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  j["ingero_version"] = INGERO_VERSION;
  // A legacy file's driver calls made inside runtime calls are counted in them
  // (store/legacy_views.h): said with its format, as explain says it.
  std::string format = reader.format_name();
  const int64_t folded = reader.legacy_nested_calls(std::nullopt, w.from_ns, w.to_ns);
  if (folded)
    format += "; " + std::to_string(folded) + std::string(store::folded_calls_words(folded));
  // And the damage it holds (store/legacy_views.h), as explain says it.
  if (reader.is_legacy()) {
    auto damage = store::legacy_damage_words(db);
    if (!damage) return damage.error();
    if (!damage->empty()) format += "; " + *damage;
  }
  j["trace"] = {{"path", o.title},
                {"format", format},
                {"legacy", reader.is_legacy()},
                {"nested_calls_folded", folded}};
  // The window explain reports: the engine's span of what it read (calls, folded runs and host
  // events), not the rows of `events`, which hold no folded run (and would decode every block).
  int64_t t0 = 0, t1 = 0;
  for (const auto& na : analyses) {
    if (na.a.span.second <= na.a.span.first) continue;
    t0 = t0 ? std::min(t0, na.a.span.first) : na.a.span.first;
    t1 = std::max(t1, na.a.span.second);
  }
  j["window"] = {{"start_ns", t0}, {"end_ns", t1}, {"seconds", double(t1 - t0) / 1e9}};
  // The calls counted as the engine read them: the same window, held in memory where it fits.
  std::vector<NodeWindow> windows;
  for (const auto& na : analyses) windows.push_back({na.node, na.a.window});
  const CallCensus census = census_calls(source, windows);
  auto header = header_json(db, w, census, std::move(*sessions), analyses);
  if (!header) return header.error();
  j["header"] = std::move(*header);
  engine::OpStatsSet merged;
  if (analyses.size() > 1) merged = engine::compute_op_stats(source, w);
  const engine::OpStatsSet& whole = analyses.size() > 1 ? merged : analyses[0].a.stats;
  call_sections(source, o, whole, windows, census, t0, j);
  engine_sections(source, o, analyses, census, t0, j);
  if (auto s = process_section(db, o, analyses, census, j); !s) return s.error();
  return j;
}

}  // namespace

Result<json> build_report(store::TraceReader& reader, engine::TraceSource& source,
                          const ReportOptions& o) {
  // Every read of one report sees one state of the file: a trace being written (WAL) keeps
  // growing while the report is built, and the sections must agree with each other.
  store::ReadSnapshot snapshot(reader.db());
  return build_sections(reader, source, o);
}

}  // namespace ingero::serve::report

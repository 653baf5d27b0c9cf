#include "engine/result_json.h"

namespace ingero::engine {

nlohmann::json op_stats_json(const OpStats& s) {
  nlohmann::json j = {{"op", s.key.op},
                      {"vendor", s.key.vendor},
                      {"api", s.key.api},
                      {"kind", std::string(hal::kind_name(s.key.kind))},
                      {"calls", s.count},
                      {"errors", s.errors},
                      {"unfinished", s.unfinished},
                      {"avg_ns", uint64_t(s.avg_ns())},
                      {"min_ns", s.min_ns},
                      {"p50_ns", s.p50},
                      {"p95_ns", s.p95},
                      {"p99_ns", s.p99},
                      {"max_ns", s.max_ns},
                      {"bytes", s.bytes},
                      {"off_cpu_ns", s.off_cpu_ns}};
  if (s.key.pid) j["pid"] = s.key.pid;
  return j;
}

nlohmann::json process_json(const ProcessReport& p) {
  return {{"pid", p.pid},
          {"name", p.name},
          {"role", p.role},
          {"parent", p.parent},
          {"calls", p.calls},
          {"switches", p.switches},
          {"involuntary", p.involuntary},
          {"off_cpu_ns", p.off_cpu_ns},
          {"max_off_cpu_ns", p.max_off_cpu_ns},
          {"page_allocs", p.page_allocs},
          {"page_bytes", p.page_bytes},
          {"forks", p.forks},
          {"block_ios", p.block_ios}};
}

nlohmann::json chain_json(const Chain& c) {
  nlohmann::json stacks = nlohmann::json::array();
  for (const auto& s : c.stacks)
    stacks.push_back({{"stack_id", s.stack_id},
                      {"calls", s.calls},
                      {"examined", s.examined},
                      {"worst_ns", s.worst_ns},
                      {"pid", s.pid},
                      {"tid", s.tid},
                      {"frames", s.frames}});
  nlohmann::json tl = nlohmann::json::array();
  for (const auto& t : c.timeline)
    tl.push_back({{"layer", t.layer}, {"op", t.op}, {"detail", t.detail}, {"dur_us", t.dur_us}});
  nlohmann::json j = {{"id", c.id},
          {"severity", severity_name(c.severity)},
          {"rule", c.rule},
          {"op", c.op},
          {"vendor", c.vendor},
          {"api", c.api},
          {"pids", c.pids},
          {"summary", c.summary},
          {"root_cause", c.root_cause},
          {"explanation", c.explanation},
          {"fixes", c.fixes},
          {"timeline", tl},
          {"stacks", stacks},
          {"p50_ns", c.p50_ns},
          {"p99_ns", c.p99_ns},
          {"tail_ratio", c.tail_ratio},
          {"window_start_ns", c.window_start},
          {"window_end_ns", c.window_end}};
  if (!c.node.empty()) j["node"] = c.node;
  return j;
}

nlohmann::json report_json(const Analysis& a, const ReportHeader& o) {
  nlohmann::json j;
  j["trace"] = o.title;
  if (!o.subtitle.empty()) j["note"] = o.subtitle;
  j["events"] = a.events;
  j["window"] = {
      {"start_ns", a.span.first},
      {"end_ns", a.span.second},
      {"seconds", a.span.second > a.span.first ? double(a.span.second - a.span.first) / 1e9 : 0.0}};
  if (a.window.pid) j["window"]["pid"] = *a.window.pid;
  j["stats"] = nlohmann::json::array();
  for (const auto& s : a.stats.overall) j["stats"].push_back(op_stats_json(s));
  j["host"] = nlohmann::json::object();
  for (const auto& [name, h] : a.host.ops)
    j["host"][name] = {
        {"count", h.count}, {"avg_ns", h.count ? h.sum_ns / h.count : 0}, {"max_ns", h.max_ns}};
  j["chains"] = nlohmann::json::array();
  for (const auto& c : a.chains) j["chains"].push_back(chain_json(c));
  if (o.per_process) {
    j["processes"] = nlohmann::json::array();
    for (const auto& p : a.processes) {
      nlohmann::json ops = nlohmann::json::array();
      for (const auto* s : p.ops) ops.push_back(op_stats_json(*s));
      nlohmann::json pj = process_json(p);
      pj["ops"] = std::move(ops);
      j["processes"].push_back(std::move(pj));
    }
  }
  return j;
}

}  // namespace ingero::engine

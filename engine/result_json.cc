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

nlohmann::json step_summary_json(const StepSummary& s) {
  return {
      {"text", s.text},
      {"steps", s.steps},
      {"warmup_steps", s.warmup_steps},
      {"median_ns", s.median_ns},
      {"p90_ns", s.p90_ns},
      {"min_ns", s.min_ns},
      {"max_ns", s.max_ns},
      {"wait", s.wait},
      {"enqueue", s.enqueue},
      {"api", s.api},
      {"host", s.host},
      // The GPU side: measured where the devices covered the steps, else only the share the
      // syncs prove idle (a lower bound, never a measurement).
      {"gpu_busy", s.busy_measured ? nlohmann::json(s.gpu_busy) : nlohmann::json()},
      {"gpu_busy_source", s.busy_measured ? nlohmann::json(s.busy_source) : nlohmann::json()},
      {"gpu_busy_scope", s.busy_measured ? nlohmann::json(s.busy_per_process ? "process" : "device")
                                         : nlohmann::json()},
      {"gpu_busy_steps", s.busy_steps},
      {"gpu_idle_lower_bound", s.gpu_idle},
      {"gpu_text", gpu_share_text(s)},
      {"device_note", s.device_note},
      {"launch_site", s.launch_where},
      {"host_gap", s.host_gap},
      {"preempted", s.preempted},
      {"preempted_by", s.preempted_by},
      {"gap_cause", s.gap_cause},
      {"gap_where", s.gap_where},
      {"launches_per_step", s.launches_per_step},
      {"round_trips_per_step", s.round_trips_per_step}};
}

nlohmann::json step_json(const Step& s) {
  return {{"start_ns", s.start_ns},
          {"dur_ns", s.duration()},
          {"warmup", s.warmup},
          {"wait_ns", s.wait_ns},
          {"enqueue_ns", s.enqueue_ns},
          {"api_ns", s.api_ns},
          {"host_ns", s.host_ns},
          {"gpu_busy", s.gpu_busy >= 0 ? nlohmann::json(double(s.gpu_busy)) : nlohmann::json()},
          {"gpu_busy_scope", s.gpu_busy < 0       ? nlohmann::json()
                             : s.busy_per_process ? nlohmann::json("process")
                                                  : nlohmann::json("device")},
          {"gpu_idle_lower_bound_ns", s.gpu_idle_ns},
          {"host_gap_ns", s.host_gap_ns},
          {"gap",
           {{"on_cpu_ns", s.gap.on_cpu_ns},
            {"preempted_ns", s.gap.preempted_ns},
            {"io_ns", s.gap.io_ns},
            {"sleep_ns", s.gap.sleep_ns},
            {"unknown_ns", s.gap.unknown_ns}}},
          {"preempted_ns", s.preempted_ns},
          {"launches", s.launches},
          {"copies", s.copies},
          {"syncs", s.syncs},
          {"allocs", s.allocs},
          {"frees", s.frees},
          {"collectives", s.collectives},
          {"round_trips", s.round_trips}};
}

nlohmann::json step_series_json(const StepSeries& s, const std::string& name) {
  return {{"pid", s.pid},
          {"name", name},
          {"cadence", cadence_name(s.cadence)},
          {"cadence_note", s.cadence_note},
          {"anchor_site", s.anchor_site},
          {"calls_not_modelled", s.calls_dropped},
          {"modelled_until_ns", s.last_call_ns},
          {"summary", step_summary_json(s.summary)}};
}

nlohmann::json steps_overview_json(const Analysis& a) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : a.steps.processes) out.push_back(step_series_json(s, a.process_name(s.pid)));
  return out;
}

nlohmann::json losses_json(const TraceLosses& l) {
  nlohmann::json j = {
      {"calls_lost", l.calls_lost()},   {"ringbuf_drops", l.ringbuf_drops},
      {"lost_calls", l.lost_calls},     {"calls_lost_at_exit", l.calls_lost_at_exit},
      {"store_errors", l.store_errors}, {"lower_bounds", l.lower_bounds()}};
  if (!l.late_libraries.empty()) {
    auto& late = j["late_libraries"] = nlohmann::json::array();
    for (const auto& x : l.late_libraries)
      late.push_back({{"path", x.path}, {"pid", x.pid}, {"late_ns", x.late_ns}});
  }
  if (l.by_kind) {
    j["call_drops"] = l.call_drops;
    j["stack_drops"] = l.stack_drops;
    j["host_drops"] = l.host_drops;
    j["sample_drops"] = l.sample_drops;
  }
  std::string line = losses_line(l);
  if (!line.empty()) j["summary"] = line;
  return j;
}

nlohmann::json report_json(const Analysis& a, const ReportHeader& o) {
  nlohmann::json j;
  j["trace"] = o.title;
  if (!o.subtitle.empty()) j["note"] = o.subtitle;
  j["events"] = a.events;
  if (a.losses) j["losses"] = losses_json(*a.losses);
  j["steps"] = steps_overview_json(a);
  j["window"] = {
      {"start_ns", a.span.first},
      {"end_ns", a.span.second},
      {"seconds", a.span.second > a.span.first ? double(a.span.second - a.span.first) / 1e9 : 0.0}};
  if (a.window.pid) j["window"]["pid"] = *a.window.pid;
  j["stats"] = nlohmann::json::array();
  for (const auto& s : a.stats.overall) j["stats"].push_back(op_stats_json(s));
  j["quantiles"] = a.stats.sketch_quantiles ? "sketches" : "exact";
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

#include "engine/result_json.h"

#include "engine/loss_notes.h"

namespace ingero::engine {
namespace {

nlohmann::json text_or_null(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

}  // namespace

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
  if (!s.timed())  // its durations are unknown, not 0
    for (const char* k : {"avg_ns", "min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns"})
      j[k] = nullptr;
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
          {"block_ios", p.block_ios},
          {"cgroup_id", p.cgroup_id},
          {"cgroup_path", text_or_null(p.cgroup.path)},
          {"tenant", text_or_null(tenant_label(p.cgroup))},
          {"pod", text_or_null(p.cgroup.pod)},
          {"namespace", text_or_null(p.cgroup.pod_namespace)},
          {"container", text_or_null(p.cgroup.container)}};
}

nlohmann::json chain_json(const Chain& c) {
  nlohmann::json stacks = nlohmann::json::array();
  for (const auto& s : c.stacks)
    stacks.push_back({{"stack_id", s.stack_id},
                      {"counts", stack_counts_name(s.counts)},
                      {"header", stack_counts_text(s)},
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

namespace {

nlohmann::json gap_time_json(const GapTime& t) {
  return {{"on_cpu_ns", t.on_cpu_ns},
          {"preempted_ns", t.preempted_ns},
          {"io_ns", t.io_ns},
          {"sleep_ns", t.sleep_ns},
          {"unknown_ns", t.unknown_ns}};
}

// The parts of `t` as shares of the step, `t` being `share` of it.
nlohmann::json gap_time_shares(const GapTime& t, double share) {
  double total = double(t.total());
  auto part = [&](uint64_t ns) { return total > 0 ? share * double(ns) / total : 0.0; };
  return {{"on_cpu", part(t.on_cpu_ns)},
          {"preempted", part(t.preempted_ns)},
          {"io", part(t.io_ns)},
          {"sleep", part(t.sleep_ns)},
          {"unknown", part(t.unknown_ns)}};
}

}  // namespace

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
      // How `host` was spent by the threads making the calls (shares of the step; all of it
      // unknown where the trace has no scheduler events).
      {"host_time", gap_time_shares(s.host_time, s.host)},
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
          {"gap", gap_time_json(s.gap)},
          {"host_time", gap_time_json(s.host_time)},
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
          {"cycle", s.cycle},
          {"calls_not_modelled", s.calls_dropped},
          {"calls_after_steps", s.calls_after_steps},
          {"steps_end_ns", s.steps.empty() ? 0 : s.steps.back().end_ns},
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
  if (l.retention_before_ns)
    j["retention"] = {{"calls", l.retention_calls},
                      {"events", l.retention_events},
                      {"from_ns", l.retention_from_ns},
                      {"before_ns", l.retention_before_ns}};
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

nlohmann::json tenants_json(const TenantReport& r) {
  nlohmann::json tenants = nlohmann::json::array();
  for (const TenantUsage& t : r.tenants)
    tenants.push_back({{"name", t.name},
                       {"kind", t.kind},
                       {"pod", text_or_null(t.pod)},
                       {"namespace", text_or_null(t.pod_namespace)},
                       {"pod_uid", text_or_null(t.pod_uid)},
                       {"qos", text_or_null(t.qos)},
                       {"containers", t.containers},
                       {"cgroup_ids", t.cgroup_ids},
                       {"gpu_pids", t.gpu_pids},
                       {"calls", t.calls},
                       {"api_ns", t.api_ns},
                       {"api_off_cpu_ns", t.api_off_cpu_ns},
                       {"preempted_ns", t.preempted_ns},
                       {"preemptions", t.preemptions},
                       {"preempted_by_others_ns", t.preempted_by_others_ns},
                       {"preempting_ns", t.preempting_ns}});
  nlohmann::json across = nlohmann::json::array();
  for (const TenantPreemption& p : r.across)
    across.push_back({{"victim", p.victim},
                      {"by", p.by},
                      {"ns", p.ns},
                      {"count", p.count},
                      {"top_pid", p.top_pid},
                      {"top_comm", p.top_comm}});
  return {{"grouping", std::string(grouping_name(r.grouping))},
          {"named", r.named},
          {"tenants", std::move(tenants)},
          {"tenants_omitted", r.tenants_omitted},
          {"preemptions", std::move(across)},
          {"preemptions_omitted", r.across_omitted}};
}

nlohmann::json process_kernels_json(const ProcessKernels& p, const std::string& name,
                                    size_t limit) {
  nlohmann::json ks = nlohmann::json::array();
  for (size_t i = 0; i < p.kernels.size() && i < limit; ++i) {
    const KernelCount& k = p.kernels[i];
    nlohmann::json kj = {{"name", k.label()},
                         {"named", !k.name.empty()},
                         {"full_name", k.full_name},
                         {"source", k.source},
                         {"func", k.func},
                         {"launches", k.launches},
                         {"steady_launches", k.steady_launches},
                         {"per_step_median", k.per_step_median},
                         {"per_step_max", k.per_step_max},
                         {"steps_with", k.steps_with},
                         {"where", k.where},
                         {"stack_id", k.stack}};
    ks.push_back(std::move(kj));
  }
  return {{"pid", p.pid},
          {"name", name},
          {"launches", p.launches},
          {"unnamed_launches", p.unnamed_launches},
          {"unnamed_functions", p.unnamed_functions},
          {"folded_launches", p.folded_launches},
          {"steady_steps", p.steady_steps},
          {"whole_steps", p.whole_steps},
          {"whole_steps_text", whole_steps_text(p)},
          {"kernels_total", p.kernels.size()},
          {"per_step", kernels_per_step_text(p)},
          {"kernels", std::move(ks)}};
}

nlohmann::json kernel_steps_json(const ProcessKernels& p, const StepSeries& s,
                                 const std::vector<size_t>& steps) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i : steps) {
    if (i >= s.steps.size() || i >= p.per_step.size()) continue;
    nlohmann::json ks = nlohmann::json::array();
    for (const auto& [k, n] : p.per_step[i])
      ks.push_back({{"name", p.kernels[k].label()}, {"launches", n}});
    nlohmann::json step = {{"step", i},
                           {"start_ns", s.steps[i].start_ns},
                           {"dur_ns", s.steps[i].duration()},
                           {"warmup", s.steps[i].warmup},
                           {"launches", s.steps[i].launches},
                           {"kernels", std::move(ks)}};
    if (p.partial(i)) step["kernels_partial"] = true;  // some launches kept no kernel
    out.push_back(std::move(step));
  }
  return out;
}

nlohmann::json kernels_json(const Analysis& a, size_t limit) {
  nlohmann::json j = nlohmann::json::object();
  uint64_t unnamed = 0, functions = 0;
  nlohmann::json procs = nlohmann::json::array();
  for (const auto& p : a.kernels.processes) {
    unnamed += p.unnamed_launches;
    functions += p.unnamed_functions;
    procs.push_back(process_kernels_json(p, a.process_name(p.pid), limit));
  }
  j["unnamed_launches"] = unnamed;
  j["unnamed_functions"] = functions;
  if (std::string line = unnamed_kernels_line(a.kernels); !line.empty()) j["summary"] = line;
  if (a.kernels.naming)
    j["tracer"] = {{"names", a.kernels.naming->names},
                   {"unnamed_launches", a.kernels.naming->unnamed_launches},
                   {"unnamed_functions", a.kernels.naming->unnamed_functions},
                   {"unreadable", a.kernels.naming->unreadable},
                   {"conflicts", a.kernels.naming->conflicts},
                   {"unnamed_functions_at_rest", a.kernels.naming->at_rest}};
  j["processes"] = std::move(procs);
  return j;
}

nlohmann::json offcpu_not_kept_json(const HostContext& h) {
  if (!h.offcpu_dropped) return nullptr;
  nlohmann::json n = {{"count", h.offcpu_dropped}};
  if (h.offcpu_kept_from_ns) n["kept_from_ns"] = h.offcpu_kept_from_ns;
  if (h.offcpu_kept_until_ns) n["kept_until_ns"] = h.offcpu_kept_until_ns;
  return n;
}

nlohmann::json report_json(const Analysis& a, const ReportHeader& o) {
  nlohmann::json j;
  j["trace"] = o.title;
  if (!o.subtitle.empty()) j["note"] = o.subtitle;
  j["events"] = a.events;
  if (a.losses) j["losses"] = losses_json(*a.losses);
  j["steps"] = steps_overview_json(a);
  if (a.kernels.named) j["kernels"] = kernels_json(a);
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
  if (a.host.offcpu_dropped) j["offcpu_intervals_not_kept"] = offcpu_not_kept_json(a.host);
  j["chains"] = nlohmann::json::array();
  for (const auto& c : a.chains) j["chains"].push_back(chain_json(c));
  j["tenants"] = tenants_json(tenant_report(a, o.group_by.value_or(TenantGrouping::kPod)));
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

#include "serve/report/engine_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/result_json.h"

namespace ingero::serve::report {
namespace {

using nlohmann::json;

double us(double ns) { return std::round(ns / 100.0) / 10.0; }  // 0.1 µs resolution

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// The columns of the step timeline, each a stacked component of a step's duration except
// gpu_idle (an overlay: the GPU had no work) and warmup (0/1).
constexpr const char* kColumns[] = {"wait",          "enqueue", "api",       "gap_on_cpu",
                                    "gap_preempted", "gap_io",  "gap_sleep", "gap_unknown",
                                    "host_other",    "dur",     "gpu_idle"};
constexpr size_t kNumColumns = std::size(kColumns);

void step_values(const engine::Step& s, double* v) {
  double gap = double(s.gap.total());
  v[0] = double(s.wait_ns);
  v[1] = double(s.enqueue_ns);
  v[2] = double(s.api_ns);
  v[3] = double(s.gap.on_cpu_ns);
  v[4] = double(s.gap.preempted_ns);
  v[5] = double(s.gap.io_ns);
  v[6] = double(s.gap.sleep_ns);
  v[7] = double(s.gap.unknown_ns);
  v[8] = std::max(0.0, double(s.host_ns) - gap);
  v[9] = double(s.duration());
  v[10] = double(s.gpu_idle_ns);
}

}  // namespace

json step_series_json(const engine::StepSeries& s, const std::string& node, const std::string& name,
                      int64_t t0_ns, size_t max_points) {
  json j = {{"node", node},
            {"pid", s.pid},
            {"name", name},
            {"cadence", engine::cadence_name(s.cadence)},
            {"cadence_note", s.cadence_note},
            {"anchor_site", s.anchor_site},
            {"steps", s.steps.size()},
            {"calls_dropped", s.calls_dropped},
            {"summary", engine::step_summary_json(s.summary)}};
  size_t n = s.steps.size();
  size_t group = max_points && n > max_points ? (n + max_points - 1) / max_points : 1;
  json t = json::array(), warm = json::array(), busy = json::array();
  std::vector<json> cols(kNumColumns, json::array());
  for (size_t i = 0; i < n; i += group) {
    size_t end = std::min(n, i + group);
    double sum[kNumColumns] = {}, v[kNumColumns];
    bool warmup = false;
    // The GPU-busy lane: the measured share, time-weighted over the group's measured steps;
    // null where no device sample covers them.
    double busy_ns = 0, measured_ns = 0;
    for (size_t k = i; k < end; ++k) {
      step_values(s.steps[k], v);
      for (size_t c = 0; c < kNumColumns; ++c) sum[c] += v[c];
      warmup = warmup || s.steps[k].warmup;
      if (s.steps[k].gpu_busy >= 0) {
        busy_ns += double(s.steps[k].gpu_busy) * double(s.steps[k].duration());
        measured_ns += double(s.steps[k].duration());
      }
    }
    busy.push_back(measured_ns > 0 ? json(std::round(1000 * busy_ns / measured_ns) / 1000)
                                   : json());
    double cnt = double(end - i);
    t.push_back(std::round(double(s.steps[i].start_ns - t0_ns) / 1e3) / 1e6);
    warm.push_back(warmup ? 1 : 0);
    for (size_t c = 0; c < kNumColumns; ++c) cols[c].push_back(us(sum[c] / cnt));
  }
  json points = {{"t", std::move(t)}, {"warmup", std::move(warm)}, {"gpu_busy", std::move(busy)}};
  for (size_t c = 0; c < kNumColumns; ++c) points[std::string(kColumns[c]) + "_us"] = cols[c];
  j["group"] = group;
  j["points"] = std::move(points);
  return j;
}

json kernel_series_json(const engine::ProcessKernels& k, const engine::StepSeries* s,
                        const std::string& node, const std::string& name, int64_t t0_ns,
                        size_t max_points, size_t max_rows) {
  json rows = json::array();
  for (size_t i = 0; i < k.kernels.size() && i < max_rows; ++i) {
    const engine::KernelCount& c = k.kernels[i];
    rows.push_back({{"name", c.label()},
                    {"named", !c.name.empty()},
                    {"full_name", c.full_name},
                    {"source", c.source},
                    {"launches", c.launches},
                    {"per_step_median", c.per_step_median},
                    {"per_step_max", c.per_step_max},
                    {"steps_with", c.steps_with},
                    {"where", c.where}});
  }
  json j = {{"node", node},
            {"pid", k.pid},
            {"name", name},
            {"launches", k.launches},
            {"unnamed_launches", k.unnamed_launches},
            {"unnamed_functions", k.unnamed_functions},
            {"folded_launches", k.folded_launches},
            {"steady_steps", k.steady_steps},
            {"kernels_total", k.kernels.size()},
            {"per_step_text", engine::kernels_per_step_text(k)},
            {"kernels", std::move(rows)}};
  if (!s || s->steps.empty() || k.per_step.size() != s->steps.size()) return j;
  // The kernels that have per-step counts: the most launched (ProcessKernels::kMaxStepKernels).
  size_t shown = std::min(k.kernels.size(), engine::ProcessKernels::kMaxStepKernels);
  size_t n = s->steps.size();
  size_t group = max_points && n > max_points ? (n + max_points - 1) / max_points : 1;
  json t = json::array(), warm = json::array(), other = json::array();
  std::vector<json> cols(shown, json::array());
  for (size_t i = 0; i < n; i += group) {
    size_t end = std::min(n, i + group);
    std::vector<double> sum(shown, 0.0);
    double rest = 0;
    bool warmup = false;
    for (size_t st = i; st < end; ++st) {
      double in_top = 0;
      for (const auto& [kernel, count] : k.per_step[st]) {
        sum[kernel] += count;
        in_top += count;
      }
      rest += std::max(0.0, double(s->steps[st].launches) - in_top);
      warmup = warmup || s->steps[st].warmup;
    }
    double cnt = double(end - i);
    t.push_back(std::round(double(s->steps[i].start_ns - t0_ns) / 1e3) / 1e6);
    warm.push_back(warmup ? 1 : 0);
    for (size_t c = 0; c < shown; ++c) cols[c].push_back(std::round(sum[c] / cnt * 10) / 10);
    other.push_back(std::round(rest / cnt * 10) / 10);
  }
  json series = json::array();
  for (size_t c = 0; c < shown; ++c)
    series.push_back({{"name", k.kernels[c].label()}, {"counts", std::move(cols[c])}});
  j["group"] = group;
  j["points"] = {{"t", std::move(t)},
                 {"warmup", std::move(warm)},
                 {"series", std::move(series)},
                 {"other", std::move(other)}};
  return j;
}

json chain_json(const engine::Chain& c, const std::string& node) {
  json j = engine::chain_json(c);  // the shape explain --json and MCP give
  j["node"] = node;
  return j;
}

json collectives_json(const engine::CollectiveReport& r, const std::string& node,
                      size_t max_ranks) {
  json out = json::array();
  for (const auto& [comm, ops] : r.groups)
    for (const auto& [op, ranks] : ops) {
      json rows = json::array();
      size_t shown = 0;
      for (const auto& [rank, cr] : ranks) {
        if (shown++ >= max_ranks) break;
        rows.push_back({{"rank", cr.rank},
                        {"nranks", cr.nranks},
                        {"pid", cr.pid},
                        {"calls", cr.starts.size()},
                        {"matched", cr.matched},
                        {"bytes", cr.bytes},
                        {"median_lag_ns", cr.median_lag()},
                        {"wait_imposed_ns", cr.wait_imposed_ns},
                        {"barrier_wait_ns", cr.barrier_wait_ns},
                        {"barrier_syncs", cr.barrier_syncs}});
      }
      out.push_back({{"node", node},
                     {"communicator", hex(comm)},
                     {"op", op},
                     {"api", r.api},
                     {"ranks", ranks.size()},
                     {"rows", std::move(rows)}});
    }
  return out;
}

json process_activity_json(const engine::ProcessReport& p) {
  return {{"role", p.role},
          {"parent", p.parent},
          {"switches", p.switches},
          {"involuntary", p.involuntary},
          {"off_cpu_ns", p.off_cpu_ns},
          {"max_off_cpu_ns", p.max_off_cpu_ns},
          {"page_allocs", p.page_allocs},
          {"page_bytes", p.page_bytes},
          {"forks", p.forks},
          {"block_ios", p.block_ios},
          {"tenant", engine::tenant_label(p.cgroup)},
          {"cgroup_path", p.cgroup.path}};
}

json tenants_json(const std::vector<std::pair<std::string, engine::TenantReport>>& per_node) {
  json rows = json::array(), across = json::array();
  bool named = false;
  for (const auto& [node, r] : per_node) {
    named = named || r.named;
    for (const auto& t : r.tenants)
      rows.push_back({{"node", node},
                      {"name", t.name},
                      {"kind", t.kind},
                      {"gpu_pids", t.gpu_pids},
                      {"calls", t.calls},
                      {"api_ns", t.api_ns},
                      {"preempted_ns", t.preempted_ns},
                      {"preempted_by_others_ns", t.preempted_by_others_ns},
                      {"preempting_ns", t.preempting_ns}});
    for (const auto& x : r.across)
      across.push_back({{"node", node},
                        {"victim", x.victim},
                        {"by", x.by},
                        {"ns", x.ns},
                        {"count", x.count},
                        {"top_pid", x.top_pid},
                        {"top_comm", x.top_comm}});
  }
  return {{"named", named}, {"rows", std::move(rows)}, {"preemptions", std::move(across)}};
}

}  // namespace ingero::serve::report

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
  json j = engine::step_series_json(s, name);  // the shape explain --json and MCP give
  j["node"] = node;
  j["steps"] = s.steps.size();
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
  json j = engine::process_kernels_json(k, name, max_rows);  // as explain --json and MCP
  j["node"] = node;
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

json process_json(const engine::ProcessReport& p, const std::string& node) {
  json j = engine::process_json(p);  // the shape explain --json gives
  j["node"] = node;
  return j;
}

json tenants_json(const std::vector<std::pair<std::string, engine::TenantReport>>& per_node) {
  json rows = json::array(), across = json::array();
  bool named = false;
  for (const auto& [node, r] : per_node) {
    named = named || r.named;
    json one = engine::tenants_json(r);  // the shape explain --json gives
    for (auto& t : one["tenants"]) {
      t["node"] = node;
      rows.push_back(std::move(t));
    }
    for (auto& x : one["preemptions"]) {
      x["node"] = node;
      across.push_back(std::move(x));
    }
  }
  return {{"named", named}, {"rows", std::move(rows)}, {"preemptions", std::move(across)}};
}

}  // namespace ingero::serve::report

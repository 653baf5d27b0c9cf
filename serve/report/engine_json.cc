#include "serve/report/engine_json.h"

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
          {"block_ios", p.block_ios}};
}

}  // namespace ingero::serve::report

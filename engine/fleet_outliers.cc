// The fleet analysis entry point, and the per-node outlier rule: a node whose median step
// time or launch rate is far from the other nodes', by the median absolute deviation (robust
// to the outlier itself, unlike a mean and standard deviation over a handful of nodes).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/fleet.h"
#include "engine/hangs.h"

namespace ingero::engine {
namespace {

constexpr size_t kMinNodes = 3;
constexpr double kMadZ = 3.5;          // |x - median| / (1.4826 MAD) beyond which a node is odd
constexpr double kMinRelative = 0.20;  // and at least 20% away from the median
constexpr double kMadFloor = 0.05;     // MAD floor: 5% of the median (identical peers)
constexpr size_t kMinSteps = 3;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::vector<NodeProfile> node_profiles(const std::map<std::string, const Analysis*>& per_node) {
  std::vector<NodeProfile> out;
  for (const auto& [node, a] : per_node) {
    NodeProfile p;
    p.node = node;
    std::vector<double> steps;
    uint64_t launches = 0;
    for (const StepSeries& s : a->steps.processes) {
      for (const TopLevelOp& op : s.ops)
        if (op.kind == hal::EventKind::kLaunch) launches += op.calls;
      if (s.summary.steps >= kMinSteps && s.summary.median_ns) {
        steps.push_back(double(s.summary.median_ns));
        ++p.gpu_processes;
      }
    }
    if (!steps.empty()) p.step_ns = uint64_t(median_of(steps));
    double secs = a->span.second > a->span.first ? double(a->span.second - a->span.first) / 1e9 : 0;
    if (secs > 0) p.launch_rate = double(launches) / secs;
    out.push_back(p);
  }
  return out;
}

void rule_node_outliers(const std::vector<NodeProfile>& profiles, std::vector<Chain>& out) {
  // What a node above the median, and one below it, is. A low launch rate is no faster node
  // (n2 launching 12.7/s against a median of 1293.2/s was "faster than the rest").
  struct Metric {
    const char* name;
    const char* unit;
    double (*get)(const NodeProfile&);
    const char* above;
    const char* below;
  };
  static const Metric kMetrics[] = {
      {"median step time", "ms", [](const NodeProfile& p) { return double(p.step_ns) / 1e6; },
       " is slower", " is faster"},
      {"kernel launch rate", "/s", [](const NodeProfile& p) { return p.launch_rate; },
       " launches kernels more often", " launches kernels less often"}};
  for (const Metric& m : kMetrics) {
    std::vector<std::pair<double, const NodeProfile*>> v;
    for (const auto& p : profiles)
      if (m.get(p) > 0) v.push_back({m.get(p), &p});
    if (v.size() < kMinNodes) continue;
    std::vector<double> xs;
    for (auto& [x, p] : v) xs.push_back(x);
    double med = median_of(xs);
    std::vector<double> dev;
    for (double x : xs) dev.push_back(std::fabs(x - med));
    double scale = std::max(1.4826 * median_of(dev), kMadFloor * med);
    std::string others;
    for (auto& [x, p] : v) {
      char b[64];
      std::snprintf(b, sizeof(b), "%s %.1f%s", p->node.c_str(), x, m.unit);
      others += (others.empty() ? "" : ", ") + std::string(b);
    }
    for (auto& [x, p] : v) {
      double z = (x - med) / scale;
      if (std::fabs(z) < kMadZ || std::fabs(x - med) < kMinRelative * med) continue;
      char line[256];
      std::snprintf(line, sizeof(line),
                    "%s's %s is %.1f%s against a fleet median of %.1f%s "
                    "(robust z %.1f over %zu nodes)",
                    p->node.c_str(), m.name, x, m.unit, med, m.unit, z, v.size());
      Chain c;
      c.rule = "node_outlier";
      c.node = p->node;
      c.op = m.name;
      c.summary = line;
      c.root_cause = p->node + (x > med ? m.above : m.below) +
                     " than the rest of the "
                     "fleet on the same job: its own report (--node " +
                     p->node + ") says why";
      c.explanation = std::string("Nodes: ") + others +
                      ". A node is an outlier when it is more "
                      "than 3.5 robust standard deviations (1.4826 x the median absolute "
                      "deviation) and 20% away from the median.";
      c.timeline.push_back({"FLEET", m.name, line, 0});
      c.severity = Severity::kMedium;
      c.fixes = {"Compare " + p->node +
                     "'s hardware, driver, clocks and co-located work with a "
                     "typical node",
                 "ingero explain --source ... --node " + p->node};
      c.id = c.rule + ":" + m.name + ":" + p->node;
      c.score = std::fabs(z);
      out.push_back(std::move(c));
    }
  }
}

FleetAnalysis analyze_fleet(TraceSource& source, const Window& w,
                            const std::vector<std::string>& nodes,
                            const std::map<std::string, const Analysis*>& per_node,
                            std::vector<NodeClock> clocks, const ClockShift& shift) {
  FleetAnalysis f;
  f.nodes = nodes;
  f.clocks = std::move(clocks);
  auto communicators = gather_fleet_collectives(source, w, nodes, shift);
  f.communicators = communicators.size();
  for (const auto& c : communicators) f.cross_node_communicators += c.node_count() > 1;
  rule_mismatched_collectives(communicators, f.chains);
  std::vector<InflightRow> stuck;  // every node's, as its own analysis read them
  for (const auto& [node, a] : per_node)
    for (const auto& r : a->inflight) {
      stuck.push_back(r);
      if (stuck.back().node.empty()) stuck.back().node = node;
    }
  rule_fleet_hangs(source, communicators, stuck, f.chains);
  rule_fleet_straggler(communicators, per_node, shift, f.clocks, f.chains);
  f.profiles = node_profiles(per_node);
  rule_node_outliers(f.profiles, f.chains);
  std::stable_sort(f.chains.begin(), f.chains.end(), [](const Chain& x, const Chain& y) {
    if (x.severity != y.severity) return x.severity > y.severity;
    return x.score > y.score;
  });
  return f;
}

}  // namespace ingero::engine

// Clock offsets between nodes, from collective completions.
//
// A collective completes on every rank at nearly the same instant: when the last rank has
// arrived and the data has moved. The host sees it at the end of the first sync after the
// collective (where it waits for the device). Only such completions count: a collective's own
// return is its enqueue on a GPU, as late as its rank arrived, and using it would turn a
// consistent straggler into a clock offset. For each
// collective shared by node n and the reference node R, d = (n's completion) - (R's
// completion) = offset(n) - offset(R) + (the difference of the two hosts' observation
// delays). The estimate is the median of d over all shared collectives: observation delays
// (a wake-up, a preemption right at the completion) are one-sided and rare, so the median
// ignores them as long as most completions are seen promptly. The error bound reported is
// 1.4826 x the median absolute deviation of d (one standard deviation for normal noise), plus
// the reference's own bound after centring; a systematic delay on one node that affects most
// of its completions is not visible in the data and would bias the estimate by that delay.
//
// Offsets are then centred on the median node (the lower median), so a majority of nodes that
// agree keeps offset 0 and the odd node carries the skew; with two nodes, the one with more
// shared collectives (then the first by name) is the reference.
#include <algorithm>
#include <cstdio>
#include <set>

#include "engine/fleet.h"

namespace ingero::engine {
namespace {

constexpr size_t kMinClockSamples = 5;

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + (v.size() - 1) / 2, v.end());
  return v[(v.size() - 1) / 2];
}

int64_t spread(const std::vector<int64_t>& v, int64_t med) {
  std::vector<int64_t> dev;
  dev.reserve(v.size());
  for (int64_t x : v) dev.push_back(x > med ? x - med : med - x);
  return int64_t(1.4826 * double(median_of(std::move(dev)))) + 1;
}

}  // namespace

std::vector<NodeClock> estimate_clock_offsets(const std::vector<FleetCommunicator>& communicators,
                                              const std::vector<std::string>& nodes) {
  // node -> (comm hash, seq) -> median completion of the node's ranks.
  using Instance = std::pair<uint64_t, uint64_t>;
  std::map<std::string, std::map<Instance, int64_t>> done;
  for (const FleetCommunicator& c : communicators) {
    if (c.node_count() < 2) continue;
    std::map<std::string, std::map<uint64_t, std::vector<int64_t>>> by_node;
    for (const auto& [rk, r] : c.ranks)
      for (const RankCall& call : r.calls)
        if (call.synced) by_node[r.node][call.seq].push_back(call.done);
    for (auto& [node, seqs] : by_node)
      for (auto& [seq, times] : seqs) done[node][{c.hash, seq}] = median_of(std::move(times));
  }
  std::vector<NodeClock> out;
  std::string ref;
  size_t ref_n = 0;
  for (const std::string& n : nodes)
    if (done[n].size() > ref_n) ref = n, ref_n = done[n].size();
  std::map<std::string, int64_t> error;
  for (const std::string& n : nodes) {
    NodeClock nc;
    nc.node = n;
    if (ref.empty()) {
      nc.method = "not estimated: no synced collective spans nodes";
      out.push_back(nc);
      continue;
    }
    std::vector<int64_t> d;
    for (const auto& [inst, t] : done[n])
      if (auto it = done[ref].find(inst); it != done[ref].end()) d.push_back(t - it->second);
    nc.samples = d.size();
    if (n == ref) {
      nc.method = "collective completion";
    } else if (d.size() < kMinClockSamples) {
      nc.method = "not estimated: " + std::to_string(d.size()) + " collectives shared with " + ref +
                  " (" + std::to_string(kMinClockSamples) + " needed)";
    } else {
      nc.offset_ns = median_of(d);
      nc.error_ns = spread(d, nc.offset_ns);
      nc.method = "collective completion";
    }
    out.push_back(nc);
  }
  // Centre on the median estimated node.
  std::vector<std::pair<int64_t, size_t>> est;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].method == "collective completion") est.push_back({out[i].offset_ns, i});
  if (est.empty()) return out;
  std::sort(est.begin(), est.end());
  const auto& [centre, ci] = est[(est.size() - 1) / 2];
  const int64_t centre_err = out[ci].error_ns;
  for (auto& [o, i] : est) {
    NodeClock& nc = out[i];
    nc.offset_ns -= centre;
    if (i == ci) {
      nc.reference = true;
      nc.error_ns = 0;
    } else {
      nc.error_ns += centre_err;
    }
  }
  return out;
}

ClockShift clock_shift(const std::vector<NodeClock>& clocks) {
  ClockShift s;
  for (const auto& c : clocks)
    if (c.offset_ns) s[c.node] = c.offset_ns;
  return s;
}

}  // namespace ingero::engine

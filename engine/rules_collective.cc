// Collective stragglers: the rank that keeps arriving last. Collectives of one communicator
// are matched by sequence number across ranks (the i-th all-reduce of every rank is the same
// collective); each rank's lag is its entry time minus the earliest entry. On one host the
// ranks are processes; after `ingero merge` they are nodes too.
#include <algorithm>
#include <cstdio>
#include <map>

#include "engine/analysis.h"
#include "engine/thresholds.h"

namespace ingero::engine {
namespace {

struct RankKey {
  std::string node;
  uint32_t pid = 0;
  auto operator<=>(const RankKey&) const = default;
};

struct Entry {
  int64_t ts = 0, end = 0;
};

}  // namespace

void rule_collective_straggler(TraceSource& source, const Analysis& a, std::vector<Chain>& out) {
  // (pid, communicator) -> (rank, nranks, comm_hash) from init calls.
  std::map<std::pair<uint32_t, uint64_t>, std::tuple<uint64_t, uint64_t, uint64_t>> comm_of;
  // comm_hash/communicator -> op -> rank -> entries (in call order)
  struct Rank {
    uint32_t pid = 0;
    std::vector<Entry> entries;
  };
  std::map<uint64_t, std::map<std::string, std::map<uint64_t, Rank>>> groups;
  std::string api, vendor;
  source.calls(a.window, [&](const hal::Event& e) {
    if (e.kind == hal::EventKind::kCommInit) {
      if (auto c = e.get(hal::Field::kComm))
        comm_of[{e.pid, *c}] = {e.get_or(hal::Field::kRank, 0), e.get_or(hal::Field::kNranks, 0),
                                e.get_or(hal::Field::kCommHash, *c)};
      return;
    }
    if (e.kind != hal::EventKind::kCollective) return;
    uint64_t comm = e.get_or(hal::Field::kComm, 0);
    std::optional<uint64_t> rank = e.get(hal::Field::kRank);
    uint64_t group = e.get_or(hal::Field::kCommHash, comm);
    if (auto it = comm_of.find({e.pid, comm}); it != comm_of.end()) {
      if (!rank) rank = std::get<0>(it->second);
      group = std::get<2>(it->second);
    }
    if (!rank) rank = e.pid;  // unknown rank: processes stand in for ranks
    Rank& r = groups[group][std::string(e.op)][*rank];
    r.pid = e.pid;
    if (r.entries.size() < 1'000'000)
      r.entries.push_back({int64_t(e.ts_ns), int64_t(e.ts_ns + e.dur_ns)});
    if (api.empty()) {
      api = std::string(e.api);
      vendor = std::string(e.vendor);
    }
  });
  for (auto& [group, ops] : groups) {
    for (auto& [op, ranks] : ops) {
      if (ranks.size() < 2) continue;
      size_t n = SIZE_MAX;
      for (auto& [rk, r] : ranks) n = std::min(n, r.entries.size());
      if (n < kMinCollectives) continue;
      std::map<uint64_t, std::vector<int64_t>> lags;
      std::map<uint64_t, uint64_t> last_count;
      std::map<uint64_t, int64_t>
          wait_imposed;  // sum over collectives of (its entry - others' entries)
      for (size_t i = 0; i < n; ++i) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        uint64_t last_rank = 0;
        for (auto& [rk, r] : ranks) {
          lo = std::min(lo, r.entries[i].ts);
          if (r.entries[i].ts > hi) {
            hi = r.entries[i].ts;
            last_rank = rk;
          }
        }
        for (auto& [rk, r] : ranks) lags[rk].push_back(r.entries[i].ts - lo);
        ++last_count[last_rank];
        wait_imposed[last_rank] += hi - lo;
      }
      // The rank that is last most often, with its median lag.
      auto top = std::max_element(last_count.begin(), last_count.end(),
                                  [](auto& x, auto& y) { return x.second < y.second; });
      uint64_t rk = top->first;
      auto& lv = lags[rk];
      std::nth_element(lv.begin(), lv.begin() + lv.size() / 2, lv.end());
      int64_t median_lag = lv[lv.size() / 2];
      double last_share = double(top->second) / double(n);
      if (last_share < kStragglerLastShare || median_lag < kStragglerMinLagNs) continue;
      // Peers' median lag, for contrast.
      std::vector<int64_t> peers;
      for (auto& [k, v] : lags)
        if (k != rk) peers.insert(peers.end(), v.begin(), v.end());
      std::nth_element(peers.begin(), peers.begin() + peers.size() / 2, peers.end());
      int64_t peer_lag = peers.empty() ? 0 : peers[peers.size() / 2];
      uint32_t pid = ranks[rk].pid;
      Chain c;
      c.rule = "collective_straggler";
      c.vendor = vendor;
      c.api = api;
      c.op = op;
      for (auto& [k, r] : ranks) c.pids.push_back(r.pid);
      std::string who = "rank " + std::to_string(rk) + " (" + a.process_name(pid) + ", pid " +
                        std::to_string(pid) + ")";
      char share[16];
      std::snprintf(share, sizeof(share), "%.0f%%", last_share * 100);
      c.summary = op + " straggler: " + who + " arrives last in " + share + " of " +
                  format_count(n) + " collectives, median " +
                  format_duration(uint64_t(median_lag)) +
                  " behind its peers (peers: " + format_duration(uint64_t(peer_lag)) + ")";
      c.window_start = ranks[rk].entries.front().ts;
      c.window_end = ranks[rk].entries[n - 1].end;
      // Host evidence on the straggler before it entered: was it off-CPU?
      std::vector<TailWindow> windows;
      for (size_t i = 0; i < n && windows.size() < kMaxTailWindowsPerOp; ++i) {
        int64_t lo = INT64_MAX;
        for (auto& [k, r] : ranks) lo = std::min(lo, r.entries[i].ts);
        if (ranks[rk].entries[i].ts > lo) windows.push_back({lo, ranks[rk].entries[i].ts, 0});
      }
      uint64_t off = 0, sw = 0;
      if (auto it = a.host.offcpu.find(pid); it != a.host.offcpu.end())
        for (const auto& iv : it->second)
          for (const auto& w : windows)
            if (iv.end >= w.start && iv.start <= w.end) {
              off += uint64_t(std::min(iv.end, w.end) - std::max(iv.start, w.start));
              ++sw;
            }
      uint64_t tcp = 0;
      for (int64_t t : a.host.tcp_times)
        for (const auto& w : windows)
          if (t >= w.start && t <= w.end) ++tcp;
      c.root_cause = "Rank " + std::to_string(rk) +
                     " reaches the collective late and every other rank waits for it";
      if (off)
        c.root_cause += "; it was off-CPU for " + format_duration(off) + " of its lag (" +
                        format_count(sw) + " switches)";
      if (tcp)
        c.root_cause += "; " + format_count(tcp) + " TCP retransmits fell inside the lag windows";
      c.explanation = "Across " + format_count(n) + " matched " + op + " calls, " + who +
                      " entered last " + format_count(top->second) + " times and imposed " +
                      format_duration(uint64_t(wait_imposed[rk])) + " of waiting on its peers.";
      c.timeline.push_back(
          {layer_of(api), op,
           who + ": median lag " + format_duration(uint64_t(median_lag)) + ", last in " + share,
           0});
      if (off)
        c.timeline.push_back({"HOST", "sched_switch",
                              format_count(sw) + " context switches of the straggler, " +
                                  format_duration(off) + " off-CPU while peers waited",
                              off / 1000});
      if (tcp)
        c.timeline.push_back(
            {"NET", "tcp_retransmit", format_count(tcp) + " retransmits during the lag", 0});
      c.severity = median_lag >= kStragglerHighLagNs ? Severity::kHigh : Severity::kMedium;
      c.fixes = {
          "Inspect what rank " + std::to_string(rk) +
              " does before the collective: data loading, "
              "host preemption, a slower GPU or link",
          "Compare its step time with peers (ingero explain --pid " + std::to_string(pid) + ")"};
      if (off)
        c.fixes.push_back("Pin rank " + std::to_string(rk) + "'s process to dedicated cores");
      if (tcp)
        c.fixes.push_back("Check the rank's NIC and fabric path: retransmits point at the network");
      c.id = c.rule + ":" + std::to_string(group) + ":" + op;
      c.score = double(median_lag) / 1e6;
      out.push_back(std::move(c));
    }
  }
}

}  // namespace ingero::engine

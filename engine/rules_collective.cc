// Collective stragglers: the rank that keeps arriving last. Collectives of one communicator
// are matched by sequence number across ranks (the i-th all-reduce of every rank is the same
// collective); each rank's lag is its entry time minus the earliest entry. On one host the
// ranks are processes; after `ingero merge` they are nodes too.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "engine/analysis.h"
#include "engine/thresholds.h"
#include "hal/call_failure.h"

namespace ingero::engine {
namespace {

using Ranks = std::map<uint64_t, CollectiveRank>;

// One pass over the calls: each rank's collectives, in their communicator, and the stream syncs
// that wait for them.
class CollectiveReader {
 public:
  CollectiveReport rep;

  void call(const hal::Event& e) {
    if (e.kind == hal::EventKind::kCommInit)
      comm_init(e);
    else if (e.kind == hal::EventKind::kSync)
      sync(e);
    else if (e.kind == hal::EventKind::kCollective)
      collective(e);
  }

 private:
  struct Pending {
    size_t index;  // into the rank's entries
    int64_t end;
  };
  // (pid, communicator) -> (rank, nranks, comm_hash) from init calls, for traces whose
  // collectives were not joined at capture time.
  std::map<std::pair<uint32_t, uint64_t>, std::tuple<uint64_t, uint64_t, uint64_t>>
      communicator_of_;
  // Collectives waiting for the next sync on their (pid, stream).
  std::map<std::pair<uint32_t, uint64_t>, std::vector<std::pair<CollectiveRank*, Pending>>>
      pending_;

  // A failed init made no communicator (older files stored the caller's stale handle as one),
  // and a failed collective moved nothing: the report had 4 failed all-reduces as 16 KiB
  // reduced by rank 3 of 8 of a communicator that never existed. A failed collective is still
  // a call its rank made (matched with its peers'), of no bytes.
  void comm_init(const hal::Event& e) {
    if (hal::is_failure(e)) return;
    if (auto c = e.get(hal::Field::kCommunicator))
      communicator_of_[{e.pid, *c}] = {e.get_or(hal::Field::kRank, 0),
                                       e.get_or(hal::Field::kNranks, 0),
                                       e.get_or(hal::Field::kCommHash, *c)};
  }

  // Barrier correlator: the first sync after a collective on the same stream (or a device-wide
  // sync) is where the host waits for it to complete.
  void sync(const hal::Event& e) {
    uint64_t stream = e.get_or(hal::Field::kStream, UINT64_MAX);
    for (auto it = pending_.lower_bound({e.pid, 0});
         it != pending_.end() && it->first.first == e.pid;) {
      if (stream != UINT64_MAX && it->first.second != stream) {
        ++it;
        continue;
      }
      for (auto& [rank, p] : it->second) {
        if (int64_t(e.ts_ns) < p.end) continue;
        rank->barrier_wait_ns += e.dur_ns;
        ++rank->barrier_syncs;
      }
      it = pending_.erase(it);
    }
  }

  void collective(const hal::Event& e) {
    uint64_t communicator = e.get_or(hal::Field::kCommunicator, 0);
    std::optional<uint64_t> rank = e.get(hal::Field::kRank);
    uint64_t group = e.get_or(hal::Field::kCommHash, communicator);
    uint64_t nranks = e.get_or(hal::Field::kNranks, 0);
    if (auto it = communicator_of_.find({e.pid, communicator}); it != communicator_of_.end()) {
      if (!rank) rank = std::get<0>(it->second);
      if (!nranks) nranks = std::get<1>(it->second);
      group = std::get<2>(it->second);
    }
    if (!rank) rank = e.pid;  // unknown rank: processes stand in for ranks
    CollectiveRank& r = rep.groups[group][std::string(e.op)][*rank];
    r.rank = *rank;
    r.pid = e.pid;
    r.nranks = nranks;
    if (rep.api.empty()) {
      rep.api = std::string(e.api);
      rep.vendor = std::string(e.vendor);
    }
    if (r.starts.size() >= 1'000'000) return;
    r.starts.push_back(int64_t(e.ts_ns));
    r.ends.push_back(int64_t(e.ts_ns + e.dur_ns));
    if (!hal::is_failure(e)) r.bytes += e.get_or(hal::Field::kBytes, 0);
    pending_[{e.pid, e.get_or(hal::Field::kStream, 0)}].push_back(
        {&r, {r.starts.size() - 1, int64_t(e.ts_ns + e.dur_ns)}});
  }
};

// Lags: the i-th call of every rank is the same collective. Each rank's lag behind the first
// arrival, and who arrived last and what that cost the others.
void match_ranks(Ranks& ranks) {
  size_t n = SIZE_MAX;
  for (auto& [rk, r] : ranks) n = std::min(n, r.starts.size());
  if (ranks.size() < 2 || n == SIZE_MAX) return;
  for (size_t i = 0; i < n; ++i) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    CollectiveRank* last = nullptr;
    for (auto& [rk, r] : ranks) {
      lo = std::min(lo, r.starts[i]);
      if (r.starts[i] > hi) {
        hi = r.starts[i];
        last = &r;
      }
    }
    for (auto& [rk, r] : ranks) r.lags.push_back(r.starts[i] - lo);
    ++last->last_count;
    last->wait_imposed_ns += uint64_t(hi - lo);
  }
  for (auto& [rk, r] : ranks) r.matched = n;
}

}  // namespace

CollectiveReport compute_collectives(TraceSource& source, const Window& window) {
  CollectiveReader reader;
  source.call_runs(
      window, [&](const hal::Event& e) { reader.call(e); }, ignore_runs);
  for (auto& [group, ops] : reader.rep.groups)
    for (auto& [op, ranks] : ops) match_ranks(ranks);
  return std::move(reader.rep);
}

namespace {

// The rank that arrives last in most of one op's matched collectives of one communicator, and
// how far behind it is against its peers.
struct Straggler {
  uint64_t rank = 0;
  const CollectiveRank* s = nullptr;
  size_t n = 0;  // matched collectives
  int64_t median_lag = 0, peer_lag = 0;
  double last_share = 0;                      // of the n, the share it arrived last in
  uint64_t peer_barrier = 0, peer_syncs = 0;  // the peers' stream syncs after the collectives
};

std::optional<Straggler> find_straggler(const Ranks& ranks) {
  if (ranks.size() < 2) return std::nullopt;
  size_t n = ranks.begin()->second.matched;
  if (n < kMinCollectives) return std::nullopt;
  auto top = std::max_element(ranks.begin(), ranks.end(), [](auto& x, auto& y) {
    return x.second.last_count < y.second.last_count;
  });
  Straggler st;
  st.rank = top->first;
  st.s = &top->second;
  st.n = n;
  st.median_lag = st.s->median_lag();
  st.last_share = double(st.s->last_count) / double(n);
  if (st.last_share < kStragglerLastShare || st.median_lag < kStragglerMinLagNs)
    return std::nullopt;
  std::vector<int64_t> peers;
  for (auto& [k, r] : ranks) {
    if (k == st.rank) continue;
    peers.insert(peers.end(), r.lags.begin(), r.lags.end());
    st.peer_barrier += r.barrier_wait_ns;
    st.peer_syncs += r.barrier_syncs;
  }
  std::nth_element(peers.begin(), peers.begin() + peers.size() / 2, peers.end());
  st.peer_lag = peers.empty() ? 0 : peers[peers.size() / 2];
  return st;
}

// Host evidence on the straggler before it entered, while its peers waited: was it off-CPU, did
// TCP retransmit?
struct LagEvidence {
  uint64_t off = 0, switches = 0, tcp = 0;
};

LagEvidence lag_evidence(const Analysis& a, const Ranks& ranks, const Straggler& st) {
  const CollectiveRank& s = *st.s;
  std::vector<TailWindow> windows;  // from the first arrival to the straggler's
  for (size_t i = 0; i < st.n && windows.size() < kMaxTailWindowsPerOp; ++i) {
    int64_t lo = INT64_MAX;
    for (auto& [k, r] : ranks) lo = std::min(lo, r.starts[i]);
    if (s.starts[i] > lo) windows.push_back({lo, s.starts[i], 0});
  }
  LagEvidence ev;
  if (auto it = a.host.offcpu.find(s.pid); it != a.host.offcpu.end())
    for (const auto& iv : it->second)
      for (const auto& w : windows)
        if (iv.end >= w.start && iv.start <= w.end) {
          ev.off += uint64_t(std::min(iv.end, w.end) - std::max(iv.start, w.start));
          ++ev.switches;
        }
  for (int64_t t : a.host.tcp_times)
    for (const auto& w : windows)
      if (t >= w.start && t <= w.end) ++ev.tcp;
  return ev;
}

void straggler_timeline(const std::string& api, const std::string& op, const std::string& who,
                        const std::string& share, const Straggler& st, const LagEvidence& ev,
                        Chain& c) {
  c.timeline.push_back(
      {layer_of(api), op,
       who + ": median lag " + format_duration(uint64_t(st.median_lag)) + ", last in " + share, 0});
  if (ev.off)
    c.timeline.push_back({"HOST", "sched_switch",
                          format_count(ev.switches) + " context switches of the straggler, " +
                              format_duration(ev.off) + " off-CPU while peers waited",
                          ev.off / 1000});
  if (ev.tcp)
    c.timeline.push_back(
        {"NET", "tcp_retransmit", format_count(ev.tcp) + " retransmits during the lag", 0});
}

std::vector<std::string> straggler_fixes(const Straggler& st, const LagEvidence& ev) {
  std::string rk = std::to_string(st.rank);
  std::vector<std::string> fixes = {
      "Inspect what rank " + rk +
          " does before the collective: data loading, "
          "host preemption, a slower GPU or link",
      "Compare its step time with peers (ingero explain --pid " + std::to_string(st.s->pid) + ")"};
  if (ev.off) fixes.push_back("Pin rank " + rk + "'s process to dedicated cores");
  if (ev.tcp)
    fixes.push_back("Check the rank's NIC and fabric path: retransmits point at the network");
  return fixes;
}

Chain straggler_chain(const Analysis& a, const CollectiveReport& rep, uint64_t group,
                      const std::string& op, const Ranks& ranks, const Straggler& st,
                      const LagEvidence& ev) {
  const CollectiveRank& s = *st.s;
  size_t n = st.n;
  Chain c = new_chain("collective_straggler", rep.vendor, rep.api, op, {}, 0, 0);
  for (auto& [k, r] : ranks) c.pids.push_back(r.pid);
  std::string name = a.process_name(s.pid), id = "pid " + std::to_string(s.pid);
  std::string who =
      "rank " + std::to_string(st.rank) + " (" + (name == id ? id : name + ", " + id) + ")";
  char share[16];
  std::snprintf(share, sizeof(share), "%.0f%%", st.last_share * 100);
  c.summary = op + " straggler: " + who + " arrives last in " + share + " of " + format_count(n) +
              " collectives, median " + format_duration(uint64_t(st.median_lag)) +
              " behind its peers (peers: " + format_duration(uint64_t(st.peer_lag)) + ")";
  c.window_start = s.starts.front();
  c.window_end = s.ends[n - 1];
  c.root_cause = "Rank " + std::to_string(st.rank) +
                 " reaches the collective late and every other rank waits for it";
  if (ev.off)
    c.root_cause += "; it was off-CPU for " + format_duration(ev.off) + " of its lag (" +
                    format_count(ev.switches) + " switches)";
  if (ev.tcp)
    c.root_cause += "; " + format_count(ev.tcp) + " TCP retransmits fell inside the lag windows";
  c.explanation = "Across " + format_count(n) + " matched " + op + " calls, " + who +
                  " entered last " + format_count(s.last_count) + " times and imposed " +
                  format_duration(s.wait_imposed_ns) + " of waiting on its peers.";
  if (st.peer_syncs)
    c.explanation += " Its peers then spent " + format_duration(st.peer_barrier) + " in " +
                     format_count(st.peer_syncs) +
                     " stream synchronisations after their collectives (barrier wait).";
  straggler_timeline(rep.api, op, who, share, st, ev, c);
  c.severity = st.median_lag >= kStragglerHighLagNs ? Severity::kHigh : Severity::kMedium;
  c.fixes = straggler_fixes(st, ev);
  c.id = c.rule + ":" + std::to_string(group) + ":" + op;
  c.score = double(st.median_lag) / 1e6;
  return c;
}

}  // namespace

void rule_collective_straggler(TraceSource& source, const Analysis& a, std::vector<Chain>& out) {
  // Without collectives there are no ranks to compare (the syncs it also reads are the waits
  // after collectives).
  if (a.stats.lacks({hal::EventKind::kCollective})) return;
  CollectiveReport rep = compute_collectives(source, a.window);
  for (const auto& [group, ops] : rep.groups)
    for (const auto& [op, ranks] : ops)
      if (auto st = find_straggler(ranks))
        out.push_back(straggler_chain(a, rep, group, op, ranks, *st, lag_evidence(a, ranks, *st)));
}

void rule_fabric_errors(TraceSource& source, const Analysis& a, std::vector<Chain>& out) {
  auto samples = source.device_error_samples(a.window);
  if (samples.empty()) return;
  // Increases per (device, port, counter), with the interval in which each happened.
  struct Increase {
    int64_t from, to;
    uint64_t delta;
  };
  std::map<std::tuple<std::string, uint32_t, std::string>, std::vector<Increase>> incs;
  std::map<std::tuple<std::string, uint32_t, std::string>, std::pair<int64_t, uint64_t>> last;
  for (const auto& s : samples) {
    auto key = std::make_tuple(s.device, s.port, s.counter);
    auto it = last.find(key);
    if (it != last.end() && s.value > it->second.second)
      incs[key].push_back({it->second.first, s.ts_ns, s.value - it->second.second});
    last[key] = {s.ts_ns, s.value};
  }
  if (incs.empty()) return;
  // Collective tails that fall in an interval where error counters rose.
  for (const OpStats& s : a.stats.per_process) {
    if (s.key.kind != hal::EventKind::kCollective && s.key.kind != hal::EventKind::kP2P) continue;
    if (s.count < kMinCallsForTail || s.tail_ratio() < kTailRatioMedium) continue;
    uint64_t hits = 0;
    std::map<std::string, uint64_t> counters;  // "mlx5_0/1 port_rcv_errors" -> increase
    bool severe = false;
    for (const auto& [key, list] : incs) {
      for (const auto& inc : list) {
        bool overlap = false;
        for (const auto& w : s.tail_windows)
          if (w.end >= inc.from && w.start <= inc.to) {
            overlap = true;
            ++hits;
          }
        if (!overlap) continue;
        const auto& [dev, port, counter] = key;
        counters[dev + "/" + std::to_string(port) + " " + counter] += inc.delta;
        severe |= counter == "link_downed" || counter == "symbol_error" ||
                  counter == "link_error_recovery";
      }
    }
    if (counters.empty()) continue;
    std::string list;
    for (const auto& [k, d] : counters)
      list += (list.empty() ? "" : ", ") + k + " +" + format_count(d);
    Chain c = chain_for_op("fabric_errors", s);
    char r[32];
    std::snprintf(r, sizeof(r), "%.1fx", s.tail_ratio());
    c.summary = s.key.op + " p99=" + format_duration(s.p99) + " (" + r +
                " p50=" + format_duration(s.p50) + ") while fabric error counters rose: " + list;
    c.root_cause = "Network fabric errors on this host's RDMA ports during the slow collectives";
    c.explanation = format_count(hits) + " slow " + s.key.op +
                    " calls overlapped counter increases (" + list + ").";
    c.timeline.push_back({"NET", "rdma_counters", list, 0});
    c.timeline.push_back({layer_of(s.key.api), s.key.op,
                          "p99=" + format_duration(s.p99) + " (" + r + " p50)", s.p99 / 1000});
    c.severity = severe ? Severity::kHigh : Severity::kMedium;
    c.fixes = {
        "Check the cable/transceiver and switch port of the listed HCA port (symbol errors and "
        "link downs are physical)",
        "Compare with peers' counters; reseat or replace the link before tuning NCCL"};
    c.id = c.rule + ":" + std::to_string(s.key.pid) + ":" + s.key.op;
    c.score = double(hits);
    out.push_back(std::move(c));
  }
}

}  // namespace ingero::engine

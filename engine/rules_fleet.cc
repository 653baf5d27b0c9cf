// Cross-node collective rules: the straggler rank with its node and host cause, and the first
// collective where the ranks of a communicator disagree.
#include <algorithm>
#include <cstdio>

#include "engine/fleet.h"
#include "engine/thresholds.h"

namespace ingero::engine {
namespace {

constexpr int64_t kLookbackNs = 60'000'000'000LL;
// A rank that never issued a collective its peers entered, while its node kept tracing for
// this long after: a divergence, not the end of the trace.
constexpr int64_t kMissingGraceNs = 1'000'000'000LL;

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "%016llx", (unsigned long long)v);
  return b;
}

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

const RankCall* at_seq(const FleetRank& r, uint64_t seq) {
  auto it = std::lower_bound(r.calls.begin(), r.calls.end(), seq,
                             [](const RankCall& c, uint64_t s) { return c.seq < s; });
  return it != r.calls.end() && it->seq == seq ? &*it : nullptr;
}

// How one rank spent the time between its previous collective's completion and its arrival.
struct PhaseTime {
  size_t phases = 0;
  uint64_t total = 0, preempted = 0, io = 0, sleep = 0;
  std::map<uint32_t, Preemptor> by;
  uint64_t block_ios = 0, block_bytes = 0;
  uint64_t on_cpu() const {
    uint64_t off = preempted + io + sleep;
    return total > off ? total - off : 0;
  }
};

struct Phase {
  int64_t start, end;
  uint32_t tid;
};

PhaseTime phase_time(const Analysis* a, uint32_t pid, const std::vector<Phase>& phases,
                     int64_t shift) {
  PhaseTime t;
  t.phases = phases.size();
  for (const Phase& p : phases) t.total += uint64_t(p.end - p.start);
  if (!a) return t;
  if (auto it = a->host.offcpu.find(pid); it != a->host.offcpu.end()) {
    const auto& iv = it->second;
    for (const Phase& p : phases) {
      int64_t lo = p.start + shift, hi = p.end + shift;
      auto k = std::lower_bound(iv.begin(), iv.end(), lo - kLookbackNs,
                                [](const OffCpuInterval& x, int64_t s) { return x.start < s; });
      for (; k != iv.end() && k->start <= hi; ++k) {
        if (k->tid != p.tid) continue;
        int64_t s = std::max(k->start, lo), e = std::min(k->end, hi);
        if (e <= s) continue;
        uint64_t d = uint64_t(e - s);
        if (k->preempted) {
          t.preempted += d;
          if (uint32_t by = a->host.by_pid(*k)) {
            Preemptor& pr = t.by[by];
            pr.pid = by;
            pr.comm = a->host.comm_name(a->host.by_comm(*k));
            ++pr.count;
            pr.off_ns += d;
          }
        } else if (k->io) {
          t.io += d;
        } else {
          t.sleep += d;
        }
      }
    }
  }
  if (auto it = a->host.block_by_pid.find(pid); it != a->host.block_by_pid.end())
    for (const BlockRequest& b : it->second)
      for (const Phase& p : phases)
        if (b.end >= p.start + shift && b.start <= p.end + shift) {
          ++t.block_ios;
          t.block_bytes += b.bytes;
          break;
        }
  return t;
}

std::string signed_duration(int64_t ns) {
  return (ns < 0 ? "-" : "+") + format_duration(uint64_t(ns < 0 ? -ns : ns));
}

std::string clock_note(const std::vector<NodeClock>& clocks) {
  std::string s;
  for (const auto& c : clocks)
    if (c.offset_ns)
      s += (s.empty() ? "" : ", ") + c.node + " " + signed_duration(c.offset_ns) + " \u00b1" +
           format_duration(uint64_t(c.error_ns));
  return s;
}

struct Straggler {
  uint64_t rank = 0;
  size_t matched = 0, last = 0;
  int64_t median_lag = 0, peer_lag = 0;
  uint64_t imposed = 0;
  std::vector<uint64_t> late_seqs;  // instances where it was last
  int64_t first = 0, last_ts = 0;
};

// The rank last into most matched instances of the communicator, if it is a straggler.
std::optional<Straggler> find_straggler(const FleetCommunicator& c) {
  std::map<uint64_t, size_t> last_count;
  std::map<uint64_t, std::vector<int64_t>> lags;
  std::map<uint64_t, uint64_t> imposed;
  std::map<uint64_t, std::vector<uint64_t>> late;
  size_t matched = 0;
  int64_t first = INT64_MAX, last_ts = INT64_MIN;
  const FleetRank& r0 = c.ranks.begin()->second;
  for (const RankCall& call : r0.calls) {
    if (!call.in_window) continue;
    std::vector<std::pair<uint64_t, const RankCall*>> at;
    for (const auto& [rk, r] : c.ranks)
      if (const RankCall* x = at_seq(r, call.seq)) at.push_back({rk, x});
    if (at.size() != c.ranks.size()) continue;
    ++matched;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    uint64_t who = 0;
    for (auto& [rk, x] : at) {
      lo = std::min(lo, x->start);
      if (x->start > hi) hi = x->start, who = rk;
    }
    for (auto& [rk, x] : at) lags[rk].push_back(x->start - lo);
    ++last_count[who];
    imposed[who] += uint64_t(hi - lo);
    late[who].push_back(call.seq);
    first = std::min(first, lo);
    last_ts = std::max(last_ts, hi);
  }
  if (matched < kMinCollectives) return std::nullopt;
  auto top = std::max_element(last_count.begin(), last_count.end(),
                              [](auto& x, auto& y) { return x.second < y.second; });
  Straggler s;
  s.rank = top->first;
  s.matched = matched;
  s.last = top->second;
  s.median_lag = median_of(lags[s.rank]);
  std::vector<int64_t> peers;
  for (auto& [rk, l] : lags)
    if (rk != s.rank) peers.insert(peers.end(), l.begin(), l.end());
  s.peer_lag = median_of(std::move(peers));
  s.imposed = imposed[s.rank];
  s.late_seqs = late[s.rank];
  s.first = first;
  s.last_ts = last_ts;
  if (double(s.last) / double(matched) < kStragglerLastShare || s.median_lag < kStragglerMinLagNs)
    return std::nullopt;
  return s;
}

std::vector<Phase> phases_of(const FleetRank& r, const std::vector<uint64_t>& seqs) {
  std::vector<Phase> out;
  for (uint64_t seq : seqs) {
    const RankCall* cur = at_seq(r, seq);
    const RankCall* prev = seq ? at_seq(r, seq - 1) : nullptr;
    if (cur && prev && prev->done < cur->start) out.push_back({prev->done, cur->start, cur->tid});
  }
  return out;
}

const Analysis* analysis_of(const std::map<std::string, const Analysis*>& m, const std::string& n) {
  auto it = m.find(n);
  return it == m.end() ? nullptr : it->second;
}

int64_t shift_of(const ClockShift& s, const std::string& n) {
  auto it = s.find(n);
  return it == s.end() ? 0 : it->second;
}

void add_cause(Chain& c, const FleetRank& r, const std::string& who, const PhaseTime& me,
               const PhaseTime& peers_avg) {
  auto per = [&](uint64_t v) { return format_duration(me.phases ? v / me.phases : 0); };
  auto peer = [&](uint64_t v) { return format_duration(v); };
  const uint64_t n = std::max<size_t>(me.phases, 1);
  struct Part {
    const char* what;
    uint64_t mine, theirs;
  };
  Part parts[] = {{"preempted", me.preempted / n, peers_avg.preempted},
                  {"io", me.io / n, peers_avg.io},
                  {"sleep", me.sleep / n, peers_avg.sleep},
                  {"cpu", me.on_cpu() / n, peers_avg.on_cpu()}};
  auto excess = [](const Part& p) { return p.mine > p.theirs ? p.mine - p.theirs : 0; };
  const Part* top = &parts[0];
  for (const Part& p : parts)
    if (excess(p) > excess(*top)) top = &p;
  std::string by;
  std::vector<Preemptor> pre;
  for (const auto& [pid, p] : me.by) pre.push_back(p);
  std::sort(pre.begin(), pre.end(), [](auto& x, auto& y) { return x.off_ns > y.off_ns; });
  for (size_t i = 0; i < pre.size() && i < 3; ++i) {
    char pct[16];
    std::snprintf(pct, sizeof(pct), " %.0f%%",
                  me.preempted ? 100.0 * double(pre[i].off_ns) / double(me.preempted) : 0.0);
    by += (by.empty() ? "" : ", ") + (pre[i].comm.empty() ? std::string("?") : pre[i].comm) +
          " (pid " + std::to_string(pre[i].pid) + ")" + pct;
  }
  std::string head = who + " spent " + per(me.total) +
                     " per collective between its previous "
                     "collective and its arrival (peers: " +
                     peer(peers_avg.total) + ")";
  if (top->what == std::string("preempted")) {
    c.root_cause = head + ": runnable but preempted for " + per(me.preempted) + " of it" +
                   (by.empty() ? "" : ", by " + by) + " (peers: " + peer(peers_avg.preempted) + ")";
  } else if (top->what == std::string("io")) {
    c.root_cause = head + ": blocked on I/O for " + per(me.io) + " of it (" +
                   format_count(me.block_ios) + " block requests, " + format_bytes(me.block_bytes) +
                   ")";
  } else if (top->what == std::string("sleep")) {
    c.root_cause =
        head + ": sleeping (a lock, a queue, a data loader) for " + per(me.sleep) + " of it";
  } else {
    c.root_cause = head + ": on-CPU for " + per(me.on_cpu()) +
                   " of it: its own work before the collective is slower";
  }
  if (me.preempted)
    c.timeline.push_back({"HOST", "sched_switch",
                          "on " + r.node + ": preempted " + per(me.preempted) +
                              " per collective before arriving" + (by.empty() ? "" : " by " + by) +
                              "; peers " + peer(peers_avg.preempted),
                          me.preempted / n / 1000});
  if (me.io || me.block_ios)
    c.timeline.push_back({"IO", "block",
                          "on " + r.node + ": " + per(me.io) + " per collective in I/O wait, " +
                              format_count(me.block_ios) + " block requests",
                          me.io / n / 1000});
  if (me.sleep > peers_avg.sleep * n)
    c.timeline.push_back({"HOST", "sleep",
                          "on " + r.node + ": sleeping " + per(me.sleep) +
                              " per collective; peers " + peer(peers_avg.sleep),
                          me.sleep / n / 1000});
}

}  // namespace

void rule_fleet_straggler(const std::vector<FleetCommunicator>& communicators,
                          const std::map<std::string, const Analysis*>& per_node,
                          const ClockShift& shift, const std::vector<NodeClock>& clocks,
                          std::vector<Chain>& out) {
  for (const FleetCommunicator& c : communicators) {
    if (c.ranks.size() < 2 || c.node_count() < 2) continue;
    auto s = find_straggler(c);
    if (!s) continue;
    const FleetRank& r = c.ranks.at(s->rank);
    const Analysis* a = analysis_of(per_node, r.node);
    std::string op = r.calls.empty() ? "collective" : r.calls.front().op;
    std::string name = a ? a->process_name(r.pid) : "pid " + std::to_string(r.pid);
    std::string who = "rank " + std::to_string(s->rank) + " on " + r.node;
    PhaseTime me = phase_time(a, r.pid, phases_of(r, s->late_seqs), shift_of(shift, r.node));
    // The peers over the same collectives, averaged per collective, as the baseline.
    PhaseTime avg;
    size_t peers = 0;
    for (const auto& [rk, pr] : c.ranks) {
      if (rk == s->rank) continue;
      PhaseTime t = phase_time(analysis_of(per_node, pr.node), pr.pid, phases_of(pr, s->late_seqs),
                               shift_of(shift, pr.node));
      if (!t.phases) continue;
      ++peers;
      avg.total += t.total / t.phases;
      avg.preempted += t.preempted / t.phases;
      avg.io += t.io / t.phases;
      avg.sleep += t.sleep / t.phases;
    }
    if (peers) avg.total /= peers, avg.preempted /= peers, avg.io /= peers, avg.sleep /= peers;
    avg.phases = 1;
    char share[16];
    std::snprintf(share, sizeof(share), "%.0f%%", 100.0 * double(s->last) / double(s->matched));
    Chain ch;
    ch.rule = "fleet_straggler";
    ch.node = r.node;
    ch.vendor = c.vendor;
    ch.api = c.api;
    ch.op = op;
    ch.pids = {r.pid};
    std::string proc =
        (name.rfind("pid ", 0) == 0 ? "" : name + ", ") + "pid " + std::to_string(r.pid);
    ch.summary = op + " straggler across nodes: " + who + " (" + proc + ") arrives last in " +
                 share + " of " + format_count(s->matched) + " collectives on communicator " +
                 hex(c.hash) + " (" + std::to_string(c.ranks.size()) + " ranks on " +
                 std::to_string(c.node_count()) + " nodes), median " +
                 format_duration(uint64_t(s->median_lag)) +
                 " behind the first rank (peers: " + format_duration(uint64_t(s->peer_lag)) + ")";
    add_cause(ch, r, who, me, avg);
    ch.timeline.insert(
        ch.timeline.begin(),
        {"NCCL", op,
         who + " (pid " + std::to_string(r.pid) + "): median lag " +
             format_duration(uint64_t(s->median_lag)) + ", last in " + share + "; it held its " +
             std::to_string(c.ranks.size() - 1) + (c.ranks.size() == 2 ? " peer" : " peers") +
             " for " + format_duration(s->imposed),
         uint64_t(s->median_lag) / 1000});
    if (a) {
      if (const StepSeries* st = a->steps.find(r.pid); st && !st->summary.text.empty())
        ch.timeline.push_back(
            {"STEPS", "steps", "rank " + std::to_string(s->rank) + ": " + st->summary.text, 0});
    }
    std::string clocks_text = clock_note(clocks);
    ch.explanation = "Across " + format_count(s->matched) +
                     " collectives matched by (communicator, "
                     "sequence number) over " +
                     std::to_string(c.node_count()) + " nodes, " + who + " entered last " +
                     format_count(s->last) + " times and imposed " + format_duration(s->imposed) +
                     " of waiting on its peers. Times are on the "
                     "reference clock" +
                     (clocks_text.empty() ? " (no node offset needed correcting)."
                                          : "; node clock offsets removed: " + clocks_text + ".");
    if (!c.conflicts.empty()) ch.explanation += " Note: " + c.conflicts.front() + ".";
    ch.window_start = s->first;
    ch.window_end = s->last_ts;
    ch.severity = s->median_lag >= kStragglerHighLagNs ? Severity::kHigh : Severity::kMedium;
    ch.fixes = {"Look at what " + who +
                    " does before each collective (see the host evidence "
                    "above): pin it to cores of its own, move the competing work away, or fix its "
                    "I/O or data loading",
                "ingero explain (--source or --db as above) --node " + shell_word(r.node) +
                    " --pid " + std::to_string(r.pid) + " shows that rank's own report"};
    ch.id = ch.rule + ":" + hex(c.hash) + ":" + op;
    ch.score = double(s->median_lag) / 1e6 + 1000;  // ahead of a node's own straggler chains
    out.push_back(std::move(ch));
  }
}

namespace {

struct Divergence {
  uint64_t seq = 0;
  std::map<std::string, std::vector<uint64_t>> groups;  // call signature -> ranks
  std::map<std::string, std::string> shown;             // signature -> as people read it
  std::vector<uint64_t> missing;                        // ranks that never issued it
  int64_t latest = 0;                                   // the last arrival at it
};

// The first sequence number where the ranks disagree on the call, or where a rank never
// issued one its peers entered while its own trace went on.
std::optional<Divergence> first_divergence(const FleetCommunicator& c) {
  uint64_t max_seq = 0;
  for (const auto& [rk, r] : c.ranks)
    if (!r.calls.empty()) max_seq = std::max(max_seq, r.calls.back().seq + 1);
  for (uint64_t seq = 0; seq < max_seq; ++seq) {
    Divergence d;
    d.seq = seq;
    d.latest = INT64_MIN;
    std::vector<uint64_t> absent;
    for (const auto& [rk, r] : c.ranks) {
      const RankCall* x = at_seq(r, seq);
      if (!x) {
        absent.push_back(rk);
        continue;
      }
      d.latest = std::max(d.latest, x->start);
      std::string sig = x->op + "|" + std::to_string(x->count) + "|" + std::to_string(x->datatype);
      d.groups[sig].push_back(rk);
      d.shown[sig] = x->op + " count " + std::to_string(x->count) +
                     (x->datatype == UINT64_MAX ? "" : " datatype " + std::to_string(x->datatype));
    }
    if (d.groups.empty()) continue;
    for (uint64_t rk : absent)
      if (c.ranks.at(rk).node_last_ts > d.latest + kMissingGraceNs) d.missing.push_back(rk);
    if (d.groups.size() >= 2 || !d.missing.empty()) return d;
    if (!absent.empty()) break;  // some traces ended here: nothing more to compare
  }
  return std::nullopt;
}

Chain divergence_chain(const FleetCommunicator& c, const Divergence& d) {
  auto ranks_text = [&](const std::vector<uint64_t>& v) {
    std::string s = v.size() > 1 ? "ranks " : "rank ";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + std::to_string(v[i]) + " (" + c.ranks.at(v[i]).node + ")";
    return s;
  };
  auto majority = std::max_element(d.groups.begin(), d.groups.end(), [](auto& x, auto& y) {
    return x.second.size() < y.second.size();
  });
  std::string what;
  std::vector<uint64_t> odd;
  for (const auto& [sig, ranks] : d.groups) {
    if (sig == majority->first) continue;
    what += "; " + ranks_text(ranks) + " issued " + d.shown.at(sig);
    odd.insert(odd.end(), ranks.begin(), ranks.end());
  }
  if (!d.missing.empty()) {
    what += "; " + ranks_text(d.missing) + " never issued it although " +
            (d.missing.size() > 1 ? "their" : "its") + " trace goes on";
    odd.insert(odd.end(), d.missing.begin(), d.missing.end());
  }
  const std::string seq = "#" + std::to_string(d.seq);
  Chain ch;
  ch.rule = "mismatched_collectives";
  ch.severity = Severity::kHigh;
  ch.vendor = c.vendor;
  ch.api = c.api;
  ch.op = majority->first.substr(0, majority->first.find('|'));
  for (uint64_t rk : odd) ch.pids.push_back(c.ranks.at(rk).pid);
  ch.node = c.ranks.at(odd.front()).node;
  ch.summary = "Collective " + seq + " on communicator " + hex(c.hash) +
               " diverges: " + ranks_text(majority->second) + " issued " +
               d.shown.at(majority->first) + what;
  ch.root_cause = "The ranks' programs diverged at collective " + seq +
                  ": collectives are matched by their order, so from here the job hangs or "
                  "reduces mismatched buffers";
  ch.explanation =
      "Each rank's collectives on the communicator are numbered from its init "
      "(as PyTorch's Flight Recorder does); " +
      seq + " is the first where they differ.";
  ch.timeline.push_back({layer_of(c.api), ch.op, ch.summary, 0});
  ch.fixes = {
      "Find the code path that issues a different collective (or skips one) on the odd "
      "rank: a condition on the rank, uneven data, a different model",
      "Run with TORCH_NCCL_TRACE_BUFFER_SIZE set to compare with PyTorch's own Flight "
      "Recorder dump"};
  ch.window_start = ch.window_end = d.latest;
  ch.id = ch.rule + ":" + hex(c.hash) + ":" + std::to_string(d.seq);
  ch.score = 1e6;
  return ch;
}

}  // namespace

void rule_mismatched_collectives(const std::vector<FleetCommunicator>& communicators,
                                 std::vector<Chain>& out) {
  for (const FleetCommunicator& c : communicators)
    if (c.ranks.size() >= 2)
      if (auto d = first_divergence(c)) out.push_back(divergence_chain(c, *d));
}

}  // namespace ingero::engine

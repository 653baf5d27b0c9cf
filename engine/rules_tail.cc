// Tail latency of GPU calls, explained by the host: CPU contention (per-call off-CPU time and
// the preemptors, or scheduler events overlapping the slow calls), block I/O, memory pressure.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>

#include "engine/analysis.h"
#include "engine/rules_tail_internal.h"
#include "engine/thresholds.h"

namespace ingero::engine {
namespace {

using tail_detail::Evidence;
using tail_detail::TailFinding;

// Scheduling pressure on a process over its active window, from its context switches and
// the host's CPU load. Used when the trace has no per-call off-CPU accounting.
bool process_pressure(const Analysis& a, uint32_t pid, int64_t from, int64_t to, uint64_t* switches,
                      uint64_t* off_ns) {
  auto it = a.host.per_pid.find(pid);
  if (it == a.host.per_pid.end()) return false;
  *switches = it->second.switches;
  *off_ns = it->second.off_cpu_ns;
  double secs = std::max(1.0, double(to - from) / 1e9);
  bool busy = a.host.cpu_avg >= kCpuBusyAvgPct || a.host.cpu_max >= kCpuSaturatedPct;
  return busy && double(*switches) / secs >= kMinSwitchRate;
}

// Share of the windows' time during which at least one of the intervals (start order) ran.
double busy_share(const std::vector<std::pair<int64_t, int64_t>>& intervals,
                  const std::vector<TailWindow>& windows) {
  constexpr int64_t kLookbackNs = 60'000'000'000;  // requests longer than 60 s are not seen
  int64_t total = 0, busy = 0;
  size_t j = 0;
  for (const auto& w : windows) {
    total += w.end - w.start;
    while (j < intervals.size() && intervals[j].first + kLookbackNs < w.start) ++j;
    int64_t reach = w.start;
    for (size_t k = j; k < intervals.size() && intervals[k].first < w.end; ++k) {
      int64_t e = std::min(intervals[k].second, w.end);
      if (e <= reach) continue;
      busy += e - std::max(intervals[k].first, reach);
      reach = e;
    }
  }
  return total > 0 ? double(busy) / double(total) : 0;
}

// A call of the tail that stalled: at least kMinTailExcessNs over p50. The tail's windows
// reach down to p95, which may be any call (or every one).
bool stalled(const OpStats& s, const TailWindow& w) {
  return uint64_t(w.end - w.start) >= s.p50 + kMinTailExcessNs;
}

// The stalled calls and their time past p50, summed (those past the cap on kept windows
// counted as stalled by kMinTailExcessNs).
struct Stalls {
  uint64_t calls = 0, excess_ns = 0;
};
Stalls stalls(const OpStats& s) {
  Stalls st{s.tail_windows_dropped, s.tail_windows_dropped * kMinTailExcessNs};
  for (const TailWindow& w : s.tail_windows)
    if (stalled(s, w)) {
      ++st.calls;
      st.excess_ns += uint64_t(w.end - w.start) - s.p50;
    }
  return st;
}

// Memory pressure at the slow calls, on real pressure signals only: a system snapshot within
// kMemNearNs of a slow call with memory nearly full, or with swap use above its node's snapshot
// before it; or an OOM kill that near. Page allocations are what every process does; they are
// not pressure. Memory full an hour before the slow calls, or swap given back, is no cause of
// them. The slow calls are the stalled ones; those past the cap on kept windows came after the
// kept ones, so all after the last kept one counts. An op whose slow calls were not
// kept is judged on the whole window.
bool memory_pressure_at(const HostContext& h, const OpStats& s) {
  // Each snapshot's rise of swap over the one before it of its node (several nodes' interleave
  // in a merged file or a fleet).
  std::vector<bool> rose(h.snapshots.size());
  std::map<std::string_view, int64_t> last_swap;
  for (size_t i = 0; i < h.snapshots.size(); ++i) {
    const SnapshotRow& snap = h.snapshots[i];
    auto [it, first] = last_swap.try_emplace(snap.node, snap.swap_mb);
    rose[i] = !first && snap.swap_mb > it->second;
    it->second = snap.swap_mb;
  }
  std::vector<std::pair<int64_t, int64_t>> near;  // the slow calls, widened by kMemNearNs
  for (const TailWindow& w : s.tail_windows)
    if (stalled(s, w)) near.push_back({w.start - kMemNearNs, w.end + kMemNearNs});
  if (near.empty())
    return h.mem_pct_max >= kMemPressurePct ||
           std::find(rose.begin(), rose.end(), true) != rose.end() || !h.ooms.empty();
  std::sort(near.begin(), near.end());
  if (s.tail_windows_dropped) near.push_back({near.back().second, INT64_MAX});
  std::vector<std::pair<int64_t, int64_t>> merged;  // in time order, disjoint
  for (const auto& n : near)
    if (!merged.empty() && n.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, n.second);
    else
      merged.push_back(n);
  auto at = [&](int64_t ts) {
    auto it = std::upper_bound(merged.begin(), merged.end(), std::make_pair(ts, INT64_MAX));
    return it != merged.begin() && ts <= std::prev(it)->second;
  };
  for (size_t i = 0; i < h.snapshots.size(); ++i)
    if (at(h.snapshots[i].ts_ns) && (h.snapshots[i].mem_pct >= kMemPressurePct || rose[i]))
      return true;
  for (const OomKill& k : h.ooms)
    if (at(k.ts)) return true;
  return false;
}

Evidence gather(const Analysis& a, const OpStats& s) {
  Evidence ev;
  const HostContext& h = a.host;
  ev.per_call = s.per_call_off_cpu;
  Overlap o = overlap_offcpu(h, s.key.pid, s.tail_windows);
  ev.sched_hits = o.intervals;
  ev.sched_off_ns = o.off_ns;
  if (ev.per_call) {
    ev.off_share = s.tail_off_cpu_share();
    ev.preempts = s.tail_preempts;
    ev.preemptors = s.preemptors;
  } else if (s.tail_dur_ns) {
    ev.off_share = std::min(1.0, double(o.off_ns) / double(s.tail_dur_ns));
    ev.preempts = o.preempted ? o.preempted : o.intervals;
  }
  if (ev.preemptors.empty()) {
    for (auto& [pid, p] : o.by) ev.preemptors.push_back(p);
    std::sort(ev.preemptors.begin(), ev.preemptors.end(),
              [](const Preemptor& x, const Preemptor& y) { return x.off_ns > y.off_ns; });
  }
  bool saturated = h.cpu_max >= kCpuSaturatedPct;
  // Per-call data tells a preempted thread from one that blocked: off-CPU time without a single
  // involuntary switch is the call sleeping (a sync or a device-to-host copy waiting for the
  // GPU, a lock), which no other task caused.
  bool blocked_only = ev.per_call && ev.preempts == 0;
  // One preemption is one call, an outlier as one slow call is: where several calls stand at or
  // over p99, it cannot be what made it (on an H200, one 4.8 ms preemption by migration/1 among
  // 1,387 copies named CPU contention for a p99 of 71 us that model.to()'s copies made).
  bool one_of_many = ev.per_call && ev.preempts == 1 && s.count >= kCallsForManyAtP99;
  if (blocked_only || one_of_many)
    ev.cpu = 0;
  else if (ev.off_share >= kOffCpuShareHigh)
    ev.cpu = 2;
  else if (ev.off_share >= kOffCpuShareMedium)
    ev.cpu = 1;
  // Scheduler events during the slow calls, without per-call accounting (older traces):
  // at least one switch per two slow calls is contention worth naming.
  if (!ev.per_call && ev.sched_hits * 2 >= s.tail_count && ev.sched_hits > 0)
    ev.cpu = std::max(ev.cpu, 1);
  if (ev.cpu && saturated) ev.cpu = 2;
  if (!ev.per_call && !ev.cpu) {
    auto span = a.span;
    ev.process_level =
        process_pressure(a, s.key.pid, span.first, span.second, &ev.proc_switches, &ev.proc_off_ns);
    if (ev.process_level) ev.cpu = 1;
  }

  // Block I/O only when the process's own requests overlap its slow calls, or the device is
  // saturated during them (requests in flight nearly all of the slow calls' time, some of
  // them slow): somebody else's I/O at the same time is not a cause. The slow calls are the
  // stalled ones (a disk busy through 8 ms calls was judged over them and 190 calls of 100 us,
  // and not saturated). Where none stalled (every call slowed), the tail's windows.
  std::vector<TailWindow> slow;
  for (const TailWindow& w : s.tail_windows)
    if (stalled(s, w)) slow.push_back(w);
  const std::vector<TailWindow>& judged = slow.empty() ? s.tail_windows : slow;
  std::vector<std::pair<int64_t, int64_t>> own;
  uint64_t own_max = 0;
  if (auto it = h.block_by_pid.find(s.key.pid); it != h.block_by_pid.end())
    for (const BlockRequest& b : it->second) {
      own.push_back({b.start, b.end});
      own_max = std::max<uint64_t>(own_max, uint64_t(b.end - b.start));
      ev.io_writes = ev.io_writes || b.write;
    }
  ev.io_hits = overlap_count(own, judged);
  ev.io_heavy = ev.io_hits > 0 && (own.size() >= kHeavyIoOps || own_max >= kSlowIoNs);
  if (!ev.io_heavy && h.block_max_ns >= kSlowIoNs &&
      busy_share(h.block_intervals, judged) >= kIoSaturatedShare) {
    ev.io_heavy = ev.io_saturated = true;
    ev.io_hits = overlap_count(h.block_intervals, judged);
  }
  ev.mem = memory_pressure_at(h, s);
  return ev;
}

// Detection: whether the op's latency needs explaining, and what the host shows for it.
std::optional<TailFinding> detect(const Analysis& a, const OpStats& s) {
  if (s.count < kMinCallsForTail) return std::nullopt;
  TailFinding f;
  f.s = &s;
  f.ratio = s.tail_ratio();
  const Stalls st = stalls(s);
  f.tail = f.ratio >= kTailRatioMedium && s.p99 >= s.p50 + kMinTailExcessNs &&
           st.calls >= kMinTailCalls && st.excess_ns >= kMinTailLostNs;
  // Every call slowed, not just the tail: a large share of all the op's time off-CPU.
  // Only what preemptions added counts: a blocking sync is off-CPU by design (engine.md).
  f.all_share = s.per_call_off_cpu && s.sum_ns ? double(s.off_cpu_ns) / double(s.sum_ns) : 0;
  const uint64_t contended = s.per_call_off_cpu ? s.contended_ns() : 0;
  f.contended_share = s.sum_ns ? double(contended) / double(s.sum_ns) : 0;
  bool broad = f.contended_share >= kOffCpuShareMedium && contended >= kMinOffCpuNs;
  if (!f.tail && !broad) return std::nullopt;
  f.ev = gather(a, s);
  Evidence& ev = f.ev;
  if (!f.tail) {
    // Judge the whole distribution: the evidence is the share of all calls' time.
    ev.off_share = f.contended_share;
    ev.preempts = s.preempts;
    // And who took the CPU from all of them: two long preemptions by a kernel thread can
    // outweigh a hog's hundreds in a tail of a few calls.
    if (!s.all_preemptors.empty()) ev.preemptors = s.all_preemptors;
    ev.cpu = s.preempts == 0 ? 0 : f.contended_share >= kOffCpuShareHigh ? 2 : 1;
  }
  if (ev.cpu) f.causes.push_back("CPU contention");
  if (ev.io_heavy) f.causes.push_back("block I/O");
  if (ev.mem) f.causes.push_back("memory pressure");
  f.rule = ev.cpu             ? "cpu_contention"
           : f.causes.empty() ? std::string(kTailNoHostCause)
           : ev.io_heavy      ? "io_pressure"
                              : "memory_pressure";
  // Severity means something: HIGH needs an order-of-magnitude tail and a host cause that
  // explains it; a tail without a host cause is LOW however large.
  if (f.causes.empty())
    f.severity = Severity::kLow;
  else if ((f.ratio >= kTailRatioHigh || !f.tail) &&
           (ev.cpu == 2 || ev.io_heavy || (ev.mem && ev.cpu)))
    f.severity = Severity::kHigh;
  else
    f.severity = Severity::kMedium;
  return f;
}

}  // namespace

void rule_tail_latency(const Analysis& a, std::vector<Chain>& out) {
  for (const OpStats& s : a.stats.per_process)
    if (auto f = detect(a, s)) out.push_back(tail_detail::tail_chain(a, *f));
}

}  // namespace ingero::engine

// Tail latency of GPU calls, explained by the host: CPU contention (per-call off-CPU time and
// the preemptors, or scheduler events overlapping the slow calls), block I/O, memory pressure.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>

#include "engine/analysis.h"
#include "engine/tenants.h"
#include "engine/thresholds.h"

namespace ingero::engine {
namespace {

std::string ratio_str(double r) {
  char b[32];
  std::snprintf(b, sizeof(b), r >= 100 ? "%.0fx" : "%.1fx", r);
  return b;
}

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

struct Evidence {
  // CPU
  bool per_call = false;
  double off_share = 0;     // off-CPU share of the tail's time
  uint64_t preempts = 0;    // involuntary switches during slow calls
  uint64_t sched_hits = 0;  // scheduler off-CPU intervals overlapping slow calls
  uint64_t sched_off_ns = 0;
  std::vector<Preemptor> preemptors;
  int cpu = 0;  // 0 none, 1 contributes, 2 explains
  // IO
  uint64_t io_hits = 0;
  bool io_heavy = false;
  bool io_saturated = false;  // other processes' I/O saturating the device
  bool io_writes = false;     // the process's own requests include writes
  // memory
  bool mem = false;
  // process-level scheduling pressure (no per-call data)
  bool process_level = false;
  uint64_t proc_switches = 0, proc_off_ns = 0;
};

// " in pod team-b/etl-5d8f (container etl)" when the preemptor runs in another tenant that has a
// name (a pod or a container), else "".
std::string preemptor_tenant(const Analysis& a, uint32_t victim, const Preemptor& p) {
  uint64_t cg = p.cgroup_id;
  if (!cg)  // per-call data names the task, not its cgroup: the scheduler events do
    if (auto it = a.host.offcpu.find(victim); it != a.host.offcpu.end())
      for (const OffCpuInterval& iv : it->second)
        if (a.host.by_pid(iv) == p.pid && a.host.by_cgroup(iv)) {
          cg = a.host.by_cgroup(iv);
          break;
        }
  if (!cg || same_tenant(a.host.cgroups, cg, process_cgroup(a, victim))) return "";
  auto info = a.host.cgroups.find(cg);
  if (info == a.host.cgroups.end()) return "";
  std::string t = tenant_label(info->second);
  return t.empty() ? "" : " in " + t;
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

// Memory pressure at the slow calls, on real pressure signals only: a system snapshot within
// kMemNearNs of a slow call with memory nearly full, or with swap use above its node's snapshot
// before it; or an OOM kill that near. Page allocations are what every process does; they are
// not pressure. Memory full an hour before the slow calls, or swap given back, is no cause of
// them. The slow calls are the tail's kMinTailExcessNs over p50 (stalled_calls: the tail's
// windows reach down to p95, which may be any call); those past the cap on kept windows came
// after the kept ones, so all after the last kept one counts. An op whose slow calls were not
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
    if (uint64_t(w.end - w.start) >= s.p50 + kMinTailExcessNs)
      near.push_back({w.start - kMemNearNs, w.end + kMemNearNs});
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
  // them slow): somebody else's I/O at the same time is not a cause. The slow calls are those
  // kMinTailExcessNs over p50: the tail's windows reach down to p95, which may be every call
  // (a disk busy through 8 ms calls was judged over them and 190 calls of 100 us, and not
  // saturated). Where none is that slow (every call slowed), the tail's windows.
  std::vector<TailWindow> slow;
  for (const TailWindow& w : s.tail_windows)
    if (uint64_t(w.end - w.start) >= s.p50 + kMinTailExcessNs) slow.push_back(w);
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

// The tail's calls at least kMinTailExcessNs over p50 (those past the cap on kept windows
// counted as such).
uint64_t stalled_calls(const OpStats& s) {
  uint64_t n = s.tail_windows_dropped;
  for (const TailWindow& w : s.tail_windows)
    n += uint64_t(w.end - w.start) >= s.p50 + kMinTailExcessNs;
  return n;
}

// What detection decided about one op's latency, before any prose: the kind of finding, the
// host evidence, the causes it names, the rule and the severity.
struct TailFinding {
  const OpStats* s = nullptr;
  bool tail = false;     // the p99 stands far above the p50 (else: every call slowed)
  double ratio = 0;      // p99 / p50
  double all_share = 0;  // off-CPU share of all the op's time (per-call data)
  Evidence ev;
  std::vector<std::string> causes;  // "CPU contention", "block I/O", "memory pressure"
  std::string rule;
  Severity severity = Severity::kLow;
};

// Detection: whether the op's latency needs explaining, and what the host shows for it.
std::optional<TailFinding> detect(const Analysis& a, const OpStats& s) {
  if (s.count < kMinCallsForTail) return std::nullopt;
  TailFinding f;
  f.s = &s;
  f.ratio = s.tail_ratio();
  f.tail = f.ratio >= kTailRatioMedium && s.p99 >= s.p50 + kMinTailExcessNs &&
           stalled_calls(s) >= kMinTailCalls;
  // Every call slowed, not just the tail: a large share of all the op's time off-CPU.
  f.all_share = s.per_call_off_cpu && s.sum_ns ? double(s.off_cpu_ns) / double(s.sum_ns) : 0;
  bool broad = f.all_share >= kOffCpuShareMedium && s.off_cpu_ns >= kMinOffCpuNs;
  if (!f.tail && !broad) return std::nullopt;
  f.ev = gather(a, s);
  Evidence& ev = f.ev;
  if (!f.tail) {
    // Judge the whole distribution: the evidence is the share of all calls' time.
    ev.off_share = f.all_share;
    ev.preempts = s.preempts;
    // And who took the CPU from all of them: two long preemptions by a kernel thread can
    // outweigh a hog's hundreds in a tail of a few calls.
    if (!s.all_preemptors.empty()) ev.preemptors = s.all_preemptors;
    ev.cpu = s.preempts == 0 ? 0 : f.all_share >= kOffCpuShareHigh ? 2 : 1;
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

// The prose below turns a finding into the chain a user reads.

const Preemptor* top_preemptor(const TailFinding& f) {
  return !f.ev.preemptors.empty() && f.ev.preemptors[0].pid ? &f.ev.preemptors[0] : nullptr;
}

// The off-CPU time the evidence line gives: of every call, of the slow ones, or of the scheduler's
// intervals overlapping them.
uint64_t evidence_off_ns(const TailFinding& f) {
  return !f.tail ? f.s->off_cpu_ns : f.ev.per_call ? f.s->tail_off_cpu_ns : f.ev.sched_off_ns;
}

// The CPU evidence in one line: "412 preemptions by hog (pid 7), 3.1s off-CPU", "" without it.
std::string cpu_evidence(const Analysis& a, const TailFinding& f) {
  const Evidence& ev = f.ev;
  const OpStats& s = *f.s;
  const HostContext& h = a.host;
  if (!ev.cpu) return "";
  if (ev.process_level) {
    char b[64];
    std::snprintf(b, sizeof(b), "CPU %.0f%% avg, %.0f%% peak", h.cpu_avg, h.cpu_max);
    return format_count(ev.proc_switches) + " sched_switch events (" +
           format_duration(ev.proc_off_ns) + " off-CPU) on a busy host (" + b + ")";
  }
  if (const Preemptor* top = top_preemptor(f)) {
    const uint64_t off = evidence_off_ns(f);
    const std::string by = preemptor_label(a, *top) + preemptor_tenant(a, s.key.pid, *top);
    if (top->count >= ev.preempts)
      return format_count(ev.preempts) +
             (ev.preempts == 1 ? " preemption by " : " preemptions by ") + by + ", " +
             format_duration(off) + " off-CPU";
    // Others preempted it too: the total is not all the top one's.
    return format_count(ev.preempts) + " preemptions, " + format_duration(off) +
           " off-CPU, the most (" + format_count(top->count) + ", " + format_duration(top->off_ns) +
           ") by " + by;
  }
  return format_count(ev.per_call ? ev.preempts : ev.sched_hits) + " sched_switch events, " +
         format_duration(ev.per_call ? s.tail_off_cpu_ns : ev.sched_off_ns) + " off-CPU";
}

std::string tail_summary(const TailFinding& f, const std::string& cpu_line) {
  const OpStats& s = *f.s;
  std::string head = f.tail ? s.key.op + " p99=" + format_duration(s.p99) + " (" +
                                  ratio_str(f.ratio) + " p50=" + format_duration(s.p50) + ")"
                            : s.key.op + " avg=" + format_duration(uint64_t(s.avg_ns())) +
                                  " (p50=" + format_duration(s.p50) +
                                  ", p99=" + format_duration(s.p99) + ", " + pct(f.all_share) +
                                  " of it off-CPU)";
  std::string evidence = cpu_line;
  if (f.ev.io_heavy) evidence += std::string(evidence.empty() ? "" : " + ") + "heavy block I/O";
  if (f.ev.mem) evidence += std::string(evidence.empty() ? "" : " + ") + "memory pressure";
  if (evidence.empty()) evidence = "no host-side cause in the trace";
  return head + " \u2014 " + evidence;
}

std::string tail_root_cause(const Analysis& a, const TailFinding& f) {
  const Evidence& ev = f.ev;
  const OpStats& s = *f.s;
  std::string who = a.process_label(s.key.pid);
  if (ev.cpu) {
    const Preemptor* top = top_preemptor(f);
    std::string by;
    if (top) {
      // "Mostly" where it took most of the time off-CPU; else the share it took.
      const uint64_t off = evidence_off_ns(f);
      by = off && 2 * top->off_ns <= off
               ? "; the CPU went to " + preemptor_label(a, *top) + " more than to any other (" +
                     pct(double(top->off_ns) / double(off)) + " of that time)"
               : "; the CPU went mostly to " + preemptor_label(a, *top);
    }
    if (ev.process_level)
      return "Host CPU contention: " + who + " was descheduled " + format_count(ev.proc_switches) +
             " times while the host ran at " + pct(a.host.cpu_avg / 100) +
             " CPU on average; the GPU waits on a starved host";
    return "CPU contention: " + who + " was off-CPU for " + pct(ev.off_share) + " of its " +
           (f.tail ? "slowest " : "") + s.key.op + " time" + by;
  }
  if (ev.io_heavy)
    return "Block I/O contention: " + format_count(ev.io_hits) +
           " slow block requests overlapped the slowest " + s.key.op + " calls";
  if (ev.mem) return "Host memory pressure while " + s.key.op + " ran";
  return "Tail latency inside the runtime or device: the host shows no contention during the "
         "slow calls";
}

std::string tail_explanation(const Analysis& a, const TailFinding& f) {
  const Evidence& ev = f.ev;
  const OpStats& s = *f.s;
  const HostContext& h = a.host;
  char buf[512];
  std::string x;
  if (!f.tail) {
    std::snprintf(buf, sizeof(buf), "%s took %s over %llu calls (p50=%s, p99=%s), %s of it off-CPU",
                  s.key.op.c_str(), format_duration(s.sum_ns).c_str(), (unsigned long long)s.count,
                  format_duration(s.p50).c_str(), format_duration(s.p99).c_str(),
                  format_duration(s.off_cpu_ns).c_str());
    x = std::string(buf) + " (" + format_count(s.preempts) +
        (s.preempts == 1 ? " preemption)" : " preemptions)");
  } else {
    std::snprintf(buf, sizeof(buf),
                  "%s tail latency is %s its median (p99=%s vs p50=%s over %llu calls; p95=%s). "
                  "The %llu slowest calls took %s",
                  s.key.op.c_str(), ratio_str(f.ratio).c_str(), format_duration(s.p99).c_str(),
                  format_duration(s.p50).c_str(), (unsigned long long)s.count,
                  format_duration(s.p95).c_str(), (unsigned long long)s.tail_count,
                  format_duration(s.tail_dur_ns).c_str());
    x = buf;
    if (ev.per_call)
      x += ", of which " + format_duration(s.tail_off_cpu_ns) + " off-CPU (" +
           format_count(s.tail_preempts) +
           (s.tail_preempts == 1 ? " preemption)" : " preemptions)");
    else if (ev.sched_hits)
      x += ", overlapped by " + format_duration(ev.sched_off_ns) + " of scheduler off-CPU time";
    else
      x += " (this trace has no per-call off-CPU time; the evidence is process-level)";
  }
  if (!ev.per_call && ev.sched_hits)
    x += " (" + format_count(ev.sched_hits) + " scheduler switches overlapped them)";
  x += ".";
  if (ev.io_heavy)
    x += " Block I/O: " + format_count(h.block_ios) + " requests, " + format_bytes(h.block_bytes) +
         ", peak " + format_duration(h.block_max_ns) + ".";
  if (h.cpu_max > 0) {
    std::snprintf(buf, sizeof(buf), " System CPU peaked at %.0f%% (avg %.0f%%).", h.cpu_max,
                  h.cpu_avg);
    x += buf;
  }
  return x;
}

// The layered timeline: the system, the process's host activity, I/O, network, the op.
std::vector<TimelineEntry> tail_timeline(const Analysis& a, const TailFinding& f,
                                         const std::string& cpu_line) {
  const OpStats& s = *f.s;
  const HostContext& h = a.host;
  auto pit = h.per_pid.find(s.key.pid);
  PidHost ph = pit == h.per_pid.end() ? PidHost{} : pit->second;
  std::vector<TimelineEntry> t;
  char buf[160];
  if (!h.snapshots.empty()) {
    std::snprintf(buf, sizeof(buf), "CPU %.0f%% peak, %.0f%% avg; memory %.0f%% used; swap %lld MB",
                  h.cpu_max, h.cpu_avg, h.mem_pct_max, (long long)h.swap_max_mb);
    t.push_back({"SYSTEM", "cpu", buf, 0});
  }
  if (ph.switches || f.ev.sched_hits)
    t.push_back(
        {"HOST", "sched_switch",
         format_count(ph.switches) + " context switches (" + format_duration(ph.off_cpu_ns) +
             " off-CPU, worst " + format_duration(ph.max_off_cpu_ns) + ")" +
             (cpu_line.empty() || f.ev.process_level
                  ? ""
                  : std::string(f.tail ? "; during the slow calls: " : "; during the calls: ") +
                        cpu_line),
         ph.off_cpu_ns / 1000});
  if (ph.page_allocs)
    t.push_back(
        {"HOST", "mm_page_alloc",
         format_count(ph.page_allocs) + " page allocations (" + format_bytes(ph.page_bytes) + ")",
         0});
  if (h.block_ios)
    t.push_back({"IO", "block_io",
                 format_count(h.block_ios) + " I/O ops (" + format_count(h.block_reads) +
                     " reads, " + format_count(h.block_writes) + " writes), " +
                     format_bytes(h.block_bytes) + ", peak " + format_duration(h.block_max_ns),
                 h.block_ns / 1000});
  if (h.tcp_retransmits)
    t.push_back({"NET", "tcp_retransmit", format_count(h.tcp_retransmits) + " TCP retransmits", 0});
  t.push_back({layer_of(s.key.api), s.key.op,
               "p99=" + format_duration(s.p99) + " (" + ratio_str(f.ratio) +
                   " p50=" + format_duration(s.p50) + ")",
               s.p99 / 1000});
  return t;
}

std::vector<std::string> tail_fixes(const Analysis& a, const TailFinding& f) {
  const Evidence& ev = f.ev;
  const OpStats& s = *f.s;
  std::vector<std::string> fixes;
  if (ev.cpu) {
    std::string who = a.process_label(s.key.pid);
    fixes.push_back("Pin the GPU-feeding threads of " + who +
                    " to dedicated cores (taskset -c, or a cgroup cpuset) away from other work");
    const Preemptor* top = top_preemptor(f);
    if (top && is_tracer(a, top->pid))
      fixes.push_back(tracer_fix(*top));
    else if (top)
      fixes.push_back("Lower the priority of " + top->comm + " (pid " + std::to_string(top->pid) +
                      "): nice -n 19, or move it to another cpuset");
    else
      fixes.push_back(
          "Add nice -n 19 to background jobs sharing these cores (logrotate, cron, agents)");
    auto pit = a.host.per_pid.find(s.key.pid);
    if (pit != a.host.per_pid.end() && pit->second.forks)
      fixes.push_back(
          "If these are DataLoader workers: num_workers <= cores - 1, persistent_workers=True");
  }
  if (ev.io_saturated)
    fixes.push_back(
        "Move the other I/O on this device away from the training volume, or cap it "
        "(io.max on its cgroup)");
  else if (ev.io_heavy && ev.io_writes)
    fixes.push_back(
        "Move the process's writes (checkpoints, logs) off the training path: async "
        "checkpointing or a separate fast volume");
  else if (ev.io_heavy)
    fixes.push_back(
        "Stop reading from disk during the steps: pre-load or cache the data (/dev/shm, "
        "page cache, faster storage)");
  if (ev.mem)
    fixes.push_back(
        "Relieve host memory pressure: smaller prefetch_factor, fewer pinned buffers, no swap "
        "for the job");
  if (f.causes.empty())
    fixes.push_back(
        "The host was not the bottleneck here: inspect device-side work (kernel durations, "
        "stream dependencies) with the vendor profiler");
  return fixes;
}

Chain tail_chain(const Analysis& a, const TailFinding& f) {
  const OpStats& s = *f.s;
  Chain c = chain_for_op(f.rule, s);
  c.severity = f.severity;
  std::string cpu_line = cpu_evidence(a, f);
  c.summary = tail_summary(f, cpu_line);
  c.root_cause = tail_root_cause(a, f);
  c.explanation = tail_explanation(a, f);
  c.timeline = tail_timeline(a, f, cpu_line);
  c.fixes = tail_fixes(a, f);
  c.id = c.rule + ":" + std::to_string(s.key.pid) + ":" + s.key.op;
  c.score = f.ratio * double(s.tail_count);
  return c;
}

}  // namespace

void rule_tail_latency(const Analysis& a, std::vector<Chain>& out) {
  for (const OpStats& s : a.stats.per_process)
    if (auto f = detect(a, s)) out.push_back(tail_chain(a, *f));
}

}  // namespace ingero::engine

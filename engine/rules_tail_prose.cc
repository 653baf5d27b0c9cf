// The tail rule's prose: a finding of engine/rules_tail.cc (detection) as the chain a user
// reads: "cuLaunchKernel p99=24us (4.8x p50=5us) \u2014 46 preemptions, 221ms off-CPU, the most
// (16, 74.7ms) by noisy_neighbor (pid 579)", its root cause, explanation, timeline and fixes.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/analysis.h"
#include "engine/rules_tail_internal.h"
#include "engine/tenants.h"
#include "engine/thresholds.h"

namespace ingero::engine::tail_detail {
namespace {

std::string ratio_str(double r) {
  char b[32];
  std::snprintf(b, sizeof(b), r >= 100 ? "%.0fx" : "%.1fx", r);
  return b;
}

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
    // Every call slowed, some of that time blocked by design: the share preemption took.
    if (!f.tail && pct(f.contended_share) != pct(f.all_share))
      return "CPU contention: preemptions took " + pct(f.contended_share) + " of " + who + "'s " +
             s.key.op + " time" + by;
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

}  // namespace

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

}  // namespace ingero::engine::tail_detail

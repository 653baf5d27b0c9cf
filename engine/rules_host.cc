// Rules about the host as a whole: a noisy neighbour cgroup taking the GPU threads' CPU, and
// out-of-memory events (host OOM killer, GPU allocation failures).
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "engine/analysis.h"
#include "engine/preemptors.h"
#include "engine/tenants.h"
#include "engine/thresholds.h"

namespace ingero::engine {

void rule_noisy_neighbour(const Analysis& a, std::vector<Chain>& out) {
  // Involuntary off-CPU time of GPU processes' threads, by the preemptor's cgroup (another
  // container of the GPU process's own pod is not a neighbour).
  struct Tally {
    uint64_t ns = 0, n = 0;
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> tasks;  // (pid, comm) -> ns
  };
  std::map<uint64_t, Tally> by_cgroup;
  uint64_t total = 0;
  std::vector<uint32_t> victims;
  for (const auto& [pid, ivs] : a.host.offcpu) {
    uint64_t own = process_cgroup(a, pid);
    bool hit = false;
    for (const auto& iv : ivs) {
      if (!iv.preempted || !a.host.by_pid(iv)) continue;
      uint64_t d = uint64_t(iv.end - iv.start);
      total += d;
      uint64_t cg = a.host.by_cgroup(iv);
      if (!cg || same_tenant(a.host.cgroups, cg, own)) continue;
      Tally& t = by_cgroup[cg];
      t.ns += d;
      ++t.n;
      t.tasks[{a.host.by_pid(iv), a.host.by_comm(iv)}] += d;
      hit = true;
    }
    if (hit) victims.push_back(pid);
  }
  if (by_cgroup.empty() || total == 0) return;
  auto top = std::max_element(by_cgroup.begin(), by_cgroup.end(),
                              [](auto& x, auto& y) { return x.second.ns < y.second.ns; });
  double share = double(top->second.ns) / double(total);
  if (share < kNeighbourShareMedium || top->second.ns < kNeighbourMinNs) return;
  auto task = std::max_element(top->second.tasks.begin(), top->second.tasks.end(),
                               [](auto& x, auto& y) { return x.second < y.second; });
  // Named as people name it: "pod team-b/etl-5d8f (container etl)", else its path.
  std::string cg = cgroup_name(a.host.cgroups, top->first);
  auto info = a.host.cgroups.find(top->first);
  std::string path = info == a.host.cgroups.end() ? "" : info->second.path;
  bool pod = info != a.host.cgroups.end() && !pod_label(info->second).empty();
  std::string name = a.host.comm_name(task->first.second);
  Chain c;
  c.rule = "noisy_neighbour";
  c.op = "sched_switch";
  c.vendor = "host";
  c.api = "kernel";
  c.pids = victims;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%.0f%%", share * 100);
  c.summary = "Noisy neighbour: " + cg + " took " + buf + " of the GPU threads' preempted time (" +
              format_duration(top->second.ns) + ", " + format_count(top->second.n) +
              " preemptions), mostly " + name + " (pid " + std::to_string(task->first.first) + ")";
  c.root_cause =
      pod ? "Another pod's workload, " + cg + ", competes for the cores the GPU threads run on"
          : "A workload in another cgroup (" + cg +
                ") competes for the cores the GPU threads run on";
  c.explanation = "Of " + format_duration(total) + " that GPU-calling threads spent preempted, " +
                  format_duration(top->second.ns) + " went to tasks in " + cg +
                  (path.empty() || path == cg ? "" : " (cgroup " + path + ")") + ".";
  c.timeline.push_back({"HOST", "sched_switch",
                        format_count(top->second.n) + " preemptions by " + cg,
                        top->second.ns / 1000});
  c.severity = share >= kNeighbourShareHigh && top->second.ns >= kNeighbourHighNs
                   ? Severity::kHigh
                   : Severity::kMedium;
  if (pod)
    c.fixes = {
        "Give the GPU job exclusive cores: a Guaranteed pod with whole-CPU requests under "
        "the kubelet's static CPU manager policy, so that " +
            cg + " cannot run on them",
        "Cap the neighbour: a CPU limit (resources.limits.cpu) on " + cg +
            (path.empty() ? "" : ", or cpu.max on its cgroup " + path)};
  else
    c.fixes = {"Give the GPU job exclusive cores: a cpuset for its cgroup that excludes " + cg,
               "Cap the neighbour: cpu.max / cpu.weight on " + cg};
  c.id = c.rule + ":" + std::to_string(top->first);
  c.score = double(top->second.ns) / 1e6;
  out.push_back(std::move(c));
}

namespace {

// Each GPU process's first and last call.
std::map<uint32_t, std::pair<int64_t, int64_t>> gpu_activity(const Analysis& a) {
  std::map<uint32_t, std::pair<int64_t, int64_t>> active;
  for (const OpStats& s : a.stats.per_process) {
    auto& w = active[s.key.pid];
    w.first = w.first ? std::min(w.first, s.first_ts) : s.first_ts;
    w.second = std::max(w.second, s.last_ts);
  }
  return active;
}

// A GPU process that keeps losing its CPU: how often it was switched out, and the share of its
// time it spent preempted.
struct Contention {
  uint32_t pid = 0;
  std::pair<int64_t, int64_t> active;  // its first and last call
  const PidHost* host = nullptr;
  double rate = 0, off_share = 0;
  // With the scheduler's intervals: its preemptions, their time and the longest (the time it
  // slept is no contention, and was said as such: "2.0s off-CPU" of which 1.5 s a planned
  // sleep).
  bool intervals = false;
  uint64_t preemptions = 0, preempted_ns = 0, longest_ns = 0;
  // Who took its CPU (engine/preemptors.h), from the scheduler's intervals; empty without.
  std::vector<Preemptor> preemptors;
  std::string preempted_by;
};

// Whether `pid`, active over `w`, is contended, on a `busy` host.
std::optional<Contention> contention_of(const Analysis& a, uint32_t pid,
                                        std::pair<int64_t, int64_t> w, bool busy) {
  auto it = a.host.per_pid.find(pid);
  if (it == a.host.per_pid.end() || !it->second.switches) return std::nullopt;
  const PidHost& p = it->second;
  double secs = std::max(1.0, double(std::max(w.second, a.span.second) - w.first) / 1e9);
  // Contention is being preempted, not sleeping: a thread blocked in fsync or on a lock is
  // off-CPU without anybody taking its CPU. With scheduler intervals, count the preempted
  // ones; without (aggregates only), the involuntary switches and all off-CPU time.
  uint64_t preempted_ns = p.off_cpu_ns, preemptions = 0, longest = 0;
  std::map<std::pair<uint32_t, std::string>, uint64_t> by;  // preemptor (pid, name) -> ns
  auto iv = a.host.offcpu.find(pid);
  if (iv != a.host.offcpu.end()) {
    preempted_ns = 0;
    for (const OffCpuInterval& x : iv->second) {
      if (!x.preempted) continue;
      uint64_t d = uint64_t(x.end - x.start);
      preempted_ns += d;
      ++preemptions;
      longest = std::max(longest, d);
      if (uint32_t who = a.host.by_pid(x)) by[{who, a.host.comm_name(a.host.by_comm(x))}] += d;
    }
  }
  double rate = double(p.involuntary) / secs;
  double off_share = double(preempted_ns) / (secs * 1e9);
  if (!busy || rate < kMinSwitchRate || off_share < kProcessOffCpuShareMedium) return std::nullopt;
  Contention c;
  c.pid = pid;
  c.active = w;
  c.host = &p;
  c.rate = rate;
  c.off_share = off_share;
  c.intervals = iv != a.host.offcpu.end();
  c.preemptions = preemptions;
  c.preempted_ns = preempted_ns;
  c.longest_ns = longest;
  c.preemptors = rank_preemptors(by, pid, &c.preempted_by);
  c.preempted_by = name_tracer(a, c.preemptors, c.preempted_by);
  return c;
}

// The worker processes a process forked, and what they cost.
struct Workers {
  std::map<std::string, uint64_t> names;  // "child" where the trace has no name
  std::vector<std::string> comms;         // their names as the preemptors give them
  uint64_t count = 0, switches = 0, pages = 0;
  std::string text;  // "pt_data_worker x4, child"
};

Workers forked_workers(const Analysis& a, uint32_t pid) {
  Workers w;
  for (const ForkEdge& f : a.host.forks) {
    if (f.parent != pid) continue;
    ++w.count;
    std::string n = f.child_comm.empty() ? a.process_name(f.child) : f.child_comm;
    ++w.names[n.rfind("pid ", 0) == 0 ? "child" : n];
    if (std::find(w.comms.begin(), w.comms.end(), n) == w.comms.end()) w.comms.push_back(n);
    if (auto c = a.host.per_pid.find(f.child); c != a.host.per_pid.end()) {
      w.switches += c->second.switches;
      w.pages += c->second.page_allocs;
    }
  }
  for (const auto& [n, k] : w.names)
    w.text += (w.text.empty() ? "" : ", ") + n + (k > 1 ? " x" + std::to_string(k) : "");
  return w;
}

// The GPU-side symptom: the op with the worst tail in this process (null: none of 3 calls).
const OpStats* worst_tail_op(const Analysis& a, uint32_t pid) {
  const OpStats* worst = nullptr;
  for (const OpStats& s : a.stats.per_process)
    if (s.key.pid == pid && s.count >= 3 && (!worst || s.tail_ratio() > worst->tail_ratio()))
      worst = &s;
  return worst;
}

void contention_timeline(const Contention& x, const Workers& workers, const OpStats* worst,
                         const std::string& cpu, Chain& c) {
  const PidHost& p = *x.host;
  c.timeline.push_back({"SYSTEM", "cpu", cpu, 0});
  c.timeline.push_back({"HOST", "sched_switch",
                        format_count(p.switches) + " context switches (" +
                            format_duration(p.off_cpu_ns) + " off-CPU, worst " +
                            format_duration(p.max_off_cpu_ns) + ")",
                        p.off_cpu_ns / 1000});
  if (workers.count)
    c.timeline.push_back({"HOST", "process_fork",
                          format_count(workers.count) + " workers forked: " + workers.text, 0});
  if (worst) {
    char r[32];
    std::snprintf(r, sizeof(r), "%.1fx", worst->tail_ratio());
    c.timeline.push_back({layer_of(worst->key.api), worst->key.op,
                          "p99=" + format_duration(worst->p99) + " (" + r +
                              " p50=" + format_duration(worst->p50) + "), avg " +
                              format_duration(uint64_t(worst->avg_ns())),
                          worst->p99 / 1000});
  }
}

Chain contention_chain(const Analysis& a, const Contention& x, const Workers& workers,
                       const OpStats* worst) {
  const PidHost& p = *x.host;
  std::string who = a.process_label(x.pid);
  char cpu[96];
  std::snprintf(cpu, sizeof(cpu), "CPU %.0f%% avg, %.0f%% peak", a.host.cpu_avg, a.host.cpu_max);
  Chain c;
  c.rule = "host_cpu_contention";
  c.op = "sched_switch";
  c.vendor = "host";
  c.api = "kernel";
  c.pids = {x.pid};
  c.window_start = x.active.first;
  c.window_end = x.active.second;
  const Preemptor* top = x.preemptors.empty() ? nullptr : &x.preemptors[0];
  std::string by = top ? preemptor_name(a, *top, x.pid) : "";
  // What preemption took, where the scheduler's intervals tell it from sleep; else every
  // switch and all its off-CPU time, said as such.
  c.summary =
      "Host CPU contention: " + who +
      (x.intervals ? " preempted " + format_count(x.preemptions) + " times (" +
                         format_duration(x.preempted_ns) + " waiting for a CPU, the longest " +
                         format_duration(x.longest_ns) + ")"
                   : " descheduled " + format_count(p.switches) + " times (" +
                         format_duration(p.off_cpu_ns) + " off-CPU, asleep included, worst " +
                         format_duration(p.max_off_cpu_ns) + ")") +
      " with " + cpu + (top ? ", preempted mostly by " + by : "");
  uint64_t n = workers.count;
  if (n)
    c.summary += "; " + format_count(n) + " worker process" + (n == 1 ? "" : "es") + " forked (" +
                 workers.text + ")";
  c.root_cause = n ? "CPU scheduling contention between " + who + " and the " + format_count(n) +
                         (n == 1 ? " worker process" : " worker processes") +
                         " it forked, on a busy host: the GPU waits for the host"
                   : "CPU scheduling contention on a busy host: " + who + " keeps losing the CPU" +
                         (top ? " to " + by : "") + ", so the GPU waits for the host";
  c.explanation = who + " was switched out " + engine::format_count(uint64_t(x.rate)) +
                  " times a second on average (" + format_count(p.involuntary) +
                  " preempted while runnable).";
  if (top) c.explanation += " Preempted by: " + x.preempted_by + ".";
  if (n)
    c.explanation += " Its workers were switched out " + format_count(workers.switches) +
                     " times and allocated " + format_count(workers.pages) + " pages.";
  contention_timeline(x, workers, worst, cpu, c);
  c.severity = x.off_share >= kProcessOffCpuShareHigh && a.host.cpu_avg >= kCpuSaturatedPct
                   ? Severity::kHigh
                   : Severity::kMedium;
  c.fixes.push_back("Pin the training process to dedicated cores (taskset -c)" +
                    std::string(n ? ", apart from its workers" : "") +
                    (top && top->pid != x.pid ? ", away from " + by : ""));
  for (std::string& f : preemptor_fixes(a, x.pid, x.preemptors, workers.comms))
    c.fixes.push_back(std::move(f));
  if (n) {
    c.fixes.push_back(
        "Reduce DataLoader num_workers to (cores - 1) or fewer; add persistent_workers=True "
        "to avoid re-forking every epoch");
    c.fixes.push_back(
        "For in-memory datasets, index tensors directly instead of going through worker "
        "processes");
  }
  c.id = c.rule + ":" + std::to_string(x.pid);
  c.score = x.off_share * 1000;
  return c;
}

}  // namespace

void rule_process_contention(const Analysis& a, std::vector<Chain>& out) {
  bool busy = a.host.cpu_avg >= kCpuBusyAvgPct || a.host.cpu_max >= kCpuSaturatedPct;
  for (const auto& [pid, w] : gpu_activity(a)) {
    auto x = contention_of(a, pid, w, busy);
    if (!x) continue;
    out.push_back(contention_chain(a, *x, forked_workers(a, pid), worst_tail_op(a, pid)));
  }
}

void rule_oom(const Analysis& a, std::vector<Chain>& out) {
  for (const auto& k : a.host.ooms) {
    Chain c;
    c.rule = "oom_kill";
    c.op = "oom_kill";
    c.vendor = "host";
    c.api = "kernel";
    c.pids = {k.pid};
    c.severity = Severity::kHigh;
    c.window_start = c.window_end = k.ts;
    c.summary = "OOM killer killed " + k.comm + " (pid " + std::to_string(k.pid) + ")";
    c.root_cause = "Host memory exhausted; the kernel killed a process to recover";
    c.explanation = "Triggered by " + k.by_comm + " (pid " + std::to_string(k.by_pid) + ").";
    if (a.host.mem_avail_min_mb || a.host.mem_pct_max) {
      char buf[128];
      std::snprintf(buf, sizeof(buf),
                    "memory %.0f%% used at peak, %lld MB available at minimum, swap %lld MB",
                    a.host.mem_pct_max, (long long)a.host.mem_avail_min_mb,
                    (long long)a.host.swap_max_mb);
      c.timeline.push_back({"SYSTEM", "memory", buf, 0});
    }
    c.timeline.push_back({"HOST", "oom_kill", c.summary, 0});
    c.fixes = {
        "Bound host memory: fewer DataLoader workers, smaller prefetch_factor, pinned-memory "
        "limits",
        "Set a memory.max for neighbours so the training job is not the victim"};
    c.id = c.rule + ":" + std::to_string(k.pid) + ":" + std::to_string(k.ts);
    c.score = 1e9;
    out.push_back(std::move(c));
  }
  // GPU allocations that failed with out-of-memory (the backend classifies return codes).
  for (const OpStats& s : a.stats.per_process) {
    if (s.oom_errors == 0) continue;
    Chain c;
    c.rule = "gpu_oom";
    c.vendor = s.key.vendor;
    c.api = s.key.api;
    c.op = s.key.op;
    c.pids = {s.key.pid};
    c.severity = Severity::kHigh;
    c.window_start = s.first_ts;
    c.window_end = s.last_ts;
    std::string who = a.process_label(s.key.pid);
    c.summary = format_count(s.oom_errors) + " of " + format_count(s.count) + " " + s.key.op +
                " calls failed with out-of-memory in " + who;
    c.root_cause = "Device memory exhausted: allocations fail";
    c.explanation = "Requested " + format_bytes(s.bytes) + " across " + format_count(s.count) +
                    " calls; " + format_count(s.oom_errors) + " returned an out-of-memory error.";
    c.timeline.push_back({layer_of(s.key.api), s.key.op, c.summary, 0});
    c.fixes = {"Lower the batch size or sequence length, or shard the model",
               "Release cached blocks between phases (torch.cuda.empty_cache()) and check for "
               "tensors kept alive by references"};
    c.id = c.rule + ":" + std::to_string(s.key.pid) + ":" + s.key.op;
    c.score = double(s.oom_errors);
    out.push_back(std::move(c));
  }
}

}  // namespace ingero::engine

// Everything the kernel side saw, summarised for the rules: per-process scheduling, lifecycle,
// memory and I/O, host-wide block I/O and TCP, OOM kills, and the system snapshots.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/op_stats.h"
#include "engine/pod_vector.h"
#include "engine/trace_source.h"

namespace ingero::engine {

// 24 bytes: a session with a context switch a call keeps a million of them (32 before the
// preemptor's pid joined its name and cgroup in HostContext::preemptors).
struct OffCpuInterval {
  int64_t start = 0, end = 0;
  uint32_t tid = 0;
  // Who took the CPU (for a thread that went to sleep, who ran next): an index into
  // HostContext::preemptors, its pid, name and cgroup.
  uint32_t by : 30 = 0;
  uint32_t preempted : 1 = 0;
  // Uninterruptible when it went off-CPU (prev_state & 2, TASK_UNINTERRUPTIBLE): I/O, not sleep.
  uint32_t io : 1 = 0;
};
static_assert(sizeof(OffCpuInterval) == 24);

// One block request, for the process that issued it.
struct BlockRequest {
  int64_t start = 0, end = 0;
  uint64_t bytes = 0;
  bool write = false;
};

struct PidHost {
  uint64_t switches = 0, involuntary = 0, off_cpu_ns = 0, max_off_cpu_ns = 0;
  uint64_t wakeups = 0, forks = 0, execs = 0, exits = 0;
  uint64_t page_allocs = 0, page_bytes = 0;
  uint64_t block_ios = 0, block_bytes = 0, block_ns = 0;
  uint64_t cgroup_id = 0;  // of its latest host event
  std::string comm;
};

struct ForkEdge {
  int64_t ts = 0;
  uint32_t parent = 0, child = 0;
  std::string child_comm;
};

struct OomKill {
  int64_t ts = 0;
  uint32_t pid = 0;
  std::string comm;
  uint32_t by_pid = 0;
  std::string by_comm;
};

struct HostOpStat {
  uint64_t count = 0, sum_ns = 0, max_ns = 0;
};

struct HostContext {
  // Host events by name (sched_switch, process_fork, ...): a window's process's alone where it
  // names one.
  std::map<std::string, HostOpStat> ops;
  // Off-CPU intervals of traced (GPU-calling) processes' threads, time order, capped.
  // By process, in start order. Grown with realloc (engine/pod_vector.h): a session with a
  // context switch a call holds up to kMaxOffCpuIntervals of them.
  std::map<uint32_t, PodVector<OffCpuInterval>> offcpu;
  size_t offcpu_held = 0;  // of all processes: kMaxOffCpuIntervals at most
  // Intervals past the cap: counted in per_pid's totals, not kept. Those kept begin at
  // offcpu_kept_from_ns where older ones gave way to the modelled window's (0: none did), and
  // end before offcpu_kept_until_ns where later ones found no room (0: none).
  uint64_t offcpu_dropped = 0;
  int64_t offcpu_kept_from_ns = 0, offcpu_kept_until_ns = 0;
  std::vector<std::string> comms;  // interned preemptor names
  // Who held the CPU: a preemptor's pid, name (index into comms) and cgroup, interned.
  struct PreemptorId {
    uint32_t pid = 0;
    uint32_t comm = 0;
    uint64_t cgroup = 0;
  };
  std::vector<PreemptorId> preemptors;
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, uint32_t> preemptor_index;
  std::map<uint32_t, PidHost> per_pid;
  std::vector<ForkEdge> forks;
  std::vector<OomKill> ooms;
  // Host-wide block I/O.
  uint64_t block_ios = 0, block_reads = 0, block_writes = 0, block_bytes = 0, block_ns = 0;
  uint64_t block_max_ns = 0;
  std::vector<std::pair<int64_t, int64_t>> block_intervals;    // capped
  std::map<uint32_t, std::vector<BlockRequest>> block_by_pid;  // issuer -> requests, capped
  // TCP retransmits.
  uint64_t tcp_retransmits = 0;
  std::vector<int64_t> tcp_times;  // capped
  // System snapshots.
  std::vector<SnapshotRow> snapshots;
  double cpu_max = 0, cpu_avg = 0, mem_pct_max = 0;
  int64_t swap_max_mb = 0, mem_avail_min_mb = 0;
  // The scheduler was traced: a context switch stored as an event, or counted in the kernel's
  // per-process aggregates (a process that never left its CPU has no event of its own).
  bool has_sched_events = false;
  bool has_activity = false;               // kernel per-process aggregates were recorded
  std::map<uint64_t, CgroupInfo> cgroups;  // TraceSource::cgroups()

  uint32_t intern_comm(std::string_view c);
  const std::string& comm_name(uint32_t i) const { return comms[i]; }
  uint32_t intern_preemptor(uint32_t pid, uint32_t comm, uint64_t cgroup);
  // An interval's preemptor: its pid (0: unknown), its name's index into comms, and its cgroup
  // (0: unknown).
  uint32_t by_pid(const OffCpuInterval& iv) const { return preemptors[iv.by].pid; }
  uint32_t by_comm(const OffCpuInterval& iv) const { return preemptors[iv.by].comm; }
  uint64_t by_cgroup(const OffCpuInterval& iv) const { return preemptors[iv.by].cgroup; }
};

inline constexpr size_t kMaxOffCpuIntervals = 1'000'000;
inline constexpr size_t kMaxBlockIntervals = 200'000;

// The window's host events. Off-CPU intervals are kept up to kMaxOffCpuIntervals, the earliest;
// but where only the window's last part is modelled (from `modelled_from_ns`:
// EngineOptions::model_calls), one there takes the place of the oldest kept before it, so that
// the steps have theirs first.
HostContext collect_host_context(TraceSource& source, const Window& w,
                                 int64_t modelled_from_ns = INT64_MIN);

// Evidence for one set of time windows (a call group's tail) from one process's off-CPU
// intervals: how many intervals overlap, and the off-CPU time inside the windows.
struct Overlap {
  uint64_t intervals = 0, preempted = 0;
  uint64_t off_ns = 0;
  std::map<uint32_t, Preemptor> by;  // preemptor pid -> tally
};
Overlap overlap_offcpu(const HostContext& h, uint32_t pid, const std::vector<TailWindow>& windows);
// Intervals (start order) overlapping any of the windows.
uint64_t overlap_count(const std::vector<std::pair<int64_t, int64_t>>& intervals,
                       const std::vector<TailWindow>& windows);

}  // namespace ingero::engine

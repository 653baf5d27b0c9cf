#include "engine/host_context.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <queue>

namespace ingero::engine {
namespace {
// Sweeps skip intervals that start this long before a window (they cannot reach it unless
// longer than this; an off-CPU interval or I/O of more than 60 s is counted from its start).
constexpr int64_t kMaxIntervalNs = 60'000'000'000;
}  // namespace

uint32_t HostContext::intern_comm(std::string_view c) {
  for (uint32_t i = 0; i < comms.size() && i < 4096; ++i)
    if (comms[i] == c) return i;
  comms.emplace_back(c);
  return uint32_t(comms.size() - 1);
}

uint32_t HostContext::intern_preemptor(uint32_t pid, uint32_t comm, uint64_t cgroup) {
  auto [it, added] = preemptor_index.try_emplace({pid, comm, cgroup}, uint32_t(preemptors.size()));
  if (added) preemptors.push_back({pid, comm, cgroup});
  return it->second;
}

namespace {

// What the events before this one looked up: a host's events come in runs of one op, process
// and preemptor (two threads handing a lock back and forth), and each lookup by name or pid is
// a walk of a tree. The maps' nodes do not move.
struct Lookups {
  std::string_view op;
  // The event's own view of that op: sources keep an op's name in one place
  // (engine/trace_source.h), so an event whose view is this one needs no comparison of names
  // (two ops alternate on a host: switches and on-CPU samples).
  std::string_view op_seen;
  HostOpStat* op_stat = nullptr;
  uint32_t pid = 0;
  PidHost* pid_host = nullptr;
  PodVector<OffCpuInterval>* offcpu = nullptr;  // of `pid`, once it has switched
  std::string comm;                             // a copy: `comms` moves its strings as it grows
  uint64_t cgroup = 0;
  uint32_t by_pid = 0;
  uint32_t by = 0;  // (by_pid, comm, cgroup) interned
  bool by_known = false;
  // The process a window names: only its events are counted under their op (the others are
  // read all the same: who took its CPU, whose I/O saturated the device).
  std::optional<uint32_t> ops_pid;
};

// The cap on off-CPU intervals, where the window's last part is modelled: full, the oldest
// interval kept gives way to a newer one, but never one of the modelled window to another.
// Those given way are dropped from the front of their process's list at the end.
struct Room {
  int64_t modelled_from = INT64_MIN;
  std::map<uint32_t, size_t> gone;  // pid -> intervals given way at the front of its list
  // (start, pid) of each process's oldest interval kept, once the cap was first reached.
  std::priority_queue<std::pair<int64_t, uint32_t>, std::vector<std::pair<int64_t, uint32_t>>,
                      std::greater<>>
      oldest;
  bool full = false;

  // Room for an interval starting at `start`: the oldest kept gives way (false: none may).
  bool make(HostContext& h, int64_t start) {
    if (modelled_from == INT64_MIN) return false;
    if (!full) {
      full = true;
      for (const auto& [pid, v] : h.offcpu)
        if (!v.empty()) oldest.push({v[0].start, pid});
    }
    if (oldest.empty() || (oldest.top().first >= modelled_from && start >= modelled_from))
      return false;
    auto [at, pid] = oldest.top();
    if (at > start) return false;  // older than every interval kept (out of order): not kept
    oldest.pop();
    const auto& v = h.offcpu[pid];
    size_t i = ++gone[pid];
    if (i < v.size()) oldest.push({v[i].start, pid});
    --h.offcpu_held;
    ++h.offcpu_dropped;
    return true;
  }
  // A process's list gained an interval: the first it keeps now is a candidate to give way.
  void added(const PodVector<OffCpuInterval>& v, uint32_t pid) {
    if (!full) return;
    auto it = gone.find(pid);
    if (v.size() == 1 + (it == gone.end() ? 0 : it->second)) oldest.push({v.back().start, pid});
  }
  // Drops what gave way; says from when the intervals kept begin.
  void finish(HostContext& h) {
    int64_t from = INT64_MAX;
    for (auto& [pid, v] : h.offcpu) {
      if (auto it = gone.find(pid); it != gone.end()) v.erase_front(it->second);
      if (!gone.empty() && !v.empty()) from = std::min(from, v[0].start);
    }
    if (!gone.empty() && from != INT64_MAX) h.offcpu_kept_from_ns = from;
  }
};

// A context switch: the process's scheduling tallies, and its off-CPU interval (capped).
void add_sched_switch(HostContext& h, Lookups& l, Room& room, PidHost& p, const hal::Event& e) {
  h.has_sched_events = true;
  bool preempted = e.get_or(hal::Field::kFlags, 1) == 1;
  ++p.switches;
  if (preempted) ++p.involuntary;
  p.off_cpu_ns += e.dur_ns;
  p.max_off_cpu_ns = std::max<uint64_t>(p.max_off_cpu_ns, e.dur_ns);
  if (!l.offcpu) l.offcpu = &h.offcpu[e.pid];
  if (h.offcpu_held >= kMaxOffCpuIntervals && !room.make(h, int64_t(e.ts_ns))) {
    if (!h.offcpu_kept_until_ns) h.offcpu_kept_until_ns = int64_t(e.ts_ns);
    ++h.offcpu_dropped;
    return;
  }
  std::string_view comm = e.peer_comm_view();
  uint64_t cgroup = e.get_or(hal::Field::kPeerCgroup, 0);
  auto by_pid = uint32_t(e.get_or(hal::Field::kPeerPid, 0));
  if (!l.by_known || by_pid != l.by_pid || comm != l.comm || cgroup != l.cgroup) {
    l.by = h.intern_preemptor(by_pid, h.intern_comm(comm), cgroup);
    l.by_pid = by_pid;
    l.comm.assign(comm);
    l.cgroup = cgroup;
    l.by_known = true;
  }
  OffCpuInterval iv;
  iv.start = int64_t(e.ts_ns);
  iv.end = int64_t(e.ts_ns + e.dur_ns);
  iv.tid = e.tid;
  iv.by = l.by;
  iv.preempted = preempted;
  iv.io = (e.get_or(hal::Field::kState, 0) & 2) != 0;
  l.offcpu->push_back(iv);
  room.added(*l.offcpu, e.pid);
  ++h.offcpu_held;
}

// A block request: the host's and its issuer's I/O tallies, and its interval (capped).
void add_block_io(HostContext& h, PidHost& p, const hal::Event& e) {
  ++h.block_ios;
  if (e.op == "block_read") ++h.block_reads;
  if (e.op == "block_write") ++h.block_writes;
  uint64_t b = e.get_or(hal::Field::kBytes, 0);
  h.block_bytes += b;
  h.block_ns += e.dur_ns;
  h.block_max_ns = std::max<uint64_t>(h.block_max_ns, e.dur_ns);
  ++p.block_ios;
  p.block_bytes += b;
  p.block_ns += e.dur_ns;
  if (h.block_intervals.size() < kMaxBlockIntervals) {
    h.block_intervals.push_back({int64_t(e.ts_ns), int64_t(e.ts_ns + e.dur_ns)});
    h.block_by_pid[e.pid].push_back(
        {int64_t(e.ts_ns), int64_t(e.ts_ns + e.dur_ns), b, e.op == "block_write"});
  }
}

// A host event counted under its op (the window's process's only, where it names one).
void count_host_op(HostContext& h, Lookups& l, const hal::Event& e) {
  if (l.ops_pid && e.pid != *l.ops_pid) return;
  bool same_view = e.op.data() == l.op_seen.data() && e.op.size() == l.op_seen.size();
  if (!l.op_stat || (!same_view && e.op != l.op)) {
    auto it = h.ops.try_emplace(std::string(e.op)).first;
    l.op = it->first;
    l.op_stat = &it->second;
  }
  l.op_seen = e.op;
  HostOpStat& os = *l.op_stat;
  ++os.count;
  // Durations mean latency for these; a page-allocation row's duration is its window.
  if (e.kind == hal::EventKind::kSchedSwitch || e.kind == hal::EventKind::kBlockIo) {
    os.sum_ns += e.dur_ns;
    os.max_ns = std::max<uint64_t>(os.max_ns, e.dur_ns);
  }
}

// One host event: counted under its op, and into its process's and the host's tallies.
void add_host_event(HostContext& h, Lookups& l, Room& room, const hal::Event& e) {
  count_host_op(h, l, e);
  if (!l.pid_host || e.pid != l.pid) {
    l.pid = e.pid;
    l.pid_host = &h.per_pid[e.pid];
    l.offcpu = nullptr;
  }
  PidHost& p = *l.pid_host;
  if (p.comm.empty()) p.comm = std::string(e.comm_view());
  // The latest: a process moved into its container's cgroup after it started (its first
  // events are its parent's) belongs to the container.
  if (e.cgroup_id) p.cgroup_id = e.cgroup_id;
  switch (e.kind) {
    case hal::EventKind::kSchedSwitch:
      add_sched_switch(h, l, room, p, e);
      break;
    case hal::EventKind::kSchedWakeup:
      ++p.wakeups;
      break;
    case hal::EventKind::kProcessFork:
      ++p.forks;
      h.forks.push_back({int64_t(e.ts_ns), e.pid, uint32_t(e.get_or(hal::Field::kPeerPid, 0)),
                         std::string(e.peer_comm_view())});
      break;
    case hal::EventKind::kProcessExec:
      ++p.execs;
      break;
    case hal::EventKind::kProcessExit:
      ++p.exits;
      break;
    case hal::EventKind::kPageAlloc:
      p.page_allocs += e.get_or(hal::Field::kCount, 1);
      p.page_bytes += e.get_or(hal::Field::kBytes, 0);
      break;
    case hal::EventKind::kBlockIo:
      add_block_io(h, p, e);
      break;
    case hal::EventKind::kTcpRetransmit:
      ++h.tcp_retransmits;
      if (h.tcp_times.size() < kMaxBlockIntervals) h.tcp_times.push_back(int64_t(e.ts_ns));
      break;
    case hal::EventKind::kOomKill:
      h.ooms.push_back({int64_t(e.ts_ns), e.pid, std::string(e.comm_view()),
                        uint32_t(e.get_or(hal::Field::kPeerPid, 0)),
                        std::string(e.peer_comm_view())});
      break;
    default:
      break;
  }
}

// Kernel aggregates cover every process, including ones without stored events; they
// replace event-derived counts where present (they are complete, events are sampled).
void take_process_activity(HostContext& h, const std::map<uint32_t, ProcessActivity>& act) {
  h.has_activity = !act.empty();
  for (const auto& [pid, a] : act) {
    // Switches counted by the kernel say the scheduler was traced, whether or not any was stored
    // as an event (a process busy on its CPU all along, at SCHED_FIFO, switched never).
    if (a.switches) h.has_sched_events = true;
    PidHost& p = h.per_pid[pid];
    if (p.comm.empty()) p.comm = a.comm;
    p.switches = std::max(p.switches, a.switches);
    p.involuntary = std::max(p.involuntary, a.involuntary);
    p.off_cpu_ns = std::max(p.off_cpu_ns, a.off_cpu_ns);
    p.max_off_cpu_ns = std::max(p.max_off_cpu_ns, a.max_off_cpu_ns);
    p.wakeups = std::max(p.wakeups, a.wakeups);
    p.forks = std::max(p.forks, a.forks);
    p.page_allocs = std::max(p.page_allocs, a.page_allocs);
    p.page_bytes = std::max(p.page_bytes, a.page_bytes);
    p.block_ios = std::max(p.block_ios, a.block_ios);
    p.block_bytes = std::max(p.block_bytes, a.block_bytes);
    p.block_ns = std::max(p.block_ns, a.block_ns);
  }
}

// The system snapshots' peaks, minimum and CPU average.
void summarise_snapshots(HostContext& h) {
  double sum = 0;
  h.mem_avail_min_mb = h.snapshots.empty() ? 0 : INT64_MAX;
  for (const auto& s : h.snapshots) {
    h.cpu_max = std::max(h.cpu_max, s.cpu_pct);
    sum += s.cpu_pct;
    h.mem_pct_max = std::max(h.mem_pct_max, s.mem_pct);
    h.swap_max_mb = std::max(h.swap_max_mb, s.swap_mb);
    h.mem_avail_min_mb = std::min(h.mem_avail_min_mb, s.mem_avail_mb);
  }
  if (!h.snapshots.empty()) h.cpu_avg = sum / double(h.snapshots.size());
}

}  // namespace

HostContext collect_host_context(TraceSource& source, const Window& w, int64_t modelled_from_ns) {
  HostContext h;
  h.comms.emplace_back("");
  Window all = w;
  all.pid.reset();
  Lookups l;
  // "Host events" under `explain --pid 579` counted every process's (helper-77).
  l.ops_pid = w.pid;
  Room room;
  if (modelled_from_ns > w.from_ns) room.modelled_from = modelled_from_ns;
  source.host_context_events(all, [&](const hal::Event& e) { add_host_event(h, l, room, e); });
  room.finish(h);
  take_process_activity(h, source.process_activity(all));
  // The system snapshots of the events' span at most: the tracer's last snapshot, taken after
  // the last event, made a file's "avg 7%" where the same trace in ClickHouse, whose window
  // ends at the node's last event, said 8%.
  Window snaps = all;
  auto span = all.node ? source.node_span(*all.node) : source.time_span();
  if (span.first || span.second) {
    snaps.from_ns = std::max(snaps.from_ns, span.first);
    snaps.to_ns = std::min(snaps.to_ns, span.second);
  }
  h.snapshots = source.snapshots(snaps);
  summarise_snapshots(h);
  h.cgroups = source.cgroups();
  return h;
}

Overlap overlap_offcpu(const HostContext& h, uint32_t pid, const std::vector<TailWindow>& windows) {
  Overlap o;
  auto it = h.offcpu.find(pid);
  if (it == h.offcpu.end() || windows.empty()) return o;
  const auto& iv = it->second;
  // Both lists are in start-time order; windows of one group rarely overlap each other.
  // Intervals are in start order; a slow call on one thread is only charged with its own
  // thread's off-CPU time.
  size_t j = 0;
  for (const auto& w : windows) {
    while (j < iv.size() && iv[j].start + kMaxIntervalNs < w.start) ++j;
    for (size_t k = j; k < iv.size() && iv[k].start <= w.end; ++k) {
      const auto& x = iv[k];
      if (x.tid != w.tid) continue;
      int64_t lo = std::max(x.start, w.start), hi = std::min(x.end, w.end);
      if (hi < lo) continue;
      ++o.intervals;
      if (x.preempted) ++o.preempted;
      uint64_t d = uint64_t(hi - lo);
      o.off_ns += d;
      if (uint32_t by = h.by_pid(x)) {
        Preemptor& p = o.by[by];
        p.pid = by;
        p.comm = h.comm_name(h.by_comm(x));
        p.cgroup_id = h.by_cgroup(x);
        ++p.count;
        p.off_ns += d;
      }
    }
  }
  return o;
}

uint64_t overlap_count(const std::vector<std::pair<int64_t, int64_t>>& intervals,
                       const std::vector<TailWindow>& windows) {
  uint64_t n = 0;
  size_t j = 0;
  for (const auto& w : windows) {
    while (j < intervals.size() && intervals[j].first + kMaxIntervalNs < w.start) ++j;
    for (size_t k = j; k < intervals.size() && intervals[k].first <= w.end; ++k)
      if (intervals[k].second >= w.start) ++n;
  }
  return n;
}

}  // namespace ingero::engine

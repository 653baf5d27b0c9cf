#include "kernelside/host_decoder.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>

#include <cstring>

namespace ingero::kernelside {
namespace {

constexpr std::string_view kVendor = "host";
constexpr std::string_view kApi = "kernel";

void base(hal::Event& ev, hal::EventKind kind, std::string_view op) {
  ev.reset();  // not a fresh Event: its strings keep their storage, nothing is built and freed
  ev.vendor = kVendor;
  ev.api = kApi;
  ev.kind = kind;
  ev.op = op;
}

std::string_view comm_str(const char* c) { return {c, strnlen(c, INGERO_COMM_LEN)}; }

std::string addr_str(uint16_t family, const uint8_t* a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET)
    inet_ntop(AF_INET, a, buf, sizeof(buf));
  else if (family == AF_INET6)
    inet_ntop(AF_INET6, a, buf, sizeof(buf));
  return buf;
}

std::string_view block_op(uint32_t op) {
  switch (op) {
    case 0:
      return "block_read";
    case 1:
      return "block_write";
    case 2:
      return "block_flush";
    case 3:
      return "block_discard";
    default:
      return "block_io";
  }
}

// One off-CPU interval; for a thread that blocked and was woken, who woke it and how long it
// then waited for a CPU.
bool decode_sched(const void* data, size_t size, hal::Event& ev) {
  if (size < sizeof(ingero_sched_rec)) return false;
  const auto* r = static_cast<const ingero_sched_rec*>(data);
  base(ev, hal::EventKind::kSchedSwitch, "sched_switch");
  ev.ts_ns = r->start_ns;
  ev.dur_ns = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
  ev.pid = r->pid;
  ev.tid = r->tid;
  ev.cgroup_id = r->cgroup_id;
  ev.set_comm(comm_str(r->comm));
  ev.set_peer_comm(comm_str(r->by_comm));
  ev.set(hal::Field::kCpu, r->cpu);
  ev.set(hal::Field::kState, r->prev_state);
  ev.set(hal::Field::kFlags, r->preempted);
  ev.set(hal::Field::kPeerPid, r->by_pid);
  ev.set(hal::Field::kPeerTid, r->by_tid);
  ev.set(hal::Field::kPeerCgroup, r->by_cgroup_id);
  if (r->woken_ns && r->woken_ns >= r->start_ns && r->woken_ns <= r->end_ns) {
    ev.set(hal::Field::kWakerPid, r->waker_pid);
    ev.set(hal::Field::kWakerTid, r->waker_tid);
    ev.set(hal::Field::kRunqNs, r->end_ns - r->woken_ns);
    ev.detail = comm_str(r->waker_comm);
  }
  return true;
}

std::string_view proc_op(uint32_t kind, hal::EventKind& k) {
  switch (kind) {
    case INGERO_PROC_FORK:
      k = hal::EventKind::kProcessFork;
      return "process_fork";
    case INGERO_PROC_EXEC:
      k = hal::EventKind::kProcessExec;
      return "process_exec";
    case INGERO_PROC_EXIT:
      k = hal::EventKind::kProcessExit;
      return "process_exit";
    case INGERO_PROC_WAKEUP:  // older builds' rings only; today's fold it into sched_switch
      k = hal::EventKind::kSchedWakeup;
      return "sched_wakeup";
    case INGERO_PROC_OOM:
      k = hal::EventKind::kOomKill;
      return "oom_kill";
    default:
      return {};
  }
}

// A process's fork, exec, exit or OOM kill.
bool decode_proc(const void* data, size_t size, hal::Event& ev) {
  if (size < sizeof(ingero_proc_rec)) return false;
  const auto* r = static_cast<const ingero_proc_rec*>(data);
  hal::EventKind kind = hal::EventKind::kUnknown;
  std::string_view op = proc_op(r->kind, kind);
  if (op.empty()) return false;
  base(ev, kind, op);
  ev.ts_ns = r->ts_ns;
  ev.pid = r->pid;
  ev.tid = r->tid;
  ev.cgroup_id = r->cgroup_id;
  ev.set_comm(comm_str(r->comm));
  if (r->peer_pid || r->peer_tid) {
    ev.set(hal::Field::kPeerPid, r->peer_pid);
    ev.set(hal::Field::kPeerTid, r->peer_tid);
    ev.set_peer_comm(comm_str(r->peer_comm));
  }
  ev.set(hal::Field::kCpu, r->cpu);
  if (r->kind == INGERO_PROC_EXIT) {
    // exit_code as wait(2) encodes it: status << 8 | signal.
    ev.has_ret = true;
    ev.ret = r->code;
  }
  if (r->kind == INGERO_PROC_EXEC)
    ev.detail = std::string(r->detail, strnlen(r->detail, sizeof(r->detail)));
  return true;
}

// One block request, issue to completion.
bool decode_block(const void* data, size_t size, hal::Event& ev) {
  if (size < sizeof(ingero_block_rec)) return false;
  const auto* r = static_cast<const ingero_block_rec*>(data);
  base(ev, hal::EventKind::kBlockIo, block_op(r->op));
  ev.ts_ns = r->issue_ns;
  ev.dur_ns = r->complete_ns > r->issue_ns ? r->complete_ns - r->issue_ns : 0;
  ev.pid = r->pid;
  ev.tid = r->tid;
  ev.set_comm(comm_str(r->comm));
  ev.set(hal::Field::kBytes, r->bytes);
  ev.set(hal::Field::kDevice, r->dev);
  ev.set(hal::Field::kSector, r->sector);
  ev.has_ret = true;
  ev.ret = r->error;
  return true;
}

bool decode_tcp(const void* data, size_t size, hal::Event& ev) {
  if (size < sizeof(ingero_tcp_rec)) return false;
  const auto* r = static_cast<const ingero_tcp_rec*>(data);
  base(ev, hal::EventKind::kTcpRetransmit, "tcp_retransmit");
  ev.ts_ns = r->ts_ns;
  ev.pid = r->pid;
  ev.tid = r->tid;
  ev.cgroup_id = r->cgroup_id;
  ev.set_comm(comm_str(r->comm));
  ev.saddr = addr_str(r->family, r->saddr);
  ev.daddr = addr_str(r->family, r->daddr);
  ev.set(hal::Field::kSport, r->sport);
  ev.set(hal::Field::kDport, r->dport);
  ev.set(hal::Field::kState, r->state);
  return true;
}

}  // namespace

bool decode_host_record(const void* data, size_t size, hal::Event& ev) {
  if (size < sizeof(uint32_t)) return false;
  uint32_t type;
  std::memcpy(&type, data, sizeof(type));
  switch (type) {
    case INGERO_REC_SCHED:
      return decode_sched(data, size, ev);
    case INGERO_REC_PROC:
      return decode_proc(data, size, ev);
    case INGERO_REC_BLOCK:
      return decode_block(data, size, ev);
    case INGERO_REC_TCP:
      return decode_tcp(data, size, ev);
    default:
      return false;
  }
}

ingero::Result<std::vector<ProcessStats>> ProcessStatsReader::read_deltas() {
  std::vector<ProcessStats> out;
  uint32_t key = 0, next = 0;
  bool first = true;
  std::unordered_map<uint32_t, ingero_pid_stats> now;
  while (bpf_map_get_next_key(fd_, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    ingero_pid_stats v{};
    if (bpf_map_lookup_elem(fd_, &key, &v) != 0) continue;  // evicted meanwhile
    now[key] = v;
  }
  for (const auto& [pid, v] : now) {
    ingero_pid_stats prev{};
    if (auto it = last_.find(pid); it != last_.end()) prev = it->second;
    // An LRU eviction and re-creation resets the counters; treat a decrease as a restart.
    auto d = [](uint64_t a, uint64_t b) { return a >= b ? a - b : a; };
    ProcessStats s;
    s.pid = pid;
    s.comm = comm_str(v.comm);
    s.cgroup_id = v.cgroup_id;
    s.switches = d(v.switches, prev.switches);
    s.involuntary = d(v.involuntary, prev.involuntary);
    s.off_cpu_ns = d(v.off_cpu_ns, prev.off_cpu_ns);
    s.max_off_cpu_ns = v.max_off_cpu_ns;
    s.wakeups = d(v.wakeups, prev.wakeups);
    s.page_allocs = d(v.page_allocs, prev.page_allocs);
    s.page_bytes = d(v.page_bytes, prev.page_bytes);
    s.forks = d(v.forks, prev.forks);
    s.block_ios = d(v.block_ios, prev.block_ios);
    s.block_bytes = d(v.block_bytes, prev.block_bytes);
    s.block_ns = d(v.block_ns, prev.block_ns);
    if (!s.empty()) out.push_back(std::move(s));
  }
  last_ = std::move(now);
  return out;
}

hal::Event page_alloc_event(const ProcessStats& s, uint64_t window_start_ns, uint64_t window_ns) {
  hal::Event ev;
  base(ev, hal::EventKind::kPageAlloc, "mm_page_alloc");
  ev.ts_ns = window_start_ns;
  ev.dur_ns = window_ns;
  ev.pid = s.pid;
  ev.tid = s.pid;
  ev.cgroup_id = s.cgroup_id;
  ev.set_comm(s.comm);
  ev.set(hal::Field::kCount, s.page_allocs);
  ev.set(hal::Field::kBytes, s.page_bytes);
  return ev;
}

bool decode_cpu_sample(const void* data, size_t size, hal::Event& ev) {
  if (size < sizeof(ingero_cpu_sample_rec)) return false;
  ingero_cpu_sample_rec r;
  std::memcpy(&r, data, sizeof(r));
  if (r.type != INGERO_REC_CPU_SAMPLE) return false;
  base(ev, hal::EventKind::kCpuSample, "cpu_sample");
  ev.ts_ns = r.ts_ns;
  ev.pid = r.pid;
  ev.tid = r.tid;
  ev.set(hal::Field::kCpu, r.cpu);
  return true;
}

}  // namespace ingero::kernelside

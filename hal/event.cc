#include "hal/event.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace ingero::hal {
namespace {

constexpr std::string_view kKindNames[] = {
    "unknown",           "launch",         "memcpy",       "memset",        "sync",
    "stream_wait",       "alloc",          "free",         "graph_capture", "graph_end_capture",
    "graph_instantiate", "graph_launch",   "collective",   "p2p",           "group",
    "comm_init",         "comm_destroy",   "rdma_event",   "kernel_name",   "sched_switch",
    "sched_wakeup",      "process_fork",   "process_exec", "process_exit",  "page_alloc",
    "block_io",          "tcp_retransmit", "oom_kill",     "cpu_sample",
};
static_assert(std::size(kKindNames) == static_cast<size_t>(EventKind::kCount_));

constexpr std::string_view kFieldNames[] = {
    "bytes",      "direction",    "stream",    "device",    "func",       "dptr",
    "grid_x",     "grid_y",       "grid_z",    "block_x",   "block_y",    "block_z",
    "shared_mem", "count",        "datatype",  "reduce_op", "peer",       "rank",
    "nranks",     "communicator", "comm_hash", "graph",     "graph_exec", "flags",
    "rdma_event", "fabric_error", "width",     "height",    "cpu",        "state",
    "peer_pid",   "peer_tid",     "sport",     "dport",     "sector",     "peer_cgroup",
    "err_class",  "waker_pid",    "waker_tid", "runq_ns",
};
static_assert(std::size(kFieldNames) == kFieldCount);

void copy_comm(std::array<char, 16>& dst, std::string_view s) {
  dst.fill(0);
  std::memcpy(dst.data(), s.data(), std::min(s.size(), dst.size() - 1));
}

std::string_view comm_of(const std::array<char, 16>& c) {
  return std::string_view(c.data(), strnlen(c.data(), c.size()));
}

}  // namespace

std::string_view kind_name(EventKind k) {
  auto i = static_cast<size_t>(k);
  return i < std::size(kKindNames) ? kKindNames[i] : "unknown";
}

std::optional<EventKind> kind_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (kKindNames[i] == name) return static_cast<EventKind>(i);
  return std::nullopt;
}

bool is_host_kind(EventKind k) { return k >= EventKind::kSchedSwitch && k < EventKind::kCount_; }

std::string_view direction_name(uint64_t raw) {
  switch (raw) {
    case 0:
      return "H2H";
    case 1:
      return "H2D";
    case 2:
      return "D2H";
    case 3:
      return "D2D";
    case 4:
      return "default";
    case 5:
      return "peer";
    default:
      return "unknown";
  }
}

std::string_view field_name(Field f) { return kFieldNames[static_cast<size_t>(f)]; }

// reset() sets every member: one added to Event must be reset there too.
static_assert(sizeof(Event) == 656 || sizeof(void*) != 8, "Event changed: reset the new member");

void Event::reset() {
  // One assignment a member: a chained `a = b = {}` stores b, then loads it back for a, and a
  // load of what was just stored stalls (a reader resets an Event per call, ~60 M times in an
  // explain of 10 M calls).
  ts_ns = 0;
  dur_ns = 0;
  pid = 0;
  tid = 0;
  cgroup_id = 0;
  comm = {};
  vendor = {};
  api = {};
  op = {};
  library = {};
  kind = EventKind::kUnknown;
  ret = 0;
  has_ret = false;
  unfinished = false;
  timed = true;
  caller = 0;
  off_cpu_ns = 0;
  preempts = 0;
  switches = 0;
  peer_comm = {};
  for (uint64_t m = present; m; m &= m - 1) fields[size_t(std::countr_zero(m))] = 0;
  present = 0;
  detail.clear();
  saddr.clear();
  daddr.clear();
  stack_id = 0;
  stack_of_site = false;
  nested = 0;
  nested_api = {};
  nested_op = {};
  nested_kind = EventKind::kUnknown;
}

std::string_view Event::comm_view() const { return comm_of(comm); }
std::string_view Event::peer_comm_view() const { return comm_of(peer_comm); }
void Event::set_comm(std::string_view s) { copy_comm(comm, s); }
void Event::set_peer_comm(std::string_view s) { copy_comm(peer_comm, s); }

}  // namespace ingero::hal

// The vendor-neutral event model every layer speaks.
//
// A vendor API call and a host (kernel) event are both an Event. Classification is
// (vendor, api, kind, op): vendor and api are short static strings owned by the backend
// ("nvidia"/"cuda_runtime", "amd"/"hip", "host"/"kernel"), so a new backend needs no edit
// here. kind is the closed set the engine reasons about. op is the API name for display
// and SQL ("cudaStreamSynchronize").
//
// Decoded arguments are sparse: each Field is present only where it applies to the op.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ingero::hal {

enum class EventKind : uint8_t {
  kUnknown = 0,
  // vendor API calls
  kLaunch,  // kernel launch
  kMemcpy,  // memory copy (direction in Field::kDirection)
  kMemset,
  kSync,        // the calling thread blocks until device work completes
  kStreamWait,  // device-side wait on an event; does not block the host
  kAlloc,       // device/managed/pinned allocation (pointer in Field::kDptr)
  kFree,
  kGraphBeginCapture,
  kGraphEndCapture,
  kGraphInstantiate,
  kGraphLaunch,
  kCollective,  // all-reduce, all-gather, broadcast, ...
  kP2P,         // point-to-point send/recv
  kGroup,       // group start/end
  kCommInit,
  kCommDestroy,
  kRdmaAsyncEvent,  // fabric/device asynchronous event
  // A kernel's name became known (its registration or a driver look-up; hal/kernel_names.h).
  // Consumed by capture, which keeps the name; never a call the engine or a sink counts.
  kKernelName,
  // host context
  kSchedSwitch,  // a traced thread went off-CPU; dur = off-CPU interval
  kSchedWakeup,
  kProcessFork,
  kProcessExec,
  kProcessExit,
  kPageAlloc,  // aggregated per pid per interval
  kBlockIo,    // one request: issue -> complete
  kTcpRetransmit,
  kOomKill,
  kCpuSample,  // an on-CPU sample of a GPU process's thread: where it ran (stack_id)
  kCount_,
};

std::string_view kind_name(EventKind k);  // "launch", "memcpy", ... "sched_switch"
std::optional<EventKind> kind_from_name(std::string_view name);
bool is_host_kind(EventKind k);

// Memory copy direction. Numbered as cudaMemcpyKind and hipMemcpyKind, which agree.
enum class CopyDirection : uint8_t {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kDefault = 4,
  kPeer = 5
};
std::string_view direction_name(uint64_t raw);  // "H2D", ... "unknown"

// What a failed call's return code means, whatever the vendor (backends translate it:
// hal/error_codes.h). Stored as calls.err_class; files written before classes 3-6 hold 1 or 2.
enum class ErrorClass : uint8_t {
  kNone = 0,
  kOutOfMemory = 1,
  kOther = 2,
  kNotReady = 3,     // no failure: a query whose work still runs, a call still in progress
  kNoDevice = 4,     // no usable GPU: no device or driver, one older than the runtime, no binary
  kDeviceFault = 5,  // the device or its context failed (a kernel's illegal access, ECC): sticky
  kInvalid = 6,      // the call's arguments or the program's state: an invalid value or handle
};

// Decoded numeric fields. Each maps to one column of the events table.
enum class Field : uint8_t {
  kBytes = 0,
  kDirection,
  kStream,
  kDevice,
  kFunc,  // kernel function address / handle
  kDptr,  // device pointer returned (alloc) or released (free)
  kGridX,
  kGridY,
  kGridZ,
  kBlockX,
  kBlockY,
  kBlockZ,
  kSharedMem,
  kCount,     // element count (collectives)
  kDatatype,  // vendor datatype enum (ncclDataType_t)
  kReduceOp,
  kPeer,  // root or peer rank
  kRank,
  kNranks,
  kCommunicator,  // communicator handle
  kCommHash,      // splitmix64 fold of the unique id
  kGraph,         // graph handle (cudaGraph_t / hipGraph_t)
  kGraphExec,     // instantiated graph handle
  kFlags,
  kRdmaEvent,    // ibv_event_type
  kFabricError,  // 1 if the RDMA event is a fabric error
  kWidth,        // 2D copy width/height before multiplying into bytes
  kHeight,
  kCpu,
  kState,    // prev_state (sched_switch), tcp state
  kPeerPid,  // preemptor / waker / child / peer process
  kPeerTid,
  kSport,
  kDport,
  kSector,
  kPeerCgroup,  // cgroup of the preemptor / peer task
  kErrClass,    // vendor-neutral error class of `ret`, set by the backend (ErrorClass)
  kWakerPid,    // sched_switch of a thread that blocked: the task that woke it
  kWakerTid,
  kRunqNs,  // ... and how long it then waited for a CPU (ns from the wakeup to back on CPU)
  kCount_,
};
inline constexpr size_t kFieldCount = static_cast<size_t>(Field::kCount_);
std::string_view field_name(Field f);  // column name, e.g. "grid_x"

struct Event {
  // identity
  uint64_t ts_ns = 0;  // CLOCK_MONOTONIC start; the session records the wall-clock offset
  uint64_t dur_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t cgroup_id = 0;
  std::array<char, 16> comm{};
  // classification; the string_views point at static or interned storage
  std::string_view vendor;
  std::string_view api;
  EventKind kind = EventKind::kUnknown;
  std::string_view op;
  std::string_view library;  // file the probe sits in (display path); "" for host events
  // result
  int64_t ret = 0;
  bool has_ret = false;  // false for host events and calls that never returned
  bool unfinished = false;
  // false: seen at entry only (a launch whose return was not sampled): dur_ns is unknown (0)
  // and so are ret and the off-CPU figures; the call's count and arguments are exact.
  bool timed = true;
  // The caller's return address, where the probe ships it (launches): which code made the call
  // (user space folds a launch made from inside another traced runtime by it). 0: unknown.
  uint64_t caller = 0;
  // off-CPU during the call
  uint64_t off_cpu_ns = 0;
  uint32_t preempts = 0;  // involuntary switches during the call
  uint32_t switches = 0;
  std::array<char, 16> peer_comm{};  // preemptor (calls) or peer task (host events)
  // decoded fields
  std::array<uint64_t, kFieldCount> fields{};
  uint64_t present = 0;        // bit per Field
  std::string detail;          // free text: exec filename, block rwbs, ...
  std::string saddr, daddr;    // network endpoints, printable
  uint64_t stack_id = 0;       // 0 = no stack
  bool stack_of_site = false;  // stack_id is its call site's last captured stack, not its own
  // Traced calls made inside this one on the same thread (a runtime call's driver call, an
  // API alias), folded into it; nested_op is the first of them.
  uint32_t nested = 0;
  std::string_view nested_api, nested_op;
  EventKind nested_kind = EventKind::kUnknown;

  void set(Field f, uint64_t v) {
    fields[static_cast<size_t>(f)] = v;
    present |= uint64_t{1} << static_cast<unsigned>(f);
  }
  bool has(Field f) const { return present & (uint64_t{1} << static_cast<unsigned>(f)); }
  std::optional<uint64_t> get(Field f) const {
    if (!has(f)) return std::nullopt;
    return fields[static_cast<size_t>(f)];
  }
  uint64_t get_or(Field f, uint64_t dflt) const { return has(f) ? fields[size_t(f)] : dflt; }
  void clear(Field f) { present &= ~(uint64_t{1} << static_cast<unsigned>(f)); }

  // Back to a default Event without giving up the strings' storage: far cheaper than
  // assigning a fresh one, for readers that decode millions of rows into one Event.
  void reset();

  std::string_view comm_view() const;
  std::string_view peer_comm_view() const;
  void set_comm(std::string_view s);
  void set_peer_comm(std::string_view s);
};
static_assert(kFieldCount <= 64, "Event::present is a 64-bit mask");

}  // namespace ingero::hal

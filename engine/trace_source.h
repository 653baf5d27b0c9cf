// What the engine reads, and nothing more. The engine is vendor-neutral and does no I/O:
// app/ implements TraceSource over a trace file (ours or the original implementation's),
// tests implement it over synthetic events. Every method may be called several times (the
// exact-percentile passes re-read the calls), and must return the same data each time.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/call_run.h"
#include "engine/quantile_sketch.h"
#include "hal/device_sampler.h"
#include "hal/error_codes.h"
#include "hal/event.h"
#include "hal/inflight.h"
#include "hal/sink_records.h"

namespace ingero::engine {

// A time window in wall-clock Unix ns, optionally restricted to one process.
struct Window {
  int64_t from_ns = std::numeric_limits<int64_t>::min();
  int64_t to_ns = std::numeric_limits<int64_t>::max();
  std::optional<uint32_t> pid;
  std::optional<std::string> node;  // merged multi-node traces are analysed node by node
  bool contains(int64_t ts) const { return ts >= from_ns && ts <= to_ns; }
  bool operator==(const Window&) const = default;
};

struct SnapshotRow {
  int64_t ts_ns = 0;
  double cpu_pct = 0, mem_pct = 0, load_avg = 0;
  int64_t mem_avail_mb = 0, swap_mb = 0;
  std::string node;  // whose (a merged file or a fleet holds several nodes'); "" unknown
};

// Per-process host activity summed over the window (kernel aggregates, or derived from
// stored host events for files that have no aggregates).
struct ProcessActivity {
  uint32_t pid = 0;
  std::string comm;
  uint64_t switches = 0, involuntary = 0, off_cpu_ns = 0, max_off_cpu_ns = 0;
  uint64_t wakeups = 0, page_allocs = 0, page_bytes = 0, forks = 0;
  uint64_t block_ios = 0, block_bytes = 0, block_ns = 0;
};

// One sample of a device port's error counter (a backend's side-channel poller stores one
// every 5 s; hal/side_channel.h).
struct DeviceCounterSample {
  int64_t ts_ns = 0;
  std::string backend;  // "rdma"
  std::string device;
  uint32_t port = 0;
  std::string counter;
  uint64_t value = 0;
};

// One frame of a stored call stack, innermost first.
struct StackFrameInfo {
  bool python = false;
  std::string function, file;  // file "" when there is no source location
  int64_t line = 0;
  std::string module;   // native: the mapped file
  std::string address;  // "libx.so+0x1a2b"
};

// A library attached while a process already had it mapped: that process's calls into it
// before the attach are not in the trace, and nothing could count them.
struct LateLibrary {
  std::string path;
  uint32_t pid = 0;
  int64_t late_ns = 0;  // from its loader's report to the attach; 0: unknown
};

// Records the tracer lost, as its sessions counted them. by_kind is false for files written
// before the per-kind counters (schema < 5): only ringbuf_drops (every kind) is known then.
struct TraceLosses {
  bool by_kind = false;
  uint64_t ringbuf_drops = 0;  // every kind of record
  uint64_t call_drops = 0, stack_drops = 0, host_drops = 0, sample_drops = 0;
  uint64_t lost_calls = 0;          // never traced: thread table full, nesting too deep
  uint64_t calls_lost_at_exit = 0;  // in flight in a process that exited
  uint64_t store_errors = 0;        // decoded but not written
  std::vector<LateLibrary> late_libraries;
  // What retention deleted by policy (--retain, --max-db-size): calls and host events, from the
  // start of the oldest call deleted (0: unknown) to the cut, before which anything may be gone.
  uint64_t retention_calls = 0, retention_events = 0;
  int64_t retention_from_ns = 0, retention_before_ns = 0;
  // Calls missing from the trace; when the kind of a drop is unknown, every drop counts.
  uint64_t calls_lost() const {
    return (by_kind ? call_drops : ringbuf_drops) + lost_calls + calls_lost_at_exit;
  }
  bool any() const {
    return ringbuf_drops + lost_calls + calls_lost_at_exit + store_errors || retention_before_ns ||
           !late_libraries.empty();
  }
  // Whether call counts may be short of the truth.
  bool lower_bounds() const { return calls_lost() > 0 || !late_libraries.empty(); }
};

// One on-CPU sample of a thread (perf-event CPU-clock sampling of GPU processes): where the
// thread was running at ts_ns. stack_id names a stack readable with TraceSource::stack().
struct CpuSample {
  int64_t ts_ns = 0;
  uint32_t pid = 0, tid = 0;
  uint64_t stack_id = 0;
};
using CpuSampleFn = std::function<void(const CpuSample&)>;

// The latency sketch of one process's calls of one op over a window (per-second summaries
// merged; engine/quantile_sketch.h gives the error bound).
struct CallSketch {
  uint32_t pid = 0;
  std::string vendor, api, op;
  QuantileSketch sketch;
};

// A cgroup as the trace recorded it (cgroup_metadata): its path and who it belongs to. Names
// are "" where the tracer found none (an unknown layout, a name the host does not keep).
struct CgroupInfo {
  std::string path;          // relative to the cgroup v2 mount; "" unknown
  std::string container_id;  // 64 hex digits
  std::string container;     // the container's name
  std::string pod, pod_namespace, pod_uid;
  std::string qos;      // "guaranteed", "burstable", "besteffort"
  std::string runtime;  // "containerd", "cri-o", "docker", "podman"
};

struct ProcessInfo {
  uint32_t pid = 0;
  std::string name, cmdline;
};

// A stuck thread as the tracer recorded it (hal/inflight.h), with wall-clock times: the latest
// observation of one call in flight, or of one idle episode of a rank's thread.
struct InflightRow {
  std::string node;
  hal::Inflight in;
};

// A kernel's name for one process's function: calls.func of its launches (a host stub's
// address or a driver handle). The tracer learns them from the runtime's registration of
// kernels, driver look-ups and ELF symbols (hal/kernel_names.h); the engine never sees more.
struct KernelNameInfo {
  std::string node;
  uint32_t pid = 0;
  uint64_t func = 0;
  std::string name;      // demangled: "void scale<float>(float*, float, int)"
  std::string raw_name;  // as the binary spells it
  std::string source;    // "registration", "driver_lookup", "elf_symbol"
};

// What the tracer could not name, summed over the sessions (hal/sink_records.h).
using KernelNaming = hal::KernelNaming;

// The string_views inside events (vendor, api, op, library) must point at storage that lives
// as long as the source: the engine keys its groups by their addresses.
using EventFn = std::function<void(const hal::Event&)>;
using CallRunFn = std::function<void(const CallRun&)>;
// For a pass that looks at no launch: runs hold launches only.
inline void ignore_runs(const CallRun&) {}

class TraceSource {
 public:
  virtual ~TraceSource() = default;
  // Another source over the same trace that another thread may read while this one is read
  // (its own connection); nullptr when there is none. Destroy it on this source's thread.
  virtual std::unique_ptr<TraceSource> open_another() { return nullptr; }
  // Whether calls() and call_runs() of `w` may run on several threads at once, beside one
  // thread making any other read (the window's calls are held in memory): the step model,
  // which also reads stacks, then runs beside the rules that read only the calls.
  virtual bool concurrent_call_reads(const Window& /*w*/) { return false; }
  // Where the first read of a window's calls keeps them in memory: `fn` runs once, on the
  // reading thread, as soon as the next first read of `w` holds every call of it (it may still
  // be passing them on), with the number held of each process; calls() and call_runs() of `w`
  // may then run on other threads as after concurrent_call_reads(w). Never where that read does
  // not hold them all. By default nothing is held and `fn` never runs.
  using HeldFn = std::function<void(const std::map<uint32_t, uint64_t>& calls_per_pid)>;
  virtual void when_calls_held(const Window& /*w*/, HeldFn /*fn*/) {}
  // Vendor calls in the window, in start-time order. ts_ns is wall-clock Unix ns.
  virtual void calls(const Window& w, const EventFn& fn) = 0;
  // The same calls, but a run of calls folded by tiered retention whose calls all start in
  // the window comes whole through `run` (engine/call_run.h), for passes that add calls up.
  // Items come in order of their start; a run's later calls may start after the calls given
  // after it. Sources without runs give every call through `fn`.
  virtual void call_runs(const Window& w, const EventFn& fn, const CallRunFn& /*run*/) {
    calls(w, fn);
  }
  // The same calls as the trace stores them, for drawing each (export's timeline): a file's
  // calls within --full-rows at their recorded times, where calls() gives the engine's folded
  // form, a run's calls spread evenly between its ends. Calls folded for good come spread
  // either way. Default: calls().
  virtual void stored_calls(const Window& w, const EventFn& fn) { calls(w, fn); }
  // Host events (sched_switch, wakeups, lifecycle, page allocation aggregates, block I/O,
  // TCP retransmits, OOM kills) in the window, in time order. The pid restriction of the
  // window does not apply: host context is about everybody.
  virtual void host_events(const Window& w, const EventFn& fn) = 0;
  // The same events with what the host context reads of them (engine/host_context.cc): op,
  // kind, times, process, thread, names, cgroups, the stack of an on-CPU sample, and of the
  // fields only kHostContextFields. A source may leave the rest unset to read less; by
  // default every event is as host_events() gives it.
  static constexpr hal::Field kHostContextFields[] = {hal::Field::kFlags,   hal::Field::kState,
                                                      hal::Field::kPeerPid, hal::Field::kPeerCgroup,
                                                      hal::Field::kBytes,   hal::Field::kCount};
  virtual void host_context_events(const Window& w, const EventFn& fn) { host_events(w, fn); }
  virtual std::vector<SnapshotRow> snapshots(const Window& w) = 0;
  virtual std::map<uint32_t, ProcessActivity> process_activity(const Window& w) = 0;
  virtual std::map<uint32_t, ProcessInfo> processes() = 0;
  // Those of one node of a merged trace (pids of several nodes collide: node b's pid 741 was
  // named as node a's); nullopt: processes(). A source scoped to a node already gives its own.
  virtual std::map<uint32_t, ProcessInfo> processes_of(const std::optional<std::string>& node) {
    (void)node;
    return processes();
  }
  // The distinct node names of the trace (a merged file's or a fleet's several); empty when the
  // source does not know them.
  virtual std::vector<std::string> nodes() { return {}; }
  // First and last event timestamps of the whole trace; {0, 0} when empty.
  virtual std::pair<int64_t, int64_t> time_span() = 0;
  // The same of one node's events (a merged or fleet trace analysed node by node): by default
  // the whole trace's.
  virtual std::pair<int64_t, int64_t> node_span(const std::string& /*node*/) { return time_span(); }
  // Number of events (calls and host events) in the window.
  virtual uint64_t event_count(const Window& w) = 0;
  // Device error-counter samples in the window, in time order.
  virtual std::vector<DeviceCounterSample> device_error_samples(const Window&) { return {}; }
  // cgroup id -> its path and names, where the trace recorded them.
  virtual std::map<uint64_t, CgroupInfo> cgroups() { return {}; }
  // What the GPUs reported (hal/device_sampler.h: NVML, amdgpu): the utilisation samples (and
  // per-process memory rows) ending in the window, in no particular order; the window's pid
  // restriction applies to per-process rows only. Traces without device data have none.
  virtual void device_samples(const Window& /*w*/,
                              const std::function<void(const hal::DeviceSample&)>& /*fn*/) {}
  // Device events (Xid, ECC, a lost GPU) in the window, in time order.
  virtual std::vector<hal::DeviceEvent> device_events(const Window& /*w*/) { return {}; }
  // Whether calls carry stacks (Event::stack_id), and a stack's frames.
  virtual bool has_stacks() { return false; }
  virtual std::vector<StackFrameInfo> stack(uint64_t /*stack_id*/) { return {}; }
  // On-CPU samples in the window (pid restriction applies), in time order. Traces recorded
  // without on-CPU sampling have none; the step model then locates host gaps by the GPU calls
  // around them instead.
  virtual bool has_cpu_samples() { return false; }
  virtual void cpu_samples(const Window& /*w*/, const CpuSampleFn& /*fn*/) {}
  // Where some of the window's calls were folded by tiered retention (store/tiers.h), calls()
  // gives them back with approximate durations: the sketches of every call of the window, per
  // (pid, op), for the latency quantiles. nullopt when every call has its own row (quantiles
  // are then exact).
  virtual std::optional<std::vector<CallSketch>> folded_call_sketches(const Window& /*w*/) {
    return std::nullopt;
  }
  // What the tracer lost while recording, summed over the sessions (nullopt: the source does
  // not record it, e.g. the original implementation's files).
  virtual std::optional<TraceLosses> losses() { return std::nullopt; }
  // The same of one node's sessions (a merged trace analysed node by node): by default the
  // whole trace's.
  virtual std::optional<TraceLosses> node_losses(const std::string& /*node*/) { return losses(); }
  // Threads stuck while the trace was recorded (calls in flight longer than the tracer's
  // --inflight-after, idle rank threads) whose time in that state overlaps `w` (its pid and
  // node apply), the latest observation of each, in order of entry. Sources without them
  // (files of older builds, the original implementation's) have none.
  virtual std::vector<InflightRow> inflight(const Window& /*w*/) { return {}; }
  // Kernel names of the trace's launches (of `node` when given), and what the tracer could not
  // name (nullopt: the source does not record it, e.g. files from before kernel names).
  virtual std::vector<KernelNameInfo> kernel_names(const std::optional<std::string>& /*node*/) {
    return {};
  }
  virtual std::optional<KernelNaming> kernel_naming(const std::optional<std::string>& /*node*/) {
    return std::nullopt;
  }
  // The vendor's name and the class of return code `ret` of a call of `api` ("cuda_runtime"),
  // as the backends know it (hal/error_codes.h); nullopt where none was given the source.
  virtual std::optional<hal::ErrorCode> error_code(std::string_view /*api*/, int64_t /*ret*/) {
    return std::nullopt;
  }
  // The pids of the tracer itself in the sessions that recorded the trace (of `node` when given):
  // a chain that finds it among the preemptors says so. Empty where the source does not record
  // them (files from before sessions.tracer_pid).
  virtual std::set<uint32_t> tracer_pids(const std::optional<std::string>& /*node*/) { return {}; }
  // The latest start of a whole second of `w` such that at most `max_calls` calls start
  // between it and the window's end, from per-second call counts; w.from_ns when the whole
  // window fits or the source keeps no such counts.
  virtual int64_t recent_start(const Window& w, uint64_t /*max_calls*/) { return w.from_ns; }
};

}  // namespace ingero::engine

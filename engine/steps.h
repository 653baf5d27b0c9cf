// The step model: each GPU process's training-step cadence, and where each step's time goes.
//
// A training loop repeats one blocking round trip per step (the loss read: a device-to-host
// copy and a sync). The model finds that cadence in the call stream, cuts the process's
// timeline into steps at it, and splits every step into what the host was doing (waiting for
// the GPU, enqueueing work, other GPU API calls, its own code) and whether the GPU had work.
// Without device timestamps the GPU side is a lower bound: a stream is idle only from the
// return of a sync that drained it until the next work is queued on it. Where the devices
// reported their utilisation (NVML, amdgpu: engine/device_busy.h), the GPU's busy share of
// each step they cover is measured, per process where they give it. Host gaps (the GPU
// idle and no thread inside a GPU call) are attributed to what the thread that ended them
// did: on-CPU, preempted (by whom), blocked in uninterruptible sleep (disk I/O, fsync), or
// sleeping (locks, queues). docs/engine.md describes it; thresholds are in
// engine/thresholds_steps.h.
//
// Everything here is plain data for the report, MCP, Prometheus and the rules.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/device_busy.h"
#include "engine/host_context.h"
#include "engine/thresholds_steps.h"
#include "engine/trace_source.h"

namespace ingero::engine {

// How a process's steps were found.
enum class Cadence : uint8_t {
  kNone = 0,  // too few GPU calls for steps
  kSync,      // a periodic blocking round trip (device-to-host copy and/or sync) from one site
  kBursts,    // periodic bursts of GPU calls separated by host gaps
  kWindows,   // nothing periodic: fixed windows
};
const char* cadence_name(Cadence c);  // "none", "sync", "bursts", "windows"

// How the threads that ended host gaps spent them. Sums to the gap time it describes.
struct GapTime {
  uint64_t on_cpu_ns = 0;     // running: the host was busy in its own code
  uint64_t preempted_ns = 0;  // runnable, but another task had the CPU
  uint64_t io_ns = 0;         // uninterruptible sleep: disk I/O, fsync, page faults
  uint64_t sleep_ns = 0;      // interruptible sleep: a lock, a queue, sleep()
  uint64_t unknown_ns = 0;    // the trace has no scheduler events: the thread's state is unknown
  uint64_t total() const { return on_cpu_ns + preempted_ns + io_ns + sleep_ns + unknown_ns; }
  // For a span of `len` whose off-CPU parts are counted: those parts scaled down to fit where
  // they exceed it (rounding at the span's edges), and the rest of it on CPU.
  void fit(uint64_t len) {
    uint64_t off = preempted_ns + io_ns + sleep_ns;
    if (off > len) {
      double f = double(len) / double(off);
      preempted_ns = uint64_t(double(preempted_ns) * f);
      io_ns = uint64_t(double(io_ns) * f);
      sleep_ns = len - preempted_ns - io_ns;
      off = len;
    }
    on_cpu_ns = len - off;
  }
  GapTime& operator+=(const GapTime& o) {
    on_cpu_ns += o.on_cpu_ns;
    preempted_ns += o.preempted_ns;
    io_ns += o.io_ns;
    sleep_ns += o.sleep_ns;
    unknown_ns += o.unknown_ns;
    return *this;
  }
};

// One host gap: the GPU idle (nothing outstanding on any stream) while no thread of the
// process was inside a GPU call. Gaps are split at step boundaries.
struct HostGap {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t step = 0;          // index into StepSeries::steps; kNoStep in the warm-up prefix
  uint32_t tid = 0;           // the thread whose GPU call ended the gap (else the one before)
  uint64_t before_stack = 0;  // stack of the last GPU call before the gap; 0 when none/unknown
  int32_t before_site = -1;   // StepSeries::sites index of that call's round-trip site, or -1
  uint64_t after_stack = 0;   // stack of the GPU call that ended the gap
  hal::EventKind after_kind = hal::EventKind::kUnknown;
  uint64_t after_direction = UINT64_MAX;  // copy direction of that call (hal::CopyDirection)
  std::string after_op;                   // its op, for display
  GapTime time;
  uint32_t preemptor_pid = 0;  // who held the CPU longest while the thread was preempted
  std::string preemptor;
  uint64_t block_ios = 0, block_write_bytes = 0;  // this process's block requests in the gap
  uint64_t sample_stack = 0;  // most frequent on-CPU sample stack in the gap (0: no samples)
  uint32_t samples = 0;       // on-CPU samples of the thread in the gap
  uint64_t duration() const { return uint64_t(end_ns - start_ns); }
};
inline constexpr uint32_t kNoStep = UINT32_MAX;

struct Step {
  int64_t start_ns = 0, end_ns = 0;
  bool warmup = false;  // imports, model load, first iterations, autotuning: never a fault
  // Host time, exclusive, summing to the duration: with several threads an instant counts
  // once, for the first of wait > enqueue > api > host that any thread was doing.
  uint64_t wait_ns = 0;     // inside syncs and device-to-host copies: the host waits for the GPU
  uint64_t enqueue_ns = 0;  // inside launches, other copies, memsets, collectives
  uint64_t api_ns = 0;      // inside other GPU API calls: allocation, free, graph build, setup
  uint64_t host_ns = 0;     // inside no GPU call
  GapTime host_time;        // how host_ns was spent, by the thread that made the next GPU call
  // GPU side, estimated: no work outstanding on any stream (a lower bound).
  uint64_t gpu_idle_ns = 0;
  // GPU side, measured by the device (NVML, amdgpu): the share of the step it was busy, -1
  // where no device sample covers the step; from the process's own samples or the device's.
  float gpu_busy = -1;
  bool busy_per_process = false;
  uint64_t host_gap_ns = 0;  // GPU idle and no thread inside a GPU call: waiting for the host
  GapTime gap;               // how host_gap_ns was spent
  // Time at least one thread that feeds the GPU (made GPU calls) was runnable but not running:
  // in a host-bound step every such millisecond is a millisecond of step time.
  uint64_t preempted_ns = 0;
  // Top-level calls (nested runtime->driver duplicates are part of their caller).
  uint32_t launches = 0, copies = 0, syncs = 0, allocs = 0, frees = 0, collectives = 0;
  uint32_t round_trips = 0;  // blocking waits (a D2H copy and its sync count once)
  uint64_t h2d_bytes = 0, d2h_bytes = 0;
  uint64_t alloc_free_ns = 0;  // host time inside allocations and frees
  uint64_t duration() const { return uint64_t(end_ns - start_ns); }
};

// Top-level calls of one op in the process: what the user's code called. `nested` counts
// calls of this op made inside another GPU call of the same thread (a runtime call's driver
// call, a collective's internal copies): they are part of their caller and counted once.
struct TopLevelOp {
  std::string op, api;
  hal::EventKind kind = hal::EventKind::kUnknown;
  uint64_t calls = 0, nested = 0;
  uint64_t sum_ns = 0;
};

// A call site repeating inside steps: for the hidden-sync and allocator-churn rules.
struct SiteCount {
  uint64_t stack = 0;  // one stack of the site (a site is its user frames; see steps.cc)
  std::string site;    // the site key: user frames, "op:NAME" without a stack
  hal::EventKind kind = hal::EventKind::kUnknown;
  std::string op;
  uint64_t calls = 0;       // in steady steps
  uint64_t steps_with = 0;  // steady steps with at least one
  uint64_t max_per_step = 0;
  uint64_t median_per_step = 0;
  uint64_t host_ns = 0;       // host time inside these calls in steady steps
  uint64_t max_ns = 0;        // the longest of them (a round trip: its copy and sync)
  uint64_t gap_after_ns = 0;  // host-gap time right after them (GPU idle until new work)
  uint64_t bytes = 0;
};

// The steady steps in one view: medians and shares of steady step time.
struct StepSummary {
  size_t steps = 0, warmup_steps = 0;
  uint64_t median_ns = 0, p90_ns = 0, min_ns = 0, max_ns = 0, total_ns = 0;
  double wait = 0, enqueue = 0, api = 0, host = 0, gpu_idle = 0, host_gap = 0;  // shares
  double median_gpu_idle = 0;                                                   // per step
  GapTime gap;                                                                  // over steady steps
  GapTime host_time;     // how the host time outside GPU calls was spent, over steady steps
  double preempted = 0;  // share of steady step time a GPU-feeding thread was preempted
  // Who took their CPU in steady steps: up to 3 other processes' tasks, longest first, then the
  // process's own threads as one entry (pid = the process, comm = their names).
  std::vector<Preemptor> preemptors;
  std::string preempted_by;    // the same as text: "noisy_neighbor (pid 579) 34%, its own ..."
  uint64_t preemptors_ns = 0;  // the preempted time they share
  uint32_t launches_per_step = 0, round_trips_per_step = 0;  // medians
  std::string gap_cause;           // dominant: "on-CPU", "preempted", "blocked on I/O", "sleeping"
  std::string gap_where;           // "SlowDS.__getitem__ (faults.py:15)" or "before <module> (...)"
  uint64_t gap_stack = 0;          // the stack gap_where comes from
  bool gap_where_sampled = false;  // gap_where comes from on-CPU samples
  // Where GPU-feeding threads lost the CPU in steady steps: the GPU call each made next after
  // being preempted, the one with the most preempted time before it (stack 0: no stack).
  std::string preempted_op;
  uint64_t preempted_stack = 0, preempted_before_ns = 0;
  uint32_t preempted_tid = 0;
  uint32_t preemptor_pid = 0;  // top preemptor in the gaps
  std::string preemptor;
  // The GPU side measured (engine/device_busy.h): busy_measured when device samples cover at
  // least half of the steady time; gpu_busy is then their busy share, weighted by step time.
  bool device_data = false;  // the trace has device samples at all
  bool busy_measured = false;
  double gpu_busy = 0;            // share of the covered steady time
  bool busy_per_process = false;  // most of the covered time from the process's own samples
  std::string busy_source;        // "nvml", "amdgpu"
  size_t busy_steps = 0;          // steady steps the samples cover
  std::string device_note;        // why samples measure nothing: "2 devices sampled, none ..."
  // Measured idle share, or -1 when not measured.
  double measured_idle() const { return busy_measured ? 1 - gpu_busy : -1; }
  // Every line in the user's code the steady steps' launches come from (code_location of
  // their stacks), most launches first; at most kMaxLaunchSites, the rest counted in `launches`
  // alone. A folded run's launches count at its first call's stack, then engine/kernels.h
  // moves those of a run of several kernels to each kernel's own line (apply_kernel_sites).
  struct LaunchSite {
    std::string where;
    uint64_t calls = 0;
    uint64_t stack = 0, stack_calls = 0;  // its stack with the most launches, and how many
    uint32_t tid = 0;                     // that stack's thread
  };
  std::vector<LaunchSite> launch_sites;
  static constexpr size_t kMaxLaunchSites = 256;
  // The top launch site of steady steps: where the launches come from.
  uint64_t launch_stack = 0;
  uint64_t launch_site_calls = 0, launches = 0;  // its launches, and all steady launches
  uint32_t launch_tid = 0;
  std::string launch_where;  // "forward (model.py:12)"
  std::string text;          // "median step 16.1 ms: GPU idle 80%: host on-CPU in f (file.py:15)"
};

// Sorts summary.launch_sites by launches and takes the first as launch_where, launch_stack,
// launch_site_calls and launch_tid (none when the list is empty).
void pick_launch_site(StepSummary& m);

// The GPU's share as the summary names it: "GPU busy 9% (NVML)" where measured ("(NVML, whole
// device)" from whole-device samples), else "GPU idle ≥ 86% (no device data: lower bound)".
std::string gpu_share_text(const StepSummary& m);

// The host's time outside GPU calls as the summary names it, split by what the thread that made
// the next call did meanwhile: "in its own code 2%, asleep 97%"; "outside GPU calls 74% (...)"
// where the trace has no scheduler events to tell.
std::string host_time_text(const StepSummary& m);

struct StepSeries {
  uint32_t pid = 0;
  Cadence cadence = Cadence::kNone;
  std::string cadence_note;  // how the steps were found, or why nothing was periodic
  uint32_t cycle = 1;        // kSync: round trips per step (a cycle of them where not one)
  uint32_t anchor_tid = 0;   // kSync: the thread and site of the round trip marking a step
  uint64_t anchor_stack = 0;
  std::string anchor_site;
  int64_t first_call_ns = 0, last_call_ns = 0;  // of the process's top-level GPU calls
  int64_t warmup_end_ns = 0;  // end of the warm-up phase (the first steady step's start)
  std::vector<Step> steps;
  std::vector<HostGap> gaps;  // time order, capped (gaps_dropped counts the rest)
  uint64_t gaps_dropped = 0;
  uint64_t calls_dropped = 0;  // top-level calls beyond the model's cap (not modelled)
  // kSync: GPU calls that start after the last step's end (another loop at another site, the
  // run's end), in no step; and whether they last long enough to be said (after_steps_said).
  uint64_t calls_after_steps = 0;
  // Whether the calls after the steps span more than a tenth of the process's calls and ten
  // median steps: a second phase the steps leave out, not the run's last moments.
  bool after_steps_said() const {
    if (!calls_after_steps || steps.empty()) return false;
    const int64_t after = last_call_ns - steps.back().end_ns;
    return after > (last_call_ns - first_call_ns) / 10 && after > 10 * int64_t(summary.median_ns);
  }
  std::vector<TopLevelOp> ops;   // by calls, descending
  std::vector<SiteCount> sites;  // round-trip, alloc and free sites in steady steps
  StepSummary summary;
  bool in_warmup(int64_t ts) const { return ts < warmup_end_ns; }
};

struct StepModel {
  std::vector<StepSeries> processes;  // by pid
  bool cpu_samples = false;           // the trace had on-CPU samples
  const StepSeries* find(uint32_t pid) const {
    for (const auto& s : processes)
      if (s.pid == pid) return &s;
    return nullptr;
  }
};

// Where a stack is in the user's code: its innermost Python frame outside installed packages,
// else the innermost Python frame, else the innermost native frame with a source line, else the
// innermost named function: "SlowDS.__getitem__ (faults.py:15)". "" without frames.
std::string code_location(const std::vector<StackFrameInfo>& frames);

// code_location() of the stacks of one source, each stack read once: under `lock` where one is
// given (a source the step model's threads share).
class CodeLocations {
 public:
  CodeLocations(TraceSource& source, std::mutex* lock) : source_(source), lock_(lock) {}
  const std::string& operator()(uint64_t stack);  // "" for stack 0

 private:
  TraceSource& source_;
  std::mutex* lock_;
  std::map<uint64_t, std::string> where_;
};

// The step model's default memory cap: hal::memory_share between kMinModelledBytes and
// kMaxModelledBytes.
size_t default_model_bytes();

// The on-CPU samples of a window, in time order; `present` when the trace has any.
struct CpuSamples {
  bool present = false;
  std::vector<CpuSample> all;
};
CpuSamples read_cpu_samples(TraceSource& source, const Window& w);

// One pass over the calls (and the CPU samples, when there are any) of `w`; host context
// supplies off-CPU intervals and block requests. `calls_per_pid`, when known (the op
// statistics count them), sizes each process's call list once instead of growing it.
// `samples`, when given, are `w`'s samples read already (analyze reads them beside host
// context); else they are read here. `device`, when given and not empty, measures the GPU side
// of the steps it covers. Processes are modelled on up to `threads` threads (0: as
// many as the machine has CPUs); the model is the same whatever the number. Their reads of
// stacks hold `stacks_lock` (one of their own when null): a caller reading stacks meanwhile
// holds it too. `collected`, when given, runs once the calls are collected, before `host` and
// `samples` are read: a caller that starts the model before it has them returns from it once
// they are there.
StepModel compute_steps(TraceSource& source, const Window& w, const HostContext& host,
                        size_t max_bytes = kMinModelledBytes,
                        const std::map<uint32_t, uint64_t>& calls_per_pid = {},
                        const CpuSamples* samples = nullptr, unsigned threads = 0,
                        std::mutex* stacks_lock = nullptr,
                        const std::function<void()>& collected = {},
                        const DeviceBusy* device = nullptr);

}  // namespace ingero::engine

// The engine's entry point: statistics, host context, causal chains and the per-process
// breakdown for a window of a trace. Vendor-neutral: it reasons about event kinds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/chain.h"
#include "engine/host_context.h"
#include "engine/kernels.h"
#include "engine/op_stats.h"
#include "engine/steps.h"
#include "engine/trace_source.h"

namespace ingero::engine {

struct ProcessReport {
  uint32_t pid = 0;
  std::string name, role;  // role: "gpu", "worker of <pid>", "preemptor", "host"
  uint32_t parent = 0;     // for workers
  std::vector<const OpStats*> ops;
  uint64_t calls = 0;
  uint64_t off_cpu_ns = 0, max_off_cpu_ns = 0, switches = 0, involuntary = 0;
  uint64_t page_allocs = 0, page_bytes = 0, forks = 0, block_ios = 0;
  uint64_t cgroup_id = 0;  // 0: unknown
  CgroupInfo cgroup;       // its path and names, as the trace recorded them
};

struct Analysis {
  Window window;
  std::pair<int64_t, int64_t> span;  // of the events in the window
  uint64_t events = 0;
  OpStatsSet stats;
  HostContext host;
  StepModel steps;       // per GPU process: step cadence, per-step breakdown, host gaps
  KernelReport kernels;  // per GPU process: which kernels it launches, per step and from where
  DeviceBusy device;     // what the GPUs reported (NVML, amdgpu), indexed
  std::vector<hal::DeviceEvent> device_events;  // Xid, ECC, lost GPUs, in time order
  std::vector<Chain> chains;                    // HIGH first, then by score
  std::vector<ProcessReport> processes;
  std::map<uint32_t, ProcessInfo> names;
  std::optional<TraceLosses> losses;  // the whole trace's, not the window's
  std::set<uint32_t> tracer_pids;     // the tracer's own processes (TraceSource::tracer_pids)
  std::vector<InflightRow> inflight;  // stuck threads the tracer recorded (engine/hangs.h)
  std::string process_name(uint32_t pid) const;
  // As the chains name a process: "trainer (pid 7)", or "pid 7" when no name is known (never
  // "pid 7 (pid 7)").
  std::string process_label(uint32_t pid) const;
};

// Whether `pid` is the tracer itself (the sessions that recorded the trace name it).
bool is_tracer(const Analysis& a, uint32_t pid);
// A preemptor as the chains name it: "hog (pid 7)", or, when it is the tracer, "the tracer
// itself (ingero, pid 812, 2.1ms of CPU taken)".
std::string preemptor_label(const Analysis& a, const Preemptor& p);
// `text` with each of `ps` that is the tracer, worded "hog (pid 7)", named "the tracer itself
// (ingero, pid 812)" (the step model's texts, written before the tracer's pids are known).
std::string name_tracer(const Analysis& a, const std::vector<Preemptor>& ps, std::string text);
// The fix when the tracer is the one taking the CPU: what it took, and how to make it take less.
std::string tracer_fix(const Preemptor& p);

struct EngineOptions {
  bool breakdown = true;
  // The step model's memory cap (engine/steps.h), and, when not 0, the most calls it is given:
  // it then models the window's last whole seconds holding at most that many calls
  // (TraceSource::recent_start), and the other rules the whole window. The tracer's own
  // analyses (the session's end, the live chains behind --prometheus) bound their memory so.
  size_t model_bytes = default_model_bytes();
  uint64_t model_calls = 0;
  // Kernels per process and step (engine/kernels.h): one more pass over the modelled window's
  // launches, where the trace has kernel names.
  bool kernels = true;
};

Analysis analyze(TraceSource& source, const Window& window, const EngineOptions& opts = {});

// Individual rule families, exposed for tests.
void rule_tail_latency(const Analysis& a, std::vector<Chain>& out);
// Launch collapse and repeated synchronisation: what they count of the window's calls (fed every
// call and every folded run whole, in order, by a pass that reads them anyway: the op
// statistics' tail pass), then their chains.
class LaunchCollapseAndRepeatedSync {
 public:
  LaunchCollapseAndRepeatedSync();
  ~LaunchCollapseAndRepeatedSync();
  void call(const hal::Event& e);
  void run(const CallRun& r);
  void chains(const Analysis& a, std::vector<Chain>& out);

 private:
  struct Counts;
  std::unique_ptr<Counts> counts_;
};
// Calls that returned an error, per process, counted in the op statistics' pass, and the
// failed_calls chains (engine/rules_failed_calls.cc). `source` names the return codes.
class FailedCalls {
 public:
  explicit FailedCalls(TraceSource& source);
  ~FailedCalls();
  void call(const hal::Event& e);
  void run(const CallRun& r);
  // Reads the first failures' stacks and, for a device fault, the kernels' names.
  void chains(TraceSource& source, const Analysis& a, std::vector<Chain>& out);
  struct Counts;

 private:
  std::unique_ptr<Counts> counts_;
};
void rule_graph_lifecycle(TraceSource& source, const Analysis& a, std::vector<Chain>& out);
void rule_noisy_neighbour(const Analysis& a, std::vector<Chain>& out);
void rule_process_contention(const Analysis& a, std::vector<Chain>& out);
void rule_oom(const Analysis& a, std::vector<Chain>& out);
void rule_collective_straggler(TraceSource& source, const Analysis& a, std::vector<Chain>& out);
void rule_fabric_errors(TraceSource& source, const Analysis& a, std::vector<Chain>& out);
// Device errors (Xid, ECC, a lost GPU): evidence in the chains of the processes on that device
// (`out` so far), and a chain of their own, HIGH where one lines up with a stall of such a
// process (engine/rules_device.cc).
void rule_device_errors(Analysis& a, std::vector<Chain>& out);
// Fills Chain::stacks: the call stacks of each chain's slowest calls (engine/attribution.cc).
// Chains that already carry stacks keep them, and a chain looked at once is not looked at again:
// the chains known before the step model is done are attributed beside it. Its reads of stacks
// hold `stacks_lock` when given (the step model's threads read stacks under it meanwhile).
void attribute_stacks(TraceSource& source, Analysis& a, std::mutex* stacks_lock = nullptr);
// A stack's frames as a user reads them, innermost first (up to six).
std::vector<std::string> user_frames(const std::vector<StackFrameInfo>& frames);

// Collectives per communicator, op and rank: matched by sequence number across ranks, with
// each rank's lag behind the first arrival and the barrier wait (the stream sync after the
// collective). Used by the straggler rule and the MCP get_collectives tool.
struct CollectiveRank {
  uint64_t rank = 0, nranks = 0;
  uint32_t pid = 0;
  std::vector<int64_t> starts, ends, lags;
  uint64_t bytes = 0, last_count = 0, wait_imposed_ns = 0;
  uint64_t barrier_wait_ns = 0, barrier_syncs = 0;
  size_t matched = 0;
  int64_t median_lag() const {
    if (lags.empty()) return 0;
    std::vector<int64_t> v = lags;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }
};
struct CollectiveReport {
  // comm hash (or handle) -> op -> rank
  std::map<uint64_t, std::map<std::string, std::map<uint64_t, CollectiveRank>>> groups;
  std::string api, vendor;
};
CollectiveReport compute_collectives(TraceSource& source, const Window& window);

// Display name of a vendor layer from the api string: "cuda_runtime" -> "CUDA".
std::string layer_of(std::string_view api);

}  // namespace ingero::engine

// Ring-buffer records -> decoded Events -> the sinks (the trace file, metrics, the shipper).
// The one path every record takes, live (`ingero trace`) and synthetic
// (bench/pipeline_bench), so the benchmark measures what ships.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "capture/host_info.h"
#include "hal/communicator_join.h"
#include "hal/event_sink.h"
#include "probe/record_decoder.h"

namespace ingero::capture {

class InflightMonitor;
class LaunchNesting;
class KernelNamer;
class StackCollector;

class EventPipeline {
 public:
  struct Counters {
    uint64_t call_records = 0;   // call records read (decoded or not)
    uint64_t calls = 0;          // decoded vendor calls
    uint64_t host = 0;           // decoded host-context events
    uint64_t unknown_probe = 0;  // call records whose probe id is not in the table
    uint64_t malformed = 0;      // records too short or of an unknown type
    uint64_t libwatch = 0;       // exec / link-map notifications
    uint64_t stacks = 0;         // stack records
    uint64_t cpu_samples = 0;    // on-CPU samples
    uint64_t nested = 0;         // calls folded into the call they were made in
    uint64_t no_ident = 0;       // calls of a thread whose name was never shipped (read /proc)
    uint64_t untimed = 0;        // calls seen at entry only (launches whose return was not sampled)
    uint64_t name_records = 0;   // kernel name sources' records (not calls; capture/kernel_namer.h)
    // ... by the function that made them (cuKernelGetFunction, __cudaRegisterFunction): which
    // look-ups a library makes before its launches (each answer once a second: backends.md).
    std::map<std::string, uint64_t, std::less<>> name_records_by_op;
    // ... that named something new, by probe (capture/lookup_rest.h: a look-up that only
    // repeats rests).
    std::map<uint32_t, uint64_t> name_news_by_probe;
  };

  // `out` receives every decoded event and process (a SinkSet fans them out and reports
  // sink errors).
  EventPipeline(const hal::CallDecoder& decoder, hal::EventSink& out)
      : decoder_(decoder), out_(out) {}

  // Called for exec and link-map notifications (re-scan that pid for libraries), with the
  // notification's CLOCK_MONOTONIC time.
  std::function<void(int pid, uint64_t mono_ns)> on_libwatch;
  // Whether to read /proc/PID/{comm,cmdline} for each new pid (off in benchmarks).
  bool read_proc = true;
  // The session's clock: when a process was first seen.
  TraceClock clock{mono_to_wall_offset_ns()};
  // Stack records and call-to-stack links (null: stacks are not collected).
  StackCollector* stacks = nullptr;
  // Folds the driver launches made inside runtime launches, both seen at entry (null: every
  // launch record is an event; capture/launch_nesting.h).
  LaunchNesting* nesting = nullptr;
  // Sees every decoded call: numbers collectives and ends reported calls in flight (null: no
  // in-flight reporting; capture/inflight_monitor.h).
  InflightMonitor* inflight = nullptr;
  // Kernel names (null: launches keep their function only). Name sources' records go to it
  // and never to the sinks as calls; each launch's function is named before it is handed on.
  KernelNamer* kernels = nullptr;
  // The first launch read of each probe (probe/launch_windows.h: a file's first timing window
  // closes a window's length after it).
  std::function<void(uint32_t probe_id)> on_first_launch;
  // Consumes the aux ring now: a call naming a stack not seen yet (shipped while the calls ring
  // was being read) catches up once before the stack counts as lost.
  std::function<void()> catch_up_stacks;

  // Called once `batch_records` records (a batch of launches: its launches) were read since
  // the last commit() (0: never): a drain of full rings is then committed in parts, and the
  // tracer's size limit applied between them (`--max-db-size`), not only after it.
  size_t batch_records = 0;
  std::function<void()> on_batch;

  void on_record(const void* data, size_t size);
  // After each read of the rings: forgets the processes that exited a cycle ago, and releases
  // the launches held since the cycle before (capture/launch_nesting.h); `final` (the
  // session's end, every ring read): every launch held.
  void end_cycle(bool final = false);
  void commit();
  const Counters& counters() const { return counters_; }
  // How long call records waited between the call's return and their decoding here, sampled
  // on one record in 64: the window in which a process may exit before user space sees it.
  uint64_t delivery_lag_quantile_ns(double q) const;
  // Stores an event built elsewhere (page-allocation aggregates).
  void add(const hal::Event& ev);
  // Processes that made traced calls (for per-process aggregates).
  const std::unordered_set<uint32_t>& gpu_pids() const { return gpu_pids_; }

 private:
  // What a thread last shipped about itself (calls carry it only when it changes).
  struct Ident {
    std::array<char, 16> comm{};
    uint64_t cgroup_id = 0;
  };
  void on_call(const void* data, size_t size);
  // Hands events the launch nesting released to the sinks.
  void emit_ready();
  void name_kernel(const hal::Event& e);
  // `own`: the process made the call or host event itself, so its stacks may come; a process
  // named only as a peer (who preempted a traced thread, a child) is named, not mapped.
  void note_pid(uint32_t pid, const char* comm, bool own = true);
  // Its name and command line as /proc has them now (`comm` once it has exited), to the sink.
  void name_process(uint32_t pid, const char* comm);
  void identify(hal::Event& ev, bool shipped);
  uint64_t resolve_stack(uint32_t pid, uint64_t hash);
  void forget_process(uint32_t pid);

  const hal::CallDecoder& decoder_;
  hal::EventSink& out_;
  hal::Event ev_;
  hal::CallRecord rec_;
  std::vector<hal::Event> ready_;               // released by the launch nesting, for the sinks
  std::unordered_map<uint32_t, Ident> idents_;  // by tid
  // identify()'s last thread and its entry in idents_ (null: none there, or forgotten since).
  uint32_t last_ident_tid_ = 0;
  Ident* last_ident_ = nullptr;
  std::unordered_map<uint32_t, std::vector<uint32_t>> tids_of_;  // pid -> tids in idents_
  std::vector<uint32_t> exited_now_, exited_prev_;
  hal::CommunicatorJoin communicators_;
  static constexpr size_t kMaxSeenPids = 65536;
  std::unordered_map<uint32_t, bool> seen_pids_;  // pid -> shown to the stack collector
  std::unordered_set<uint32_t> gpu_pids_;
  // The pid last found in each set: a thread's calls come in runs, and both sets only grow, so
  // a record of the same process skips the hash lookup.
  uint32_t last_seen_pid_ = UINT32_MAX, last_gpu_pid_ = UINT32_MAX;
  Counters counters_;
  std::array<uint64_t, 64> lag_log2_{};  // histogram of sampled delivery lags, log2 ns buckets
  uint64_t lag_samples_ = 0;
  size_t since_commit_ = 0;               // records read since the last commit()
  std::vector<bool> launch_probes_seen_;  // by probe id (on_first_launch)
};

}  // namespace ingero::capture

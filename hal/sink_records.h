// What the sinks of the capture seam receive besides events (hal/event_sink.h): the sampled
// host and process figures, the session's loss counters, the agent's own counters and the
// live analysis's steps. They live here, below every sink, so that no sink includes another
// to name them: the store writes them as rows, the metrics registry as series, and both read
// the same structs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ingero::hal {

// What a session lost, by kind (the sessions row; docs/schema.md). Updated while tracing and
// at the end.
struct SessionCounters {
  uint64_t call_drops = 0;          // call records the calls ring could not take
  uint64_t stack_drops = 0;         // stack and code records the aux ring could not take
  uint64_t host_drops = 0;          // host-context records the host ring could not take
  uint64_t sample_drops = 0;        // on-CPU samples the aux ring could not take
  uint64_t lost_calls = 0;          // calls never traced: thread table full, nesting too deep
  uint64_t calls_lost_at_exit = 0;  // recorded by BPF but never read (the tracer stopped first)
  uint64_t unfinished_calls = 0;
  uint64_t store_errors = 0;  // events earlier writers could not write (merge carries them)
  uint64_t calls_lost() const { return call_drops + lost_calls + calls_lost_at_exit; }
};

// What the tracer could not name, summed over the sessions (the sessions row).
struct KernelNaming {
  uint64_t names = 0;              // (pid, function) named
  uint64_t unnamed_launches = 0;   // launches whose function got no name
  uint64_t unnamed_functions = 0;  // distinct (pid, function) among them
  uint64_t unreadable = 0;         // names a source gave whose bytes could not be read
  uint64_t conflicts = 0;          // a (pid, function) named twice differently: the first kept
  // Of unnamed_functions: those first launched while the tracer's kernel look-up probes rested
  // (capture/lookup_rest.h), whose look-up it may have missed. Kept in sessions.bpf_stats
  // (unnamed_functions_at_rest), not a column of its own.
  uint64_t at_rest = 0;
};

// The host once a second, from /proc (kernelside/system_snapshot.h).
struct HostSnapshot {
  int64_t ts_ns = 0;    // wall clock
  double cpu_pct = 0;   // busy share of all CPUs since the previous sample
  double mem_pct = 0;   // (total - available) / total
  double load_avg = 0;  // 1-minute
  int64_t mem_avail_mb = 0, swap_mb = 0, procs_running = 0;
};

// One process's activity over one read-out interval (the kernel's per-process aggregates,
// kernelside/host_decoder.h).
struct ProcessStats {
  uint32_t pid = 0;
  std::string comm;
  uint64_t cgroup_id = 0;
  uint64_t switches = 0, involuntary = 0, off_cpu_ns = 0, max_off_cpu_ns = 0, wakeups = 0;
  uint64_t page_allocs = 0, page_bytes = 0, forks = 0;
  uint64_t block_ios = 0, block_bytes = 0, block_ns = 0;
  bool empty() const { return !switches && !wakeups && !page_allocs && !forks && !block_ios; }
};

// The agent's own counters, as cumulative totals since the trace began (once a second).
struct AgentStats {
  uint64_t events_total = 0;                          // calls and host events decoded
  double events_per_s = 0;                            // since the previous AgentStats
  SessionCounters lost;                               // what was lost so far
  uint64_t store_errors = 0;                          // events the trace file refused
  std::map<std::string, uint64_t> probes_by_backend;  // attached probes
  uint64_t db_bytes = 0;                              // the trace file's size
  // The ClickHouse shipper's figures (trace --clickhouse), where there is one.
  struct Shipping {
    uint64_t rows = 0, failures = 0;  // rows ClickHouse confirmed; failed passes (cumulative)
    bool failing = false;             // the latest pass failed, and none has succeeded since
    uint64_t unshipped = 0;           // event ids written to the file, not yet in ClickHouse
  };
  std::optional<Shipping> shipping;
};

// A steady training step that ended (the tracer's periodic analysis).
struct StepSample {
  double seconds = 0, gpu_idle = 0;  // gpu_idle: the lower bound the syncs prove
  double gpu_busy = -1;              // measured by the device; -1 where not
};

}  // namespace ingero::hal

// User-space half of the host-context tracepoints: ring-buffer records -> hal::Events
// (vendor "host", api "kernel"), and the per-process aggregates the kernel keeps for every
// process (read out periodically; see docs/host-context.md for the volume policy).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "hal/event.h"
#include "hal/result.h"
#include "hal/sink_records.h"
#include "ingero_records.h"

namespace ingero::kernelside {

// Decodes INGERO_REC_SCHED/PROC/BLOCK/TCP. False for other types or short records.
bool decode_host_record(const void* data, size_t size, hal::Event& ev);
// Decodes INGERO_REC_CPU_SAMPLE into a kCpuSample event (its stack hash is the caller's to
// resolve: ingero_cpu_sample_rec::stack_hash).
bool decode_cpu_sample(const void* data, size_t size, hal::Event& ev);

// One process's activity over one read-out interval (hal/sink_records.h).
using ProcessStats = hal::ProcessStats;

// Turns cumulative in-kernel counters into per-interval deltas.
class ProcessStatsReader {
 public:
  explicit ProcessStatsReader(int map_fd) : fd_(map_fd) {}
  // Reads every process's counters; returns what changed since the last call. The maximum
  // off-CPU interval is reported as the maximum seen so far, not a delta.
  ingero::Result<std::vector<ProcessStats>> read_deltas();

 private:
  int fd_;
  std::unordered_map<uint32_t, ingero_pid_stats> last_;
};

// The page-allocation aggregate as an event row (one per process and interval).
hal::Event page_alloc_event(const ProcessStats& s, uint64_t window_start_ns, uint64_t window_ns);

}  // namespace ingero::kernelside

// CUDA/HIP graph lifecycles, vendor-neutral (by event kind): which graphs were captured,
// instantiated and launched, how often, and how launches and (re)instantiations spread over
// time. Serves the MCP graph_lifecycle and graph_frequency tools; the graph rules in
// rules_activity.cc look at the same calls.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/trace_source.h"

namespace ingero::engine {

// One executable graph (instantiated handle) in one process.
struct GraphExecUse {
  uint32_t pid = 0;
  uint64_t exec = 0;   // instantiated handle
  uint64_t graph = 0;  // the graph it was instantiated from (0: not seen)
  std::string vendor, api;
  int64_t captured_at = 0, capture_ns = 0;  // the capture that produced `graph`, if traced
  uint64_t capture_stream = 0;
  int64_t instantiated_at = 0;  // first instantiation into this handle
  uint64_t instantiations = 0, instantiate_ns = 0;
  uint64_t launches = 0, failed_launches = 0;
  int64_t first_launch = 0, last_launch = 0;
  uint64_t launch_p50_ns = 0, launch_p99_ns = 0, launch_max_ns = 0;
  std::vector<uint64_t> streams;  // distinct launch streams (capped at 8)
  double launch_rate_hz() const {
    return launches > 1 && last_launch > first_launch
               ? double(launches - 1) / (double(last_launch - first_launch) / 1e9)
               : 0.0;
  }
};

struct GraphProcessUse {
  uint32_t pid = 0;
  uint64_t captures = 0, failed_captures = 0;
  uint64_t instantiations = 0, failed_instantiations = 0;
  uint64_t launches = 0, failed_launches = 0;
  uint64_t captures_after_first_launch = 0, instantiations_after_first_launch = 0;
  int64_t first_launch = 0;
  uint64_t launches_unknown_exec = 0;  // launches of handles instantiated before the trace
};

// Per-bucket counts over the window (at most kMaxGraphBuckets buckets).
struct GraphBucket {
  int64_t start = 0;
  uint64_t captures = 0, instantiations = 0, launches = 0;
};
inline constexpr size_t kMaxGraphBuckets = 60;

struct GraphReport {
  std::vector<GraphExecUse> execs;  // by pid, then first instantiation / launch
  std::map<uint32_t, GraphProcessUse> processes;
  int64_t bucket_ns = 0;
  std::vector<GraphBucket> timeline;  // whole window, all processes in it
  bool any() const { return !processes.empty(); }
};

GraphReport compute_graphs(TraceSource& source, const Window& window);

}  // namespace ingero::engine

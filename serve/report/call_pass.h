// One streaming pass over the calls of a window as the engine reads them (TraceSource::
// call_runs: folded runs whole), aggregating what the engine does not:
//   - per-op latency histograms in quarter-octave bins (edges 2^e x 1, 1.25, 1.5, 1.75);
//   - per-op call counts per time bucket, and for the busiest ops a histogram per bucket from
//     which p50/p99 are read (approximate: the bin's midpoint, within 12.5% of the true value);
//   - the stacks of the slow calls: timed calls at or above their op's p95 (the engine's
//     tail), by (stack, op), with their count and total time.
// Memory is bounded by ops x buckets x bins and the number of distinct slow stacks, never by
// the number of calls.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/trace_source.h"

namespace ingero::serve::report {

inline constexpr size_t kLatencyBins = 252;
// The bin of a duration in ns, and a bin's lower edge (its upper edge is the next bin's;
// UINT64_MAX past the last bin).
size_t latency_bin(uint64_t ns);
uint64_t bin_lower_edge(size_t bin);

struct PassOp {
  std::string vendor, api, op;
  uint64_t p95 = 0;    // slow-call threshold
  uint64_t count = 0;  // calls the engine saw: slow calls need at least two, as in its tail
  bool rated = false;  // keep a per-bucket histogram for p50/p99 over time
};

struct CallPassInput {
  std::vector<engine::Window> windows;  // one per node of a merged file
  int64_t first_ns = 0, last_ns = 0;    // the calls' span: time buckets cover it
  size_t max_buckets = 600;
  std::vector<PassOp> ops;
};

struct OpAccum {
  std::vector<uint64_t> hist = std::vector<uint64_t>(kLatencyBins);
  std::vector<uint64_t> buckets;      // calls per time bucket
  std::vector<uint32_t> bucket_hist;  // rated ops: buckets x kLatencyBins
  uint64_t calls = 0;
};

struct SlowAgg {
  uint64_t calls = 0, sum_ns = 0;
};

struct CallPassResult {
  int64_t t0 = 0, bucket_ns = 1'000'000'000;
  size_t buckets = 0;
  std::vector<OpAccum> ops;  // parallel to CallPassInput::ops; calls of other ops are ignored
  uint64_t other_calls = 0;  // calls of ops the input did not name (a file growing meanwhile)
  std::map<std::pair<uint64_t, size_t>, SlowAgg> slow;  // (stack id or 0, op index)
  uint64_t slow_calls = 0;
};

// The bucket width: the smallest of 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1 h, ...
// that covers `span_ns` in at most `max_buckets` buckets.
int64_t bucket_width_ns(int64_t span_ns, size_t max_buckets);

// Read errors go to the source's error().
CallPassResult run_call_pass(engine::TraceSource& source, const CallPassInput& in);

// The q-quantile (nearest rank) of a histogram, as the midpoint of the bin holding it; -1
// when the histogram is empty.
double hist_quantile(const uint32_t* bins, size_t n_bins, double q);

}  // namespace ingero::serve::report

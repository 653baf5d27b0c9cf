// `ingero check --bench`: about two seconds measuring what tracing a call costs on this
// host, and what that predicts for a workload's call rate.
//
// Four copies of a private function (probe/probe_cost.h), probed at once and timed in turns
// (chunks of 1000 calls, round-robin for the whole measurement), each figure the median
// ns/call over its chunks: load on a shared machine falls on all four alike, and a burst
// moves one chunk, not the figure:
//   untraced        the function alone
//   minimal pair    + the cheapest uprobe pair (count entries and returns): the kernel's
//                   breakpoint, single-step and return-trampoline cost, the floor
//   ingero          + ingero's own entry/return programs as `trace --no-stack` runs them,
//                   with a cudaMalloc-like recipe (registers, an output-pointer read) and a
//                   ring-buffer record per call
//   ingero stacks   the same with user-stack capture on (the `trace` default)
// The ring buffer is drained between chunks, outside the timed loops: the figures are the
// cost paid by the traced thread. The agent's own CPU for decoding and storing records is
// separate (docs/deploy.md, sizing).
//
// Every probe's hits are counted and must equal the calls made; a mismatch is reported as
// a failure, not a figure.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "hal/result.h"

namespace ingero::app {

struct ProbeCostReport {
  double untraced_ns = 0, min_pair_ns = 0, ingero_ns = 0, ingero_stacks_ns = 0;
  uint64_t untraced_calls = 0;
  uint64_t min_calls = 0, min_entries = 0, min_returns = 0;
  uint64_t ingero_calls = 0, ingero_records = 0;
  uint64_t stacks_calls = 0, stacks_records = 0;
  bool uprobe_multi = false;    // how ingero's probes attached
  bool min_pair_multi = false;  // how the minimal pair attached (the same, unless refused)
  double seconds = 0;           // wall time of the whole measurement
  // Added per call over the untraced function, in ns.
  double min_added() const { return min_pair_ns - untraced_ns; }
  double ingero_added() const { return ingero_ns - untraced_ns; }
  double stacks_added() const { return ingero_stacks_ns - untraced_ns; }
  // Every probe fired exactly once per call.
  bool exact() const;
};

// Needs CAP_BPF + CAP_PERFMON (or root). `seconds` is split between the four timings.
Result<ProbeCostReport> measure_probe_cost(double seconds);

// The figures, then the predicted cost at 10k, 50k and 200k calls/s: CPU share of one core
// (added ns × rate).
void print_probe_cost(std::ostream& out, const ProbeCostReport& r);
nlohmann::json probe_cost_json(const ProbeCostReport& r);

}  // namespace ingero::app

// A causal chain: a symptom on a GPU call path, the host evidence layered under it, the root
// cause, and what to do about it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ingero::engine {

enum class Severity { kLow = 0, kMedium = 1, kHigh = 2 };
const char* severity_name(Severity s);  // "LOW", "MEDIUM", "HIGH"

struct TimelineEntry {
  std::string layer;    // "SYSTEM", "HOST", "IO", "NET", or the vendor layer ("CUDA", "HIP", ...)
  std::string op;       // what the line is about: "cpu", "sched_switch", "cudaStreamSynchronize"
  std::string detail;   // human-readable evidence
  uint64_t dur_us = 0;  // the duration the line is about, when there is one
};

// What a ChainStack's figures count. Each rule that locates its evidence counts its own set;
// the header a reader sees (stack_counts_text) names that set.
enum class StackCounts {
  kSlowestCalls,  // `calls` of the `examined` slowest calls had this stack; worst: the slowest
  kSiteCalls,     // `calls` of `examined` calls came from this site; worst: the slowest
  kGaps,          // `calls` host gaps in `examined` steady steps; worst: the longest gap
  kPreempted,     // worst_ns: time preempted just before this call, over `examined` steady steps
  kNone,          // located without counting (on-CPU samples)
  kFirstFailure,  // the first call that failed (failed_calls); worst: its duration
};
const char* stack_counts_name(StackCounts c);  // "slowest_calls", "site_calls", "gaps", ...

// Where a chain's slowest calls came from: one of their call stacks, as the user reads it.
struct ChainStack {
  uint64_t stack_id = 0;
  StackCounts counts = StackCounts::kSlowestCalls;
  uint64_t calls = 0;     // of the slowest calls examined, how many had this stack
  uint64_t examined = 0;  // slowest calls examined (those with a stack)
  uint64_t worst_ns = 0;  // the slowest of them
  uint32_t pid = 0, tid = 0;
  std::vector<std::string> frames;  // top user frames, innermost first: "[Python] f.py:12 in g()"
};

struct Chain {
  std::string id;    // stable within a trace: "{rule}:{pid}:{op}"
  std::string rule;  // "cpu_contention", "io_pressure", "launch_collapse", ...
  Severity severity = Severity::kLow;
  std::string vendor, api, op;
  std::vector<uint32_t> pids;
  std::string node;         // fleet chains: the node the finding is about ("" otherwise)
  std::string summary;      // one line
  std::string root_cause;   // one sentence
  std::string explanation;  // a paragraph with the numbers
  std::vector<std::string> fixes;
  std::vector<TimelineEntry> timeline;
  uint64_t p50_ns = 0, p99_ns = 0;
  double tail_ratio = 0;
  int64_t window_start = 0, window_end = 0;
  double score = 0;                // ordering within a severity: larger first
  bool warmup = false;             // its evidence is in the warm-up phase (apply_step_phases)
  std::vector<ChainStack> stacks;  // up to two, the most common among the slowest calls first
  bool stacks_sought = false;      // attribute_stacks has looked (the engine's own; not reported)
};

// The rule of a tail that the host does not explain (no CPU, I/O or memory cause in the trace):
// always LOW; the text report folds such chains into one line (explain --all-chains shows them).
inline constexpr char kTailNoHostCause[] = "tail_latency";
inline bool no_host_cause(const Chain& c) { return c.rule == kTailNoHostCause; }

// What every rule fills first: the rule, the vendor layer and op it is about, the processes,
// and the time window of its evidence.
inline Chain new_chain(std::string rule, std::string vendor, std::string api, std::string op,
                       std::vector<uint32_t> pids, int64_t from, int64_t to) {
  Chain c;
  c.rule = std::move(rule);
  c.vendor = std::move(vendor);
  c.api = std::move(api);
  c.op = std::move(op);
  c.pids = std::move(pids);
  c.window_start = from;
  c.window_end = to;
  return c;
}

// What a stack's figures count, as a reader reads it: "18 of the 20 slowest calls, worst 2.6ms",
// "126 gaps in 18 steady steps, longest 11.8ms", "" (nothing counted).
std::string stack_counts_text(const ChainStack& s);

// Duration as people read it: "410us", "5.1ms", "3.2s".
std::string format_duration(uint64_t ns);
std::string format_bytes(uint64_t bytes);
std::string format_count(uint64_t n);  // "3,676"
std::string pct(double share);         // "62%"
// A lower bound's share, rounded down: "≥ 99%" of 0.998, never the "≥ 100%" of rounding.
std::string pct_at_least(double share);
std::string format_wall(int64_t ns);  // "2026-03-20 13:52:53 UTC"
// A word of a command a fix gives, as a shell reads it back: as it is when it holds only
// letters, digits and _.,:/@%+=-, else in single quotes ("node 2's" -> 'node 2'\''s').
std::string shell_word(std::string_view s);

}  // namespace ingero::engine

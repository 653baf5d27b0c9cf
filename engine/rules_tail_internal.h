// The tail rule's two halves (engine/rules_tail.cc): detection decides, from the op's
// statistics and the host, whether its latency needs explaining and what the host shows; the
// prose (engine/rules_tail_prose.cc) words that finding as the chain a user reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/analysis.h"

namespace ingero::engine::tail_detail {

struct Evidence {
  // CPU
  bool per_call = false;
  double off_share = 0;     // off-CPU share of the tail's time
  uint64_t preempts = 0;    // involuntary switches during slow calls
  uint64_t sched_hits = 0;  // scheduler off-CPU intervals overlapping slow calls
  uint64_t sched_off_ns = 0;
  std::vector<Preemptor> preemptors;
  int cpu = 0;  // 0 none, 1 contributes, 2 explains
  // IO
  uint64_t io_hits = 0;
  bool io_heavy = false;
  bool io_saturated = false;  // other processes' I/O saturating the device
  bool io_writes = false;     // the process's own requests include writes
  // memory
  bool mem = false;
  // process-level scheduling pressure (no per-call data)
  bool process_level = false;
  uint64_t proc_switches = 0, proc_off_ns = 0;
};

// What detection decided about one op's latency, before any prose: the kind of finding, the
// host evidence, the causes it names, the rule and the severity.
struct TailFinding {
  const OpStats* s = nullptr;
  bool tail = false;     // the p99 stands far above the p50 (else: every call slowed)
  double ratio = 0;      // p99 / p50
  double all_share = 0;  // off-CPU share of all the op's time (per-call data)
  // Share of all the op's time its preempted calls took beyond the length of its other calls,
  // at most their off-CPU time: a blocking sync sleeps off-CPU in every call, preempted or not,
  // and only what preemption added is contention (OpStats::contended_ns).
  double contended_share = 0;
  Evidence ev;
  std::vector<std::string> causes;  // "CPU contention", "block I/O", "memory pressure"
  std::string rule;
  Severity severity = Severity::kLow;
};

// The chain of a finding: its summary, root cause, explanation, timeline and fixes.
Chain tail_chain(const Analysis& a, const TailFinding& f);

}  // namespace ingero::engine::tail_detail

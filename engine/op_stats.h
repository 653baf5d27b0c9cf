// Latency statistics per (process, op) and per op across processes, with exact nearest-rank
// p50/p95/p99 (engine/exact_quantiles.h), and what happened to the slowest 5% of calls.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/chain.h"
#include "engine/trace_source.h"

namespace ingero::engine {

struct OpKey {
  uint32_t pid = 0;  // 0: all processes
  std::string vendor, api, op;
  hal::EventKind kind = hal::EventKind::kUnknown;
  auto operator<=>(const OpKey&) const = default;
};

// A task that took the CPU from a traced thread during a slow call.
struct Preemptor {
  uint32_t pid = 0;
  std::string comm;
  uint64_t cgroup_id = 0;
  uint64_t count = 0;   // slow calls it preempted (per-call data) or off-CPU intervals
  uint64_t off_ns = 0;  // off-CPU time attributed to it
};

struct TailWindow {
  int64_t start = 0, end = 0;
  uint32_t tid = 0;
};

struct OpStats {
  OpKey key;
  uint64_t count = 0, errors = 0, unfinished = 0;
  uint64_t oom_errors = 0;  // failures the backend classified as out of memory
  uint64_t sum_ns = 0, min_ns = 0, max_ns = 0;
  uint64_t p50 = 0, p95 = 0, p99 = 0;
  uint64_t bytes = 0;
  uint64_t off_cpu_ns = 0, preempts = 0;
  // Of its calls with at least one preemption (per-call data): how many, their time, and their
  // off-CPU time (which holds the sleep of a blocking call as well as the wait for a CPU).
  uint64_t preempted_calls = 0, preempted_sum_ns = 0, preempted_off_cpu_ns = 0;
  bool per_call_off_cpu = false;  // the trace carries per-call off-CPU time
  int64_t first_ts = 0, last_ts = 0;
  uint64_t cgroup_id = 0;  // of the group's first call (a process's cgroup: engine/tenants.h)
  std::set<uint32_t> pids, tids;
  // The tail: calls with duration >= p95.
  uint64_t tail_count = 0, tail_dur_ns = 0, tail_off_cpu_ns = 0, tail_preempts = 0;
  std::vector<Preemptor> preemptors;  // of the tail's calls, by off_ns, descending
  // Of every call (per-call data): who took the CPU when the whole distribution is slowed,
  // not only its tail. By off_ns, descending.
  std::vector<Preemptor> all_preemptors;
  std::vector<TailWindow> tail_windows;  // capped, time order
  uint64_t tail_windows_dropped = 0;

  double avg_ns() const { return count ? double(sum_ns) / double(count) : 0; }
  // Whether any of its calls has a duration. Launches are timed one in --launch-timing per thread,
  // across ops: a thread's 7 driver launches after its 40 runtime ones may all be untimed. Their
  // durations are then unknown, not 0: said as such ("-", null).
  bool timed() const { return max_ns > 0 || count == 0; }
  double tail_ratio() const { return p50 ? double(p99) / double(p50) : (p99 ? 1e9 : 0); }
  // Share of the tail's time spent off-CPU (per-call data only).
  // What preemption cost its calls (per-call data): the time its preempted calls took beyond
  // its other calls' mean length, at most their off-CPU time, where most calls were not
  // preempted (their mean is the call's length); where most were, their off-CPU time (a sync
  // spinning on a core a hog shares: a few unpreempted calls are no measure of the rest).
  uint64_t contended_ns() const {
    if (!preempted_calls) return 0;
    if (2 * preempted_calls >= count || sum_ns < preempted_sum_ns) return preempted_off_cpu_ns;
    double others = double(sum_ns - preempted_sum_ns) / double(count - preempted_calls);
    double excess = double(preempted_sum_ns) - others * double(preempted_calls);
    return excess <= 0 ? 0 : std::min(preempted_off_cpu_ns, uint64_t(excess));
  }
  double tail_off_cpu_share() const {
    return tail_dur_ns ? double(tail_off_cpu_ns) / double(tail_dur_ns) : 0;
  }
};

// A call the first pass kept as one that may be in its op's tail.
struct KeptCall {
  int64_t ts = 0;
  uint64_t dur = 0, stack = 0;
  uint32_t pid = 0, tid = 0;
  std::string_view op;
};
// The calls the first pass kept (docs/engine.md, "The op statistics in one read"): every call
// of the window at or above its group's floor, in the order read, and for each op the longest
// of the others. Stack attribution finds a chain's slowest calls among them where none passed
// over could be one.
struct KeptCalls {
  std::function<void(const std::function<void(const KeptCall&)>&)> for_each;
  // 1 + the longest call of `op` in process `pid` (0: any) that was not kept; 0: none.
  std::function<uint64_t(std::string_view op, uint32_t pid)> missed;
};

struct OpStatsSet {
  std::vector<OpStats> per_process;       // pid != 0
  std::vector<OpStats> overall;           // pid == 0, one per (vendor, api, op)
  std::shared_ptr<const KeptCalls> kept;  // null where the first pass kept none
  // p50/p95/p99 come from the per-second sketches (within 1%): the window holds calls folded by
  // tiered retention. Else they are exact.
  bool sketch_quantiles = false;
  // Whether a rule that looks only at calls of `kinds` can find nothing in the window: the
  // statistics were computed (they hold every call of it) and hold no call of those kinds.
  // A rule's pass over the calls is then skipped (its answer would be empty).
  bool lacks(std::initializer_list<hal::EventKind> kinds) const {
    if (overall.empty()) return false;  // not computed, or no call at all
    for (const OpStats& s : overall)
      for (hal::EventKind k : kinds)
        if (s.key.kind == k && s.count) return false;
    return true;
  }
};

// One pass over the calls in `w` where its limits allow (else up to four); memory bounded by
// the limits and the number of groups. After the first pass, `counted` (when given) sees every
// group with its counts, totals, extremes, first and last calls final (pid 0: all processes),
// and its quantiles not yet computed: the quantiles and the tail follow.
// `rider`, when given, takes every call and every folded run (whole) of the first pass's read:
// a rule that counts calls rides along instead of reading them again.
struct CallRider {
  EventFn call;
  CallRunFn run;
};
// What the first pass may hold so that it is the only pass over the calls (docs/engine.md):
// every duration of the whole calls, 2 or 4 bytes each, for the exact quantiles' further
// passes; the calls that may be in their op's tail, 32 bytes each. Past either limit it holds
// none of that kind, and the passes it stands for read the calls again.
struct FirstPassLimits {
  size_t durations = 0, tail_calls = 0;
  // A share of the machine's memory (hal::memory_share, between 64 MiB and 1 GiB), half for
  // each: 128 Mi durations and 13 Mi calls on a machine of 8 GiB or more.
  static FirstPassLimits for_this_machine();
};
OpStatsSet compute_op_stats(
    TraceSource& source, const Window& w,
    const std::function<void(const std::vector<OpStats>&)>& counted = nullptr,
    const CallRider* rider = nullptr,
    const FirstPassLimits& limits = FirstPassLimits::for_this_machine());

inline constexpr size_t kMaxTailWindowsPerOp = 20000;

// A chain about one op of one process: its layer, the process, its latency figures and the
// span of its calls.
Chain chain_for_op(std::string rule, const OpStats& s);

}  // namespace ingero::engine

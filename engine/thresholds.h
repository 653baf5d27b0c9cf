// Every threshold the rules use, with why. docs/engine.md lists them too.
#pragma once

#include <cstdint>

namespace ingero::engine {

// --- tail latency ---------------------------------------------------------------------
// Fewer calls cannot support a p99 (with 10 calls, p99 is the maximum).
inline constexpr uint64_t kMinCallsForTail = 10;
// p99 at 3x p50 is a tail users notice in step time; 10x is stalls, not jitter.
inline constexpr double kTailRatioMedium = 3.0;
inline constexpr double kTailRatioHigh = 10.0;
// Below 50 us between p50 and p99, a "tail" is noise at GPU timescales (a kernel launch
// costs 5-20 us) and not worth a chain, whatever the ratio.
inline constexpr uint64_t kMinTailExcessNs = 50'000;
// A tail is a pattern: at least 2 of the slowest 5% that far over p50 (so at least 20 calls:
// under 20, the slowest 5% is the slowest call alone). Under 100 calls p99 is the slowest call,
// and one slow call (the first call's lazy initialisation, a page fault) is an outlier.
inline constexpr uint64_t kMinTailCalls = 2;
// And a tail costs time: the slow calls' time past p50, summed, at least 1 ms. Two calls 55 us
// slow in 120 (a VM's host stealing the core, an interrupt) cost a 2 ms step loop 0.05% of its
// time, and were a chain that outranked the loop's planted allocator churn.
inline constexpr uint64_t kMinTailLostNs = 1'000'000;
// From 200 calls, at least two stand at or over p99: one preempted call cannot have made it,
// and is not CPU contention (it still is where p99 is the slowest call).
inline constexpr uint64_t kCallsForManyAtP99 = 200;
// A fifth of the slow calls' time off-CPU means contention contributes; half means it is
// the tail.
inline constexpr double kOffCpuShareMedium = 0.20;
inline constexpr double kOffCpuShareHigh = 0.50;
// Contention that slows every call rather than the tail: with per-call accounting, a fifth of
// all the op's time off-CPU (and at least 100 ms of it) is a chain even when p99/p50 is small.
inline constexpr uint64_t kMinOffCpuNs = 100'000'000;
// CPU saturated: the scheduler has nowhere else to run the preempted thread.
inline constexpr double kCpuSaturatedPct = 90.0;
// A busy host: average CPU above 70% over the window.
inline constexpr double kCpuBusyAvgPct = 70.0;
// Process-level scheduling pressure (used when a trace has no per-call off-CPU time): the
// GPU process is switched out >= 10 times a second on a busy host.
inline constexpr double kMinSwitchRate = 10.0;
// Process contention chain: off-CPU for >= 1% of the process's active time (5% for HIGH,
// with the host saturated on average).
inline constexpr double kProcessOffCpuShareMedium = 0.01;
inline constexpr double kProcessOffCpuShareHigh = 0.05;
// Heavy block I/O: enough requests, or one slow enough (10 ms is a seek-bound disk or a
// saturated queue) to hold up a thread that waits on it.
inline constexpr uint64_t kHeavyIoOps = 100;
inline constexpr uint64_t kSlowIoNs = 10'000'000;
// Block I/O of other processes counts only when it saturates the device during the slow calls:
// requests in flight for >= 90% of their time (and some request >= kSlowIoNs).
inline constexpr double kIoSaturatedShare = 0.90;
// Memory pressure: memory 90% used, swap use growing, or an OOM kill, within kMemNearNs of the
// slow calls (system snapshots come once a second). Never a count of page allocations: every
// process allocates pages.
inline constexpr double kMemPressurePct = 90.0;
inline constexpr int64_t kMemNearNs = 1'000'000'000;

// --- launch throughput collapse -------------------------------------------------------
// Only steady launchers: below 50 launches/s there is no throughput to collapse.
inline constexpr double kMinBaselineLaunchRate = 50.0;
// A second at <= 20% of the median rate, while the process kept launching afterwards.
inline constexpr double kCollapseFraction = 0.20;
// At least two consecutive collapsed seconds: one slow second is a hiccup.
inline constexpr int kMinCollapseSeconds = 2;

// --- repeated synchronisation (hidden .cpu()) -------------------------------------------
// A thread blocking in syncs/D2H copies for >= 10% of its active time, at >= 20 per second,
// with at least one sync per 2 launches: the host round-trips every few kernels.
inline constexpr double kSyncBlockedShareLow = 0.10;
inline constexpr double kSyncBlockedShareMedium = 0.25;
inline constexpr double kSyncBlockedShareHigh = 0.50;
inline constexpr double kMinSyncRate = 20.0;
inline constexpr double kMinSyncPerLaunch = 0.5;
inline constexpr uint64_t kMinSyncCalls = 50;
// "small" device-to-host copies: the size of a mask, a loss scalar, a few indices.
inline constexpr uint64_t kSmallCopyBytes = 1 << 20;

// --- graphs -----------------------------------------------------------------------------
// Captures/instantiations after the first graph launch: a few are warm-up for new shapes;
// 5 is a re-capture pattern, 20 a storm.
inline constexpr uint64_t kRecaptureMedium = 5;
inline constexpr uint64_t kRecaptureHigh = 20;
// Graph launch rate after an instantiate at <= 10% of the rate before it.
inline constexpr double kGraphRateDropFraction = 0.10;
inline constexpr double kMinGraphLaunchRate = 10.0;

// --- collectives ---------------------------------------------------------------------
// Enough matched collectives to call a pattern; a rank last in at least 40% of them (with
// 8 ranks chance is 12.5%) and a median lag of 10 ms (100 ms: HIGH) is a straggler.
inline constexpr size_t kMinCollectives = 5;
inline constexpr double kStragglerLastShare = 0.40;
inline constexpr int64_t kStragglerMinLagNs = 10'000'000;
inline constexpr int64_t kStragglerHighLagNs = 100'000'000;

// --- noisy neighbour --------------------------------------------------------------------
// A foreign cgroup taking >= 30% (60%) of the GPU threads' involuntary off-CPU time, and at
// least 100 ms (1 s) of it.
inline constexpr double kNeighbourShareMedium = 0.30;
inline constexpr double kNeighbourShareHigh = 0.60;
inline constexpr uint64_t kNeighbourMinNs = 100'000'000;
inline constexpr uint64_t kNeighbourHighNs = 1'000'000'000;

// --- failed calls (rules_failed_calls.cc) -----------------------------------------------
// Half of a process's calls failing is the process not working; a sticky device fault or no
// usable GPU is HIGH at any count (every later call fails, or none could succeed).
inline constexpr double kFailedCallsHighShare = 0.5;
// A share of fewer failures says nothing (one call of one that failed at exit is not half the
// process failing): they are LOW, but for no usable GPU or a device fault.
inline constexpr uint64_t kFailedCallsMinForShare = 10;
// One call in twenty failing, or a hundred failures, is a pattern, not a one-off.
inline constexpr double kFailedCallsMediumShare = 0.05;
inline constexpr uint64_t kFailedCallsMediumCount = 100;
// What a chain names: the launches in flight when a fault surfaced, the ops of each code, the
// codes.
inline constexpr uint64_t kFailedCallsLaunchesKept = 8;
inline constexpr size_t kFailedCallsOpsKept = 4;
inline constexpr size_t kFailedCallsCodesNamed = 4;
// A process's distinct codes kept, and the codes whose name and class are kept for the pass: a
// library returning garbage must not make the pass quadratic or its memory grow per call.
inline constexpr size_t kFailedCallsCodesKept = 64;
inline constexpr size_t kFailedCallsCodesCached = 4096;
// Streams whose queued work a process keeps apart; the others' share one queue.
inline constexpr size_t kFailedCallsStreamsKept = 64;

}  // namespace ingero::engine

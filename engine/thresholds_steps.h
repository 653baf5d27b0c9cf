// Thresholds of the step model and of the step rules, with why. docs/engine.md lists them too.
#pragma once

#include <cstdint>

namespace ingero::engine {

// --- cadence ------------------------------------------------------------------------------
// Fewer than 5 intervals between round trips cannot show a period.
inline constexpr size_t kMinCadenceIntervals = 5;
// An interval is "regular" within [median/2, 2 x median]: a step slowed 2x by a stall is
// still the same step; a sync inside a per-row loop is not (its intervals are row-sized).
inline constexpr double kRegularLo = 0.5;
inline constexpr double kRegularHi = 2.0;
// A site is periodic when >= 70% of its intervals are regular AND they hold >= 50% of its
// span: a per-row sync has 98% regular intervals by count, but they are a small part of the
// time (the rest of each step is one long irregular interval), so it is not the step.
inline constexpr double kRegularCountShare = 0.70;
inline constexpr double kRegularTimeShare = 0.50;
// A round-trip site whose intervals are no cadence may repeat in a cycle of up to 8 of them: a
// loop whose every 4th batch waits 20 ms for data (5, 5, 5, 20 ms: regular by count, not by
// time), gradient accumulation's 10 and 30 ms in turn. Every k-th of its round trips, at the
// phase whose intervals are most regular, is then a cadence: one step is a cycle of k, and
// "of each step" holds of every cycle (its stall is in each). A cycle's lengths must be tight,
// within 15% of their median: sums of k intervals vary less than the intervals, and at
// [median/2, 2 x median] syncs at random (1 to 128 ms apart) passed as a cycle of 8. A stall
// at random is no cycle, nor is a trace's one long pause (an eval).
// And nearly every cycle must: 90% of them. Sums of 3 of 5, 5, 5, 20 ms are 30 ms three times in
// four (15 the fourth), a cycle of 3 at 75%; of 4, 35 ms every time.
inline constexpr size_t kMaxCycle = 8;
inline constexpr double kCycleTolerance = 0.15;
inline constexpr double kCycleCountShare = 0.90;
// The training loop is the periodic site that runs longest: a burst of syncs during warm-up
// (autotuning, weight upload) is periodic too, but short. Sites spanning at least half as
// long are the same loop (a slow first iteration lengthens one site's span and not another's);
// among them the finest is the step (a sync every 10 steps for logging is periodic too), and
// sites within 10% of the same count are the same cadence at another phase: the one that
// reads data back (a D2H copy) marks the end of a step.
inline constexpr double kSameLoopSpan = 0.50;
// A finer periodic site is an inner loop of a coarser one (a sync per row inside each step)
// when it repeats within >= 80% of the coarser periods with one interval > 2x its median:
// the rest of the step.
inline constexpr double kEveryPeriodShare = 0.80;
inline constexpr double kSameCadenceCount = 0.10;
// Bursts: GPU calls separated by a host gap of at least 1 ms and 20x the median gap
// between calls.
inline constexpr int64_t kBurstGapMinNs = 1'000'000;
inline constexpr double kBurstGapFactor = 20.0;
// Nothing periodic: 1 s windows, the granularity of the other per-second views.
inline constexpr int64_t kFallbackWindowNs = 1'000'000'000;
// More whole windows than this in which no call starts are one step with the window before
// them: an idle hour is one step, not 3,600 empty ones, and a clock that jumped years (one call
// at 1970 in a file of 2025) not 1.7 billion (14 GB before a step was made).
inline constexpr int64_t kMaxEmptyWindows = 60;
// Warm-up: the first iteration (before the first round trip) and the leading steps slower
// than 2x the median step (autotuning, lazy init, allocator growth), both counted without the
// time another task held the CPU: a noisy neighbour slowing the first steps is not warm-up.
inline constexpr double kWarmupStepFactor = 2.0;
// Memory bounds: what the step model holds per analysis (a call is a 56-byte item, a folded run
// 88 bytes, a call grouped with the one before it on its thread 8 bytes; later calls are
// counted in StepSeries::calls_dropped and the report says where the model stops), and gaps
// stored per process: at most 200,000, and at most a quarter of the model's bytes (a gap is
// ~230 bytes; the tracer's own analyses, with 16 MB, keep ~17,000). By default the model may
// take hal::memory_share between the two bounds: an hour of training at 50,000 calls/s, folded,
// needs ~1.6 GB, and a model that stops before a fault does not find it.
inline constexpr size_t kMinModelledBytes = 560'000'000;
inline constexpr size_t kMaxModelledBytes = size_t(4) << 30;
inline constexpr size_t kMaxStoredGaps = 200'000;

// --- step rules -----------------------------------------------------------------------------
// Rules need a cadence and at least 5 steady steps: fewer is warm-up or a toy run.
inline constexpr size_t kMinSteadySteps = 5;
// Host gaps (GPU idle waiting for the host) as a share of steady step time: 10% is worth a
// look (LOW), a quarter is a bottleneck (MEDIUM), half the step is the bottleneck (HIGH).
inline constexpr double kGapShareLow = 0.10;
inline constexpr double kGapShareMedium = 0.25;
inline constexpr double kGapShareHigh = 0.50;
// CPU contention in the steps: a host-bound step (the host waits for the GPU < 10% of it) loses
// every millisecond its GPU-feeding threads are preempted; otherwise only preemption with the
// GPU idle counts. 5% of the step is worth a look, 10% a bottleneck, 25% the bottleneck.
inline constexpr double kHostBoundMaxWait = 0.10;
inline constexpr double kPreemptedShareLow = 0.05;
inline constexpr double kPreemptedShareMedium = 0.10;
inline constexpr double kPreemptedShareHigh = 0.25;
// Hidden sync: one site doing >= 8 round trips per step (median) in >= 80% of steady steps:
// a loss read or a metric is 1-2 per step; 8 is a loop over rows or elements.
inline constexpr uint64_t kHiddenSyncPerStep = 8;
inline constexpr double kEveryStepShare = 0.80;
// Its cost: the round trips plus the host gaps after them, as a share of step time.
inline constexpr double kHiddenSyncMedium = 0.10;
inline constexpr double kHiddenSyncHigh = 0.30;
// Allocator churn: allocations and frees in >= 80% of steady steps (a caching allocator never
// does this, so the pattern alone is LOW); their host time as a share of step time: 5% MEDIUM,
// 20% HIGH.
inline constexpr double kChurnShareMedium = 0.05;
inline constexpr double kChurnShareHigh = 0.20;
// Blocking I/O: gap time in uninterruptible sleep (disk I/O, fsync) as a share of steady step
// time; the same bands as host gaps.
inline constexpr double kIoShareLow = 0.05;
inline constexpr double kIoShareMedium = 0.10;
inline constexpr double kIoShareHigh = 0.30;
// Launch-bound: >= 100 launches per step, the host waiting for the GPU < 10% of the step (the
// GPU is done before the host asks), and <= 100 us of host time per launch: the host's
// launch and dispatch rate sets the step time. Without device data this is LOW, MEDIUM
// when the host is inside enqueue calls for >= 50% of the step; never HIGH: the GPU's idle
// share is only bounded from below. With the GPU's busy share measured (NVML, amdgpu), the
// measured idle sets it (below), and a GPU measured idle < 10% keeps up: no chain.
inline constexpr uint32_t kLaunchBoundLaunches = 100;
inline constexpr double kLaunchBoundMaxWait = 0.10;
inline constexpr uint64_t kLaunchBoundHostPerLaunchNs = 100'000;
inline constexpr double kLaunchBoundEnqueueMedium = 0.50;
inline constexpr double kLaunchBoundMinMeasuredIdle = 0.10;
// A launch-bound or host-bound step whose GPU is measured idle (device samples) >= 25% of the
// step is MEDIUM, >= 50% HIGH: the bands of host gaps, on the device's own figure.
inline constexpr double kMeasuredIdleMedium = 0.25;
inline constexpr double kMeasuredIdleHigh = 0.50;

}  // namespace ingero::engine

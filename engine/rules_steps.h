// Rules over the step model (engine/steps.h): the faults that slow training by leaving the
// GPU idle between calls, not by slowing a call.
#pragma once

#include <vector>

#include "engine/analysis.h"

namespace ingero::engine {

// Host gaps: data-loader starvation / host-bound code (on-CPU), blocking I/O on the training
// thread (uninterruptible sleep), CPU contention (preempted), waiting (sleeping); hidden sync
// (many round trips per step from one site); allocator churn (allocations and frees every
// step); launch-bound steps. Only processes with a cadence and enough steady steps.
void rule_step_faults(TraceSource& source, const Analysis& a, std::vector<Chain>& out);

// Warm-up (imports, model load, first iterations, autotuning) is its own phase: a chain whose
// evidence lies in a process's warm-up is never HIGH, and says so. Also drops the per-caller
// repeated_sync chain of a process that has a hidden_sync chain (the same finding, per step),
// and folds a straggler rank's step chains into its collective_straggler chain (they say why
// it is late).
void apply_step_phases(Analysis& a);

}  // namespace ingero::engine

// Tiered retention: an hour of training in a file people can keep.
//
// Every call keeps its row (the `full` form of its block, store/call_store.h) while it is
// recent. Launches that tell nothing on their own (returned success or were not timed, never
// left the CPU, faster than kKeepAboveP95Share x their op's p95 in that process when timed)
// are folded: consecutive ones of a thread, on one stream, with at most kMaxRunGapNs between
// them and no other GPU call of the process in between, become one run (first start, last
// end, count, sum, min, max, the first call's stack). A block is folded when it fills
// (store/call_block.h); its calls lose their rows once they are older than the full-row window
// (--full-rows), and only the calls kept and the runs remain. Everything else keeps its row for
// the whole trace: syncs, copies, allocations, collectives, graph calls, failed, slow and
// off-CPU calls, host events. The per-second summaries (store/call_summaries.h) cover every
// call, folded or not.
//
// The engine reads the folded form whatever the age, a run back as its calls, spread evenly
// over the run with its count, sum, minimum and maximum (engine/call_run.h), and takes latency
// quantiles from the summaries' sketches where calls were folded (docs/engine.md gives the
// error bound).
#pragma once

#include <cstdint>

namespace ingero::store {

// Calls further apart than this on a thread start a new run: half the shortest gap the step
// model takes for a break between bursts (kBurstGapMinNs, engine/thresholds_steps.h), so every
// gap it can see lies between runs, at its real place.
inline constexpr int64_t kMaxRunGapNs = 500000;
// A timed launch at least this share of its op's p95 (per process) keeps its row.
inline constexpr double kKeepAboveP95Share = 0.99;
// Default full-row window of `ingero trace` (--full-rows).
inline constexpr int64_t kDefaultFullRowsNs = int64_t(600) * 1000000000;

}  // namespace ingero::store

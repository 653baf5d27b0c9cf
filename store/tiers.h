// Tiered retention: an hour of training in a file people can keep.
//
// Every call has a row in `events` while it is recent. Launches older than the full-row
// window that tell nothing on their own (returned success, never left the CPU, faster than
// 0.9 x their op's p95 in that process) are folded: consecutive ones of a thread, on one
// stream, with at most kMaxRunGapNs between them and no other GPU call of the process in
// between, become one `call_runs` row (first start, last end, count, sum, min, max, the first
// call's stack). Everything else keeps its row for the whole trace: syncs, copies,
// allocations, collectives, graph calls, failed, slow and off-CPU calls, host events. The
// per-second summaries (store/call_summaries.h) cover every call, folded or not.
//
// The engine reads a run back as its calls, spread evenly over the run with its count, sum,
// minimum and maximum (store/sql_trace_source.cc), and takes latency quantiles from the
// summaries' sketches where calls were folded (docs/engine.md gives the error bound).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>

#include "hal/result.h"
#include "hal/side_channel.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Calls further apart than this on a thread start a new run: half the shortest gap the step
// model takes for a break between bursts (kBurstGapMinNs, engine/thresholds_steps.h), so every
// gap it can see lies between runs, at its real place.
inline constexpr int64_t kMaxRunGapNs = 500000;
// A launch at least this share of its op's p95 (per process) keeps its row.
inline constexpr double kKeepAboveP95Share = 0.99;
// Default full-row window of `ingero trace` (--full-rows).
inline constexpr int64_t kDefaultFullRowsNs = int64_t(600) * 1000000000;

struct FoldPass {
  uint64_t considered = 0;    // event rows looked at
  uint64_t folded = 0;        // call rows folded into runs (and deleted from events)
  uint64_t runs = 0;          // run rows written
  bool more = false;          // the budget ran out before `before_ns`
  int64_t first_too_new = 0;  // past_cut: the first call row kept for starting after the cut
};

// What folding needs from the dictionaries and the summaries: the launch ops, the sources of
// calls, and each (process, launch op)'s fold limit (kKeepAboveP95Share x its p95). A caller
// folding repeatedly keeps one; it is read again after 30 s of trace time. An op or process
// that appeared since keeps its rows until then.
struct FoldLimits {
  std::set<std::pair<int, int>> launch_ops;  // (source, op)
  std::set<int> call_sources;
  // (node, pid, source, op) -> ns: pids of different nodes of a merged file are different
  // processes.
  std::map<std::tuple<std::string, uint32_t, int, int>, int64_t, std::less<>> limit;
  int64_t read_for_ns = INT64_MIN;  // the `before_ns` they were read at
};

// One bounded pass on the writer's connection, outside a transaction (the pass is one write
// transaction of its own: folders of one file take turns): folds the launches
// that started before `before_ns` (wall clock, epoch ns) among the next `budget` event rows
// not yet considered, up to row `through_id` (the tracer's shipper: rows not yet in ClickHouse
// keep their rows until they are). Needs the file's call summaries for the p95s.
// `past_cut` (compact): a call starting at or after `before_ns` keeps its row and the pass goes
// on past it, instead of stopping there (the tracer's rows come in time order; a merged file's
// come node after node).
ingero::Result<FoldPass> fold_calls(Db& db, int64_t before_ns, uint64_t budget = 50000,
                                    FoldLimits* cache = nullptr, int64_t through_id = INT64_MAX,
                                    bool past_cut = false);

// Totals of the file's folding so far (zeros when nothing was folded).
struct FoldState {
  int64_t last_event_id = 0, folded_before_ns = 0;
  uint64_t folded_calls = 0, runs = 0;
};
ingero::Result<FoldState> fold_state(Db& db);

// `ingero compact`: migrates `path` (a file of an older schema gets its summaries), folds the
// launches older than `full_rows_ns` before its last event, with `archive` moves the call rows
// left and the runs into compressed blocks (store/call_archive.h), and rewrites it to its new size.
// Refuses the original implementation's files (read-only) and damaged ones.
struct Compacted {
  uint64_t calls_before = 0;  // calls in the summaries
  uint64_t folded = 0, runs = 0;
  uint64_t archived = 0, blocks = 0;  // call rows moved into blocks
  uint64_t archived_runs = 0, run_blocks = 0;
};
ingero::Result<Compacted> compact_trace(const std::string& path, int64_t full_rows_ns,
                                        std::span<const hal::SqlView> views, bool archive = true);

}  // namespace ingero::store

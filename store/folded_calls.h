// Calls that tiered retention folded into runs (store/tiers.h), read back: the runs of a
// window (engine/call_run.h says how a run reads back as calls), and RunExpander, which gives
// the calls of the runs it is handed in time order, for SqlTraceSource::calls to merge with
// the calls that kept their rows.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/call_run.h"
#include "hal/event.h"
#include "hal/result.h"
#include "store/event_rows.h"
#include "store/merged_rows.h"
#include "store/untimed_durations.h"

namespace ingero::store {

class Db;
class Stmt;

// The runs of folded launches an older file (schema 9 and before) holds, as rows of its own
// `call_runs` table or archived: every one, including those a reader's view leaves out because
// copies of their calls' rows are kept beside them (a schema 9 file folded while tracing). 0
// for a file of this schema, whose `call_runs` is a view of its call store. `db`: a
// TraceReader's connection (it installs the archive's tables).
ingero::Result<int64_t> older_folded_runs(Db& db);

// The runs overlapping `f` (its pid and node restrictions apply) that start at or after
// `min_start`, by start, one at a time. None for files without runs. A damaged row (no calls,
// or extremes that do not fit the total) is an error, never expanded into invented calls.
class RunCursor {
 public:
  static ingero::Result<std::unique_ptr<RunCursor>> open(
      Db& db, const EventFilter& f, StringPool& strings,
      int64_t min_start = std::numeric_limits<int64_t>::min());
  ~RunCursor();
  // The next run into `r`: true, or false after the last.
  ingero::Result<bool> next(engine::CallRun& r);

 private:
  RunCursor(Db& db, StringPool& strings);
  static const std::vector<std::string> kColumns;
  static constexpr int kNode = 21;     // of an archived run: after kColumns
  static constexpr int kRowNode = 20;  // of a row: before its id, the last column
  // The current row, of the table or the archive, into `r`: true; false when its op is
  // missing from the dictionary; an Error when it is damaged.
  template <class Row>
  ingero::Result<bool> take(const Row& st, engine::CallRun& r, std::string_view node) const;
  struct Names {
    std::string_view vendor, api, op;
    hal::EventKind kind;
  };
  Db& db_;
  StringPool& strings_;  // a run's kernels (CallRun::funcs)
  // Kernel counts met, by their text: a hash, where the pool's ordered look-up compared ~1.5 KB
  // texts that differ only in their counts over and over (explain 0.44 -> 0.56 s on 9.8 M calls).
  mutable std::unordered_map<std::string_view, std::string_view> funcs_;
  std::map<std::pair<int64_t, int64_t>, Names> names_;  // (source, op)
  std::map<int64_t, std::string_view> libraries_;
  MergedRows rows_;     // main.call_runs, and any archived runs
  EventFilter filter_;  // what archived runs are checked against
  UntimedDurations untimed_;
};

class RunExpander {
 public:
  // Calls are given only when they start inside [from_ns, to_ns].
  RunExpander(int64_t from_ns, int64_t to_ns) : from_ns_(from_ns), to_ns_(to_ns) {}
  // Runs are added by start, each before any call after its start is asked for.
  void add(const engine::CallRun& r);
  // Start of the next call in time order (INT64_MAX when none is left).
  int64_t next_ts() const { return active_.empty() ? INT64_MAX : active_.top().first; }
  // No call is left (next_ts() alone cannot say it for a call at INT64_MAX).
  bool done() const { return active_.empty(); }
  // Takes the next call (only when !done()): into `e` and true when it starts
  // inside the window, false when it is outside (runs straddling an edge).
  bool next(hal::Event& e);

 private:
  struct Slot {
    engine::CallRun run;
    uint64_t k = 0;  // the next call's index
  };
  std::vector<Slot> slots_;  // runs being expanded; finished slots are reused
  std::vector<size_t> free_;
  int64_t from_ns_, to_ns_;
  using Item = std::pair<int64_t, size_t>;  // (next call's start, slot)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> active_;
};

}  // namespace ingero::store

// Calls that tiered retention folded into runs (store/tiers.h), read back as calls: each run
// gives its count of calls, spread evenly from its first start to its last end, with the
// run's minimum first, its maximum last and the rest of its total in between, so counts,
// sums, extremes, rates and the gaps between runs are those of the calls it replaced. The
// engine merges them with the calls that kept their rows (SqlTraceSource::calls).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <queue>
#include <vector>

#include "engine/trace_source.h"
#include "hal/event.h"
#include "hal/result.h"
#include "store/event_rows.h"

namespace ingero::store {

class Db;

class FoldedCalls {
 public:
  // The runs overlapping `f` (pid and node restrictions apply). Empty for files without runs.
  static ingero::Result<FoldedCalls> load(Db& db, const EventFilter& f, StringPool& strings);
  bool empty() const { return runs_.empty(); }
  size_t runs() const { return runs_.size(); }
  // Start of the next call in time order (INT64_MAX when none is left).
  int64_t next_ts() const;
  // Takes the next call in time order (only when next_ts() != INT64_MAX): into `e` and true
  // when it starts inside the window, false when it is outside (runs straddling an edge).
  // Runs of a window are mostly disjoint: the heap holds the few that overlap.
  bool next(hal::Event& e);

 private:
  struct RunRow {
    int64_t ts = 0, span = 0;
    uint32_t pid = 0, tid = 0;
    std::array<char, 16> comm{};
    uint64_t cgroup = 0;
    std::string_view vendor, api, op, library;
    hal::EventKind kind = hal::EventKind::kUnknown;
    std::optional<int64_t> stream, device;
    uint64_t calls = 0, sum = 0, min = 0, max = 0, nested = 0, stack = 0;
  };
  struct Cursor {  // where a run's expansion is
    uint64_t k = 0;
    int64_t ts = 0;
  };
  uint64_t duration(const RunRow& r, uint64_t k) const;
  uint64_t gap(const RunRow& r, uint64_t k) const;
  void activate_started(int64_t upto);

  std::vector<RunRow> runs_;  // by start
  std::vector<Cursor> cursors_;
  size_t next_run_ = 0;
  int64_t from_ns_ = 0, to_ns_ = 0;
  using Item = std::pair<int64_t, size_t>;  // (next call's start, run)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> active_;
};

}  // namespace ingero::store

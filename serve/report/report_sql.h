// The report's SQL aggregates: sessions (host facts and loss counters), call totals, the
// per-node and per-process tables. Each is one GROUP BY over the contract views, so it works
// on our files and the original implementation's alike; none returns raw rows.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/trace_source.h"
#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::serve::report {

// " WHERE <ts> BETWEEN from AND to" (empty for the unbounded window).
std::string window_where(const engine::Window& w, const char* ts_column);
// " AND <ts> BETWEEN from AND to" (empty for the unbounded window).
std::string window_and(const engine::Window& w, const char* ts_column);

struct CallTotals {
  uint64_t calls = 0, processes = 0, errors = 0, unfinished = 0;
  int64_t first_ns = 0, last_end_ns = 0;  // 0 when there are no calls
};
Result<CallTotals> call_totals(store::Db& db, const engine::Window& w);

// Rows of the `sessions` table with the columns this file has (ours: host facts and loss
// counters; the original implementation's: host facts only).
Result<nlohmann::json> sessions_json(store::Db& db);

// Per node: calls, processes, errors, unfinished, busy time (sum of call durations), first
// and last call. One row per node of `names` (the nodes with events, calls or not) and per
// other node with calls ("" when the file names none).
Result<nlohmann::json> nodes_json(store::Db& db, const engine::Window& w,
                                  const std::vector<std::string>& names);

// Per (node, pid) with calls, most calls first, at most `limit` rows: calls, threads, errors,
// unfinished, busy time, first/last call, process name and command line where recorded.
// `*total` is set to the number of (node, pid) pairs before the cap.
Result<nlohmann::json> processes_json(store::Db& db, const engine::Window& w, size_t limit,
                                      uint64_t* total);

// Distinct node names of the events (empty when the file has no node column).
Result<std::vector<std::string>> node_names(store::Db& db);

// The first integer of a statement's first row (0 when it yields none or NULL).
Result<int64_t> query_count(store::Db& db, const std::string& sql, const std::string& what);

}  // namespace ingero::serve::report

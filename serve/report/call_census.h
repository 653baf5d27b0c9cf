// The report's call totals, per node and per process, counted in one pass over the calls the
// engine reads (TraceSource::call_runs: rows and folded runs alike, ours and the original
// implementation's files alike), so the report's tables count what explain counts. The
// engine's analysis has just read the same window, whose calls it holds in memory where they
// fit: this pass then costs ~20 ns a call, where each GROUP BY over the `calls` view cost
// ~0.5 µs a row (bench/report_bench.sh; docs/performance.md).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/trace_source.h"
#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::serve::report {

// What a set of calls adds up to. A folded run counts its calls, its total duration, and
// its first start and last end.
struct CallCount {
  uint64_t calls = 0, errors = 0, unfinished = 0;
  uint64_t busy_ns = 0;                   // total duration, saturated
  int64_t first_ns = 0, last_end_ns = 0;  // 0 when there are no calls

  void add(int64_t ts, uint64_t n, uint64_t dur, int64_t end);
};

struct ProcessCount : CallCount {
  std::unordered_set<uint32_t> threads;
  std::string comm;  // the greatest comm seen, as SQL's max(comm)
};

struct CallCensus {
  CallCount totals;
  uint64_t collectives = 0;
  std::map<std::string, CallCount> nodes;                              // with calls
  std::map<std::pair<std::string, uint32_t>, ProcessCount> processes;  // (node, pid)
};

// A window of calls and the node they belong to ("" when the file names none).
struct NodeWindow {
  std::string node;
  engine::Window window;
};

// Counts the calls of each window (reads errors go to the source's error()).
CallCensus census_calls(engine::TraceSource& source, const std::vector<NodeWindow>& windows);

// Per node: calls, processes, errors, unfinished, busy time, first and last call. One row
// per node of `names` (the nodes with events, calls or not) and per other node with calls.
nlohmann::json nodes_json(const CallCensus& c, const std::vector<std::string>& names);

// Per (node, pid) with calls, most calls first, at most `limit` rows: calls, threads,
// errors, unfinished, busy time, first/last call, process name and command line where
// `process_names` records them (one row per node and pid), else its comm.
Result<nlohmann::json> processes_json(store::Db& db, const CallCensus& c, size_t limit);

}  // namespace ingero::serve::report

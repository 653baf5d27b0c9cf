// Internal to store/: what the writing and the reading sides of the call archive
// (store/call_archive.h) share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store::archive_detail {

// A table whose rows are archived: its blocks' table, the virtual table reading them back
// and the rows moved.
struct Spec {
  const char* table;    // main.<table>: the rows
  const char* blocks;   // main.<blocks>
  const char* archive;  // temp.<archive>
  const char* where;    // which of the table's rows
  const char* end;      // where a row ends
  const char* weight;   // the calls a row stands for
};
constexpr Spec kCalls = {
    "events",         "call_blocks",
    "archived_calls", "source IN (SELECT id FROM sources WHERE vendor <> 'host')",
    "duration",       ""};
constexpr Spec kRuns = {"call_runs", "run_blocks", "archived_runs", "1", "span_ns", "calls"};

// main.`table`'s columns in the order `SELECT *` gives them: each name, and whether it is
// generated.
ingero::Result<std::vector<std::pair<std::string, bool>>> table_columns(Db& db, const char* table);
std::string quoted(const std::string& name);
// main.`blocks` holds a block.
bool has_blocks(Db& db, const char* blocks);

// A block's entry: the id and time ranges of its rows, how many, and the calls they stand for.
struct BlockEntry {
  int64_t first_id = 0, last_id = 0, first_ts = 0, last_ts = 0, end_ts = 0, rows = 0, calls = 0;
  // Takes a row into the ranges (rows come in id order).
  void add(int64_t id, int64_t ts, int64_t end) {
    if (rows == 0) first_id = id, first_ts = last_ts = ts, end_ts = end;
    last_id = id;
    first_ts = std::min(first_ts, ts);
    last_ts = std::max(last_ts, ts);
    end_ts = std::max(end_ts, end);
    ++rows;
  }
  // Binds first_id, last_id, first_ts, last_ts, end_ts, rows and calls from parameter `at` on.
  void bind_entry(Stmt& st, int at) const {
    st.bind(at, first_id)
        .bind(at + 1, last_id)
        .bind(at + 2, first_ts)
        .bind(at + 3, last_ts)
        .bind(at + 4, end_ts)
        .bind(at + 5, rows)
        .bind(at + 6, calls);
  }
};

}  // namespace ingero::store::archive_detail

// The report's SQL reads: sessions (host facts and loss counters), node names, counts. They
// read the contract views, so they work on our files and the original implementation's
// alike. The calls themselves are counted from the engine's reads (call_census.h).
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

// Rows of the `sessions` table with the columns this file has (ours: host facts and loss
// counters; the original implementation's: host facts only).
Result<nlohmann::json> sessions_json(store::Db& db);

// Distinct node names of the events (empty when the file has no node column).
Result<std::vector<std::string>> node_names(store::Db& db);

// The first integer of a statement's first row (0 when it yields none or NULL).
Result<int64_t> query_count(store::Db& db, const std::string& sql, const std::string& what);

}  // namespace ingero::serve::report

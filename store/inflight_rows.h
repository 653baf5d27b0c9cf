// Reading the `inflight` table (store/table_defs.h): stuck threads as the tracer recorded them,
// for the engine (SqlTraceSource::inflight), `ingero status` and the MCP get_inflight tool.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/trace_source.h"
#include "hal/result.h"
#include "store/event_rows.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct InflightFilter {
  // Rows whose time stuck overlaps [from_ns, to_ns] (wall clock).
  int64_t from_ns = std::numeric_limits<int64_t>::min();
  int64_t to_ns = std::numeric_limits<int64_t>::max();
  std::optional<std::string> node;
  std::optional<uint32_t> pid;
  std::optional<int64_t> session_id;
  bool current = false;  // only rows still stuck (status in_flight)
};

// The rows, in order of entry; none when the file has no inflight table (older builds, the
// original implementation's files). vendor, api and op point into `strings`.
ingero::Result<std::vector<engine::InflightRow>> read_inflight(Db& db, const InflightFilter& f,
                                                              StringPool& strings);

}  // namespace ingero::store

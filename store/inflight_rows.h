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

namespace ingero::store {

// Whether a running `ingero trace` (or `ingero compact`) holds the file's writer lock
// (store/file_access.h, TraceLock) now. False when the file cannot be opened.
bool trace_being_written(const std::string& path);

// The latest session of a trace file (the one a running tracer writes): its id, node, when it
// stopped (0: it has not) and its --inflight-after in seconds (from sessions.flags; -1 when
// the session did not record one, 0 when it was off). nullopt: no session.
struct LatestSession {
  int64_t id = 0;
  std::string node;
  int64_t stopped_at = 0;
  double inflight_after_s = -1;
};
ingero::Result<std::optional<LatestSession>> latest_session(Db& db);

}  // namespace ingero::store

namespace ingero::store {

// What is stuck in the latest session of the file at `path`, open as `db`: rows still in
// flight, and, when no tracer writes the file any more, those the tracer stopped while they
// lasted (status `stopped`). `pid`: only that process.
struct StuckRead {
  bool live = false;                     // trace_being_written(path)
  std::optional<LatestSession> session;  // nullopt: the file has no session
  std::vector<engine::InflightRow> rows;
};
ingero::Result<StuckRead> read_stuck_now(Db& db, const std::string& path,
                                         std::optional<uint32_t> pid, StringPool& strings);

}  // namespace ingero::store

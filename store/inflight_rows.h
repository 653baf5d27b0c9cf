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

// The columns of an `inflight` row that make an engine::InflightRow, in the order
// inflight_row() reads them (the decoded fields follow, by field_columns()); the ClickHouse
// `inflight` table has the same columns (fleet/ch_schema.h), and its source decodes them here.
const std::vector<std::string>& inflight_columns();

// The row `r` (is_null(int), int64(int), text_view(int)), whose columns are inflight_columns()
// from `first` on, as the engine reads it; vendor, api and op point into `strings`.
template <class Row>
engine::InflightRow inflight_row(const Row& r, StringPool& strings, int first = 0);

// The rows, in order of entry; none when the file has no inflight table (older builds, the
// original implementation's files). vendor, api and op point into `strings`.
ingero::Result<std::vector<engine::InflightRow>> read_inflight(Db& db, const InflightFilter& f,
                                                               StringPool& strings);

template <class Row>
engine::InflightRow inflight_row(const Row& st, StringPool& strings, int k) {
  engine::InflightRow row;
  row.node = std::string(st.text_view(k + 0));
  hal::Inflight& in = row.in;
  in.what = hal::inflight_what_from_name(st.text_view(k + 1)).value_or(hal::Inflight::What::kCall);
  in.status = hal::inflight_status_from_name(st.text_view(k + 2))
                  .value_or(hal::Inflight::Status::kInFlight);
  hal::Event& e = in.call;
  auto u = [&](int c) { return st.is_null(k + c) ? uint64_t(0) : uint64_t(st.int64(k + c)); };
  e.pid = uint32_t(u(3));
  e.tid = uint32_t(u(4));
  e.set_comm(st.text_view(k + 5));
  e.vendor = strings.intern(st.text_view(k + 6));
  e.api = strings.intern(st.text_view(k + 7));
  e.kind = hal::kind_from_name(st.text_view(k + 8)).value_or(hal::EventKind::kUnknown);
  e.op = strings.intern(st.text_view(k + 9));
  e.ts_ns = u(10);
  in.seen_ns = u(11);
  in.ended_ns = u(12);
  in.reported_ns = u(13);
  e.dur_ns = u(14);
  in.state = hal::thread_state_from_name(st.text_view(k + 15)).value_or(hal::ThreadState::kUnknown);
  in.state_since_ns = u(16);
  e.off_cpu_ns = u(17);
  in.stack_id = u(18);
  e.stack_id = in.stack_id;
  in.seq = st.is_null(k + 19) ? hal::kNoSeq : uint64_t(st.int64(k + 19));
  in.others_running = uint32_t(u(20));
  in.others_sleeping = uint32_t(u(21));
  in.others_io = uint32_t(u(22));
  e.timed = false;
  e.unfinished = in.status == hal::Inflight::Status::kUnfinished;
  constexpr int kFixed = 23;
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    if (!st.is_null(k + kFixed + int(i)))
      e.set(hal::Field(i), uint64_t(st.int64(k + kFixed + int(i))));
  return row;
}

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
  std::string node, host;
  int64_t started_at = 0, stopped_at = 0;
  double inflight_after_s = -1;
  // --launch-timing (sessions.flags): 1 in N launches is timed, and only a timed launch is in
  // flight while it runs; 0 when the session did not record it.
  int launch_timing = 0;
  int64_t mono_offset_ns = 0;  // the session's clock: CLOCK_MONOTONIC + this (0: unknown)
};
ingero::Result<std::optional<LatestSession>> latest_session(Db& db);
// Now, on the clock the session stamps its rows with: on the host that traces it (its name),
// this host's CLOCK_MONOTONIC + the session's offset, so that a wall clock stepped since the
// session began does not lengthen or shorten a wait by the step; elsewhere, the wall clock.
int64_t session_now_ns(const LatestSession& s);

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

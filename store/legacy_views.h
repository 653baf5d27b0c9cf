// Reading trace files from the original Go implementation (schema 0.8 and 0.9) as they are.
//
// The file is opened read-only and never modified. Its own tables (events, sources, ops,
// process_names, ...) stay queryable verbatim, so the published queries run unchanged; on
// top, TEMP views give it our contract (calls, cuda_events, host_events, ...), mapping the
// file's numeric source/op codes through the file's own `ops` table and classifying op
// names into event kinds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hal/result.h"
#include "store/schema.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Some(info) when the database looks like a legacy trace (events + sources + ops tables).
std::optional<TraceFileInfo> detect_legacy(Db& db);

// The driver calls of a legacy file made inside a runtime call: the original implementation
// stored both calls, our tracer records one (`nested_calls`). Found once per file; a connection
// opened again on the file is given them (TraceReader::reopen).
struct LegacyFold {
  std::vector<std::pair<int64_t, int64_t>> nested;  // (driver call's rowid, runtime call's)
  struct Outer {
    int64_t id;        // the runtime call's rowid
    int64_t calls;     // driver calls inside it
    int32_t first_op;  // events.op of the first
  };
  std::vector<Outer> outer;
};
// A driver call (source 4) that begins and ends within a runtime call (source 1) of its node,
// process and thread, folded into the innermost such call. Rows whose time is not an integer,
// that have no time or no duration (legacy_has_time_sql, legacy_duration_sql) take no part.
ingero::Result<LegacyFold> find_nested_calls(Db& db, const TraceFileInfo& info);

// Damage the original implementation never wrote, as every reader of the file reads it. Its
// times are Unix-epoch nanoseconds: a row stamped at or before the epoch (0, a Go zero value)
// has no time, and is left out of the views, the trace's span and every count (one call at 0
// made a step of 56 years: "GPU idle >= 100%"). A duration that is not an integer, is negative,
// or would end its call past the clock's last instant (INT64_MAX, in 2262) is none: the views
// give it as NULL, its call `untimed` (counted, no latency: -5000 ns read as a p99 of
// 18446744073.7 s, INT64_MAX overflowed the report's sums and made the span end in 2262).
// `e`: the alias of main.events with its dot ("e."), or "".
std::string legacy_has_time_sql(std::string_view e);
std::string legacy_duration_sql(std::string_view e);  // the duration, or NULL
std::string legacy_end_sql(std::string_view e);       // its end: its start without a duration

// The rows of the whole file left out for their time, and those read without a duration, as
// explain, the report and MCP say them ("2 events whose duration is negative or ends past 2262
// are read without one: counted, not timed"); "" when the file has none.
ingero::Result<std::string> legacy_damage_words(Db& db);

// Installs the TEMP contract views over a legacy file: `calls` leaves out the driver calls of
// `fold` and gives their runtime calls `nested_calls` and `nested_op`, as our tracer records
// them (TEMP tables legacy_nested, legacy_outer); the file's own `events` keeps both.
ingero::Status install_legacy_views(Db& db, const TraceFileInfo& info, const LegacyFold& fold);

// What follows the number of calls a fold counted, as explain, the report and merge say it:
// " driver calls made inside runtime calls are counted in them" (or the one call's).
std::string_view folded_calls_words(int64_t n);

// How many driver calls begun in [from_ns, to_ns] (of `node`, where given) the views fold.
int64_t legacy_nested_calls(Db& db, const std::optional<std::string>& node = std::nullopt,
                            int64_t from_ns = INT64_MIN, int64_t to_ns = INT64_MAX);

// Event kind of a legacy op name ("cudaStreamSync" -> "sync"); "" when unknown.
std::string_view legacy_kind(std::string_view op_name);

}  // namespace ingero::store

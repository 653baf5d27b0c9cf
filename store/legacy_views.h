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
// process and thread, folded into the innermost such call. Rows whose time or duration is not
// an integer, or whose duration is negative, take no part.
ingero::Result<LegacyFold> find_nested_calls(Db& db, const TraceFileInfo& info);

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

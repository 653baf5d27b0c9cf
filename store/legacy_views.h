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
#include <string_view>

#include "hal/result.h"
#include "store/schema.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Some(info) when the database looks like a legacy trace (events + sources + ops tables).
std::optional<TraceFileInfo> detect_legacy(Db& db);

// Installs the TEMP contract views over a legacy file. A driver call the file holds beside the
// runtime call it was made in is folded into that call in `calls`, as our tracer records it
// (`nested_calls`, `nested_op`); the file's own `events` keeps both.
ingero::Status install_legacy_views(Db& db, const TraceFileInfo& info);

// How many driver calls install_legacy_views folded into the runtime calls they were made in.
int64_t legacy_nested_calls(Db& db);

// Event kind of a legacy op name ("cudaStreamSync" -> "sync"); "" when unknown.
std::string_view legacy_kind(std::string_view op_name);

}  // namespace ingero::store

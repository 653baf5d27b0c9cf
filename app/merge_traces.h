// Trace files re-encoded into one (app/cmd_merge.cc): what `ingero merge` does, and how
// `ingero compact` converts a file of an older schema.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::app {

// The runs of folded launches an older file (schema 9 and before) holds, as rows of its own
// `call_runs` table or archived: every one, including those a reader's view leaves out because
// copies of their calls' rows are kept beside them (a schema 9 file folded while tracing). 0
// for a file of this schema, whose `call_runs` is a view of its call store. `db`: a
// TraceReader's connection (it installs the archive's tables).
ingero::Result<int64_t> older_folded_runs(store::Db& db);

// Merges `inputs` (read-only; ours of any schema, or the original implementation's) into a new
// file `tmp`, one session per node of each input; the caller renames it over the output only
// when everything succeeded. `events` gets the events written. Refuses an input whose launches
// were folded into runs for good (they have no rows to re-encode), and the same node trace
// twice.
ingero::Status merge_traces(const std::vector<std::string>& inputs, const std::string& force_node,
                            const std::string& tmp, size_t* events);

// Converts a trace of an older schema in place: re-encoded (as merge does, one session per
// node) into a file beside it, renamed over it once whole; the original stays untouched until
// then.
ingero::Status convert_trace(const std::string& path);

}  // namespace ingero::app

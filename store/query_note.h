// What a query's answer leaves out of the trace, said beside the answer (`ingero query`, MCP
// run_sql), so that a count over a long trace is not mistaken for every call.
#pragma once

#include <string>
#include <string_view>

#include "store/sqlite_db.h"

namespace ingero::store {

// On a file with tiered retention (docs/schema.md), the launches folded into call_runs have
// no row in `events` or the views of calls: a note saying how many, and before when, for a
// statement naming `events`, `calls`, `cuda_events`, `hip_events` or `nccl_events`; ask only
// for one that reads the rows of events (run_query() knows from SQLite's authorizer: `calls`
// is also a column of call_summaries, and host_events reads events too). Empty where nothing
// was folded, or the statement names none of them.
std::string folded_calls_note(Db& db, std::string_view sql);

// Whether `sql` names `name` as an identifier (any case, quoted or not): "calls" is named in
// "SELECT * FROM Calls", not in "SELECT * FROM call_runs".
bool names_identifier(std::string_view sql, std::string_view name);

}  // namespace ingero::store

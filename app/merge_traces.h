// Trace files re-encoded into one (app/cmd_merge.cc): what `ingero merge` does, and how
// `ingero compact` converts a file of an older schema.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hal/result.h"

namespace ingero::app {

// Merges `inputs` (read-only; ours of any schema, or the original implementation's) into a new
// file `tmp`, one session per node of each input; the caller renames it over the output only
// when everything succeeded. `events` gets the events written. Refuses an input whose launches
// were folded into runs for good (they have no rows to re-encode), and the same node trace
// twice.
ingero::Status merge_traces(const std::vector<std::string>& inputs, const std::string& force_node,
                            const std::string& tmp, size_t* events);

// Refused before anything is written: a session in two inputs (a file given twice, a copy, or a
// file beside a merged file that holds it) would count every call of it twice. `sessions` gets
// how many sessions the inputs hold.
ingero::Status refuse_sessions_twice(const std::vector<std::string>& inputs,
                                     const std::string& force_node, size_t* sessions);

// Converts a trace of an older schema in place: re-encoded (as merge does, one session per
// node) into a file beside it, renamed over it once whole; the original stays untouched until
// then.
ingero::Status convert_trace(const std::string& path);

}  // namespace ingero::app

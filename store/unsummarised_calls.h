// The calls no per-second summary counts yet: of each session not ended, those after its last
// summarised second. A tracer killed (SIGKILL, OOM, a power cut) leaves its last seconds so, or
// its whole session when it was killed in its first seconds; a tracer still writing keeps its
// last two seconds so (store/call_summaries.h). `ingero compact` writes their summaries; the
// readers take them into account in memory meanwhile (the untimed calls' durations, the
// latency sketches), so that a killed session reads as it will once compacted, not with the
// quantiles and means of the seconds that happened to be summarised.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "hal/result.h"
#include "store/call_summaries.h"
#include "store/row_block.h"
#include "store/sqlite_db.h"

namespace ingero::store {

using UnsummarisedCall =
    std::function<void(std::string_view node, int64_t session_id, const SummarizedCall& c)>;

// The sessions not ended (`stopped_at` 0), in id order: none in a file without the column.
ingero::Result<std::vector<int64_t>> unended_sessions(Db& db);

// Calls `f` for each such call, block by block, as the summarizer takes it. Nothing when every
// session has ended (a query of the sessions, no block read).
ingero::Status for_each_unsummarised_call(Db& db, const UnsummarisedCall& f);

// Every call of block `block` (its `full` form), decoded.
ingero::Result<RowBlock> decode_full(Db& db, int64_t block);

}  // namespace ingero::store

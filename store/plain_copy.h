// A copy of a trace whose calls are plain rows: what `ingero export --format sqlite` writes for
// tools that open the file themselves (the sqlite3 shell, pandas, DuckDB's sqlite scanner),
// which have none of the virtual tables a file of schema 10 reads its calls through
// (store/call_store.h).
//
// The copy has every call that has its row as a row of an `events` table (with the host events,
// in the original implementation's columns), the runs of calls folded for good as rows of
// `call_runs`, the per-second summaries and every other table as they are, and the contract
// views over them. It is laid out as schema 7 was (rows, runs as rows, summaries), which every
// ingero reads too. A call takes ~120 bytes there against a few in blocks.
#pragma once

#include <span>
#include <string>

#include "hal/result.h"
#include "hal/side_channel.h"

namespace ingero::store {

struct PlainCopy {
  uint64_t calls = 0, runs = 0, host_events = 0;
};

// Writes the copy of `in` (read-only; a file of schema 10, or an older one of ours) to `out`,
// which must not exist, with the backends' `views`. An error leaves no `out`.
ingero::Result<PlainCopy> write_plain_copy(const std::string& in, const std::string& out,
                                           std::span<const hal::SqlView> views);

}  // namespace ingero::store

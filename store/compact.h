// Upkeep of a trace file of schema 10 outside a tracing session: what `ingero compact` does,
// and what a writer does when it opens a file whose last session ended without finishing
// (SIGKILL, a power cut).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "hal/result.h"
#include "hal/side_channel.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct Repaired {
  uint64_t blocks_folded = 0;     // blocks left filling by an unfinished session, folded now
  uint64_t seconds_rebuilt = 0;   // per-second summaries written from the blocks' calls
  uint64_t calls_summarised = 0;  // the calls they count
  uint64_t sessions_ended = 0;    // sessions without a stop time, ended now
};

// After an unclean stop the file holds what the last commit wrote: the block then filling
// (with every call, but no folded form) and calls of the last seconds that no summary counts
// yet. This folds such blocks and writes the missing summaries from the calls in the blocks,
// in one transaction on a writer's connection (a no-op on a file that was finished).
ingero::Result<Repaired> repair_unfinished(Db& db);

// Folds the blocks a writer left unfolded (written with folding off: `trace --keep-all`,
// `merge`) by each launch op's limit over the whole file's summaries, in one transaction on a
// writer's connection. The blocks folded.
ingero::Result<uint64_t> fold_unfolded(Db& db);

struct Compacted {
  uint64_t calls = 0;            // in the file
  uint64_t folded_calls = 0;     // calls whose rows went now (their blocks keep the folded form)
  uint64_t blocks = 0;           // blocks folded for good now
  uint64_t kept_rows = 0;        // calls that keep their rows for good (not in a run)
  uint64_t blocks_refolded = 0;  // blocks never folded before (--keep-all), folded now
  Repaired repaired;
  bool converted = false;  // an older schema was converted (by the caller, before)
};

// How long compact waits for other processes to let go of the file (its writes need every
// reader of a file at rest to let go: each statement waits up to `limit`), and what it calls
// once a wait has lasted a second.
struct CompactWait {
  std::chrono::milliseconds limit{60'000};
  std::function<void()> notice;
};

// `ingero compact` of a file of schema 10: repairs it (above), folds the blocks never folded
// (a trace recorded with --keep-all) by each launch op's limit over the whole file, folds for
// good the blocks whose calls all ended `full_rows_ns` or more before the file's last call (0:
// every block), and
// gives the freed space back (VACUUM). Refuses files of other schemas (the caller converts older
// ones first).
ingero::Result<Compacted> compact_trace(const std::string& path, int64_t full_rows_ns,
                                        std::span<const hal::SqlView> views,
                                        const CompactWait& wait = {});

}  // namespace ingero::store

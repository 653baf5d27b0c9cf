// Folding calls as they are archived (a live trace, store/call_archive.h): a block of call rows
// becomes the rows folding keeps (call_blocks), its runs (call_runs) and, while its calls are
// within the full-row window, a copy of every row (recent_blocks) for the readers of rows.
//
// The engine reads the calls kept and the runs, whatever their age: an hour's trace, its last
// 10 minutes included, is read as folded (docs/schema.md). The views of rows (`events`,
// `calls`, `call_runs`) give every call of a block that still has its copy as a row, and hide
// the runs of those calls: SQL over rows sees each call once, as a row or in a run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hal/result.h"
#include "store/archive_internal.h"
#include "store/fold_runs.h"
#include "store/row_block.h"
#include "store/sqlite_db.h"

namespace ingero::store::archive_detail {

// What folding made of a block of call rows.
struct FoldedBlock {
  std::vector<FoldRow> calls;  // the block's rows as folding sees them, by start
  std::vector<FoldRun> runs;   // point into `calls`
  uint64_t folded = 0;         // calls in the runs
  BlockEntry kept;             // the rows that keep theirs (kept.rows == 0: none)
  std::string kept_data;
};

// Folds `rows` (call rows of events, every stored column, in id order) as folding the rows of
// events does (store/fold_runs.h), by `lim`'s limits: launches that start before
// `fold_before_ns` may fold, but not those folding has considered already (id up to
// `considered_id`: they kept their rows when the rows of events were folded). Runs never span
// two blocks.
ingero::Result<FoldedBlock> fold_block(Db& db, FoldLimits& lim, const RowBlock& rows,
                                       int64_t fold_before_ns, int64_t considered_id);

// Adds to call_folding's counts of launches folded whose rows are gone (the note of a query
// over rows says how many: store/query_note.h), and moves the point up to which folding has
// considered the rows to `considered_id` (folding the rows of events resumes after it: the
// calls kept of a block folded as it was archived are never folded again into runs of their
// own, beside the block's runs).
ingero::Status count_folded(Db& db, uint64_t calls, uint64_t runs, int64_t before_ns,
                            int64_t considered_id = 0);

}  // namespace ingero::store::archive_detail

namespace ingero::store {

// The first call row id of the recent_blocks (every call row from it on, archived or not, has
// its row in `events` as the views give it), or none.
ingero::Result<std::optional<int64_t>> recent_from_id(Db& db);

// Drops the copies in recent_blocks whose calls all ended before `before_ns`, oldest first,
// stopping at the first newer one, in one write transaction: their folded calls then have no
// row, and call_folding counts them. How many blocks went.
ingero::Result<uint64_t> drop_recent_blocks(Db& db, int64_t before_ns);

}  // namespace ingero::store

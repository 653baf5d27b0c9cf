// Archived calls: an hour of training in a file people can keep.
//
// `ingero compact` moves every call row of `events` (all but the file's newest row) into
// `call_blocks`: blocks of up to kArchiveBlockRows consecutive call rows of one node, each
// one zstd-compressed store::RowBlock (store/row_block.h) with the id and time range of its
// rows. A call then takes a few bytes instead of ~120. Host events stay rows.
//
// Readers see no difference. TraceReader installs, on its own connection, a TEMP view named
// `events` (which SQLite resolves before main.events) that is main.events UNION ALL the
// virtual table temp.archived_calls: the archived rows with every column, decoded on demand.
// A window on `timestamp` or `id` reads only the blocks that overlap it, and rows come in
// (timestamp, id) order when asked for it, so the engine's reads, the contract views, the
// report, `query` and the MCP tools give what they gave before the archive. A damaged block
// is an Error naming it, never a short read.
//
// External tools that open the file themselves (the sqlite3 shell) see main.events without
// the archived calls; docs/schema.md says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

inline constexpr size_t kArchiveBlockRows = 4096;

struct Archived {
  uint64_t rows = 0;              // call rows moved into blocks
  uint64_t blocks = 0;            // blocks written
  bool more = false;              // one_batch: rows for another batch remain
  uint64_t folded = 0, runs = 0;  // ArchiveOptions::fold: calls folded, runs written
  uint64_t recent = 0;            // blocks copied whole into recent_blocks
};

struct FoldLimits;

struct ArchiveOptions {
  size_t block_rows = kArchiveBlockRows;
  size_t blocks_per_batch = 64;    // blocks written per transaction
  int64_t through_id = INT64_MAX;  // rows above it stay rows (the tracer's shipper)
  bool whole_blocks = false;       // rows short of a whole block stay rows (a live trace)
  bool one_batch = false;          // stop after one transaction (a live trace's bounded pass)
  // Calls only: fold them as they are archived (store/archive_fold.h), by these limits (read
  // again after 30 s of `fold_before_ns`). Rows from the first call that starts at or after
  // `fold_before_ns` stay rows. A block whose calls end at or after `recent_from_ns` keeps a
  // copy of every row in recent_blocks until drop_recent_blocks() takes it.
  FoldLimits* fold = nullptr;
  int64_t fold_before_ns = INT64_MAX;
  int64_t recent_from_ns = INT64_MIN;
};

// Moves the file's call rows into blocks, in batches of one transaction each, on a writer's
// connection of a file at the current schema. Calls already archived stay as they are.
ingero::Result<Archived> archive_calls(Db& db, const ArchiveOptions& o = {});
// The same for the runs of folded launches (call_runs -> run_blocks, read back through the
// TEMP view `call_runs` over main.call_runs and temp.archived_runs).
ingero::Result<Archived> archive_runs(Db& db, const ArchiveOptions& o = {});

// On a writer's connection: temp.archived_calls alone, without the TEMP view (its INSERTs and
// DELETEs go to main.events), for folding to read archived calls. Once per connection; a
// no-op for files without call_blocks.
ingero::Status install_archive_reader(Db& db);
// Removes the archived calls `ids` from their blocks (folding them into runs): each block
// holding one is rewritten with its entry, or deleted when emptied. An id in no block is an
// Error. Inside the caller's write transaction.
ingero::Status drop_archived_calls(Db& db, std::vector<int64_t> ids);

// On a reader's connection: where the file can hold archived calls (it has call_blocks, with
// blocks or not yet), installs temp.archived_calls and the TEMP `events` view over both; where
// it can hold archived runs, temp.archived_runs and the TEMP `call_runs` view. Installed before
// the first block, they read it once it comes: a reader of a trace being written needs no
// reopening. A no-op for files without those tables (and for the original implementation's
// files), and for what is installed already: a file migrated since calls it again.
ingero::Status install_call_archive(Db& db);
// What install_call_archive() installs on `db` now: (the calls' view, the runs'). A reader
// that installed less is stale.
std::pair<bool, bool> call_archive_views(Db& db);

// The file has archived calls (main.call_blocks holds a block), archived runs.
bool has_call_archive(Db& db);
bool has_run_archive(Db& db);

// Questions about every event, archived calls included, answered from the blocks' entries
// where a query through the view would decode every block:
// the node names, sorted (one column);
std::string node_names_sql(Db& db);
// the least timestamp (one value);
std::string first_timestamp_sql(Db& db);
// the archived calls that start in [from_ns, to_ns] (of `node` if set): whole blocks by their
// entries, the blocks across an edge row by row. Needs install_call_archive on `db`.
ingero::Result<uint64_t> count_archived(Db& db, int64_t from_ns, int64_t to_ns,
                                        const std::optional<std::string>& node);

}  // namespace ingero::store

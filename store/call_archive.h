// The archive of files of schema 8 and 9, read: their call rows moved out of `events` into
// `call_blocks` (and runs out of `call_runs` into `run_blocks`), each block one zstd-compressed
// store::RowBlock (store/row_block.h) with the id and time range of its rows. (Schema 10 keeps
// calls in its call store from the start: store/call_store.h.)
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

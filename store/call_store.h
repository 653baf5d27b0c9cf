// Schema 10's call store: where a trace file keeps its calls (store/call_block.h), and how it is
// read.
//
// `call_store` holds one row per block of up to kCallBlockRows calls of one node and session:
// its entry (id and time range, counts) and up to three forms of its calls, each a
// store::RowBlock:
//   full       every call, every column; NULL once the block is folded for good (its calls
//              older than --full-rows, and shipped where a shipper runs);
//   kept_data  the calls folding kept; NULL while the block fills (the tail);
//   run_data   the runs of the calls folded; NULL while the block fills.
// Host events are blocks too, of `host_store` (store/host_store.h; schema 10 kept them as rows
// of a table `host_rows`). One id space: a call's id and a host event's never meet.
//
// SQL reads them through two eponymous virtual tables that every connection ingero opens has
// (Db::open registers them): `ingero_calls`, a row per call (from `full` while it exists, else
// the calls kept), and `ingero_runs`, the runs of blocks folded for good. The file's own views
// read those: `events` (host_rows and every call, the original implementation's columns),
// `calls`, `call_runs`, and the rest over them. Tools that open the file themselves (the
// sqlite3 shell) have no such tables: `ingero export --format sqlite` writes a file of plain
// rows for them.
#pragma once

#include <sqlite3.h>

#include <optional>
#include <string>

#include "hal/result.h"
#include "store/archive_scan.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// The call store's table (IF NOT EXISTS throughout).
std::string call_store_ddl();
// The persistent views `events` and `call_runs` over them.
std::string call_store_views_sql();

// Registers ingero_calls, ingero_runs and ingero_host on a connection (every Db::open).
int register_call_store_tables(sqlite3* db);

// Whether the file keeps its calls in call_store (schema 10 and later).
bool has_call_store(Db& db);
// The table or view of the file's host events: main.host_rows (schema 10 and later), else
// main.events (where calls are rows too).
std::string host_table(Db& db);

// The forms readers scan (store/archive_scan.h): what the engine reads, whatever the calls'
// age (the calls kept and the runs; a block still filling gives every call and no runs), and
// what SQL's rows read (every call while it has its row, else the calls kept; the runs of
// blocks folded for good).
const BlockForm& engine_calls_form();
const BlockForm& engine_runs_form();
const BlockForm& sql_calls_form();
const BlockForm& sql_runs_form();

// The calls kept by folding (blocks still filling: every call) that start in [from_ns, to_ns],
// of `node` where given: the blocks inside the window by their entries, the others by their
// rows. The calls in runs are not counted (RunCursor reads those).
ingero::Result<uint64_t> count_kept_calls(Db& db, int64_t from_ns, int64_t to_ns,
                                          const std::optional<std::string>& node);
// Block entries that do not hold together: a count that is not its folded form's (the calls
// kept plus those in its runs), calls in none of a block's forms, a reversed range, two blocks
// whose ids overlap (a row copied). The entries' counts are the trace's, so a damaged one is
// an error naming the block.
ingero::Status check_block_counts(Db& db);
// The same of a schema 11 file's host events (host_store).
ingero::Result<uint64_t> count_host_events(Db& db, int64_t from_ns, int64_t to_ns,
                                           const std::optional<std::string>& node);

}  // namespace ingero::store

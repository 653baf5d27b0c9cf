// Schema 11's host store: where a trace file keeps its host events (store/host_block.h), and
// how it is read.
//
// `host_store` holds one row per block of up to kHostBlockRows host events of one node and
// session: its entry (id and time range, count) and its events, a store::RowBlock (`data`).
// SQL reads them through the eponymous virtual table `ingero_host` (a row per event; Db::open
// registers it on every connection ingero opens) and the file's view `host_rows` over it,
// which has the columns schema 10's table of that name had. Schema 10 kept host events as
// rows of a table `host_rows`; a writer opening such a file converts them (migrate()), and
// readers read either as it is.
#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>

#include "hal/result.h"
#include "store/archive_scan.h"
#include "store/host_block.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// The table and its indexes (IF NOT EXISTS).
std::string host_store_ddl();
// The view `host_rows` over ingero_host (replacing any view of that name).
std::string host_rows_view_sql();
// The statement that writes a block under its id, replacing it (a block filling is written at
// each commit): parameters id, node, session_id, first_id, last_id, first_ts, last_ts, end_ts,
// events, data.
const char* host_store_insert_sql();
// Writes `b` (of one node and session, its first event's) with `ins` (host_store_insert_sql()),
// compressing it into `scratch`.
ingero::Status write_host_block(Stmt& ins, int64_t id, const HostBlock& b, std::string& scratch);

// What readers scan: every host event of every block.
const BlockForm& host_form();
// Registers ingero_host on a connection (every Db::open).
int register_host_store_table(sqlite3* db);

// Whether the file keeps its host events in host_store (schema 11 and later).
bool has_host_store(Db& db);

// Schema 10 -> 11, inside the caller's transaction: the rows of table host_rows into blocks,
// in id order (a block never mixes nodes or sessions), then the table goes and the view takes
// its name. Every stored column is kept; a value of a type host rows never hold (a real, a
// blob) or a column this build does not know is an error, and nothing is changed.
ingero::Status convert_host_rows(Db& db);

}  // namespace ingero::store

// Virtual tables that read blocks of rows back as rows (store/archive_scan.h):
//   - temp.archived_calls and temp.archived_runs over the archive of files of schema 8-9
//     (call_blocks, run_blocks), created by the reader of such a file;
//   - the eponymous tables of schema 10's call store (store/call_store.h), which exist on
//     every connection ingero opens and which the file's own views read.
//
// Its columns are the rows' columns, in order; its rowid is `id`. Constraints on `timestamp`
// and `id` (=, <, <=, >, >=) choose the blocks read; SQLite checks every constraint again on
// the rows given. ORDER BY timestamp[, id] and ORDER BY id are given without a sort.
// Read-only.
#pragma once

#include <sqlite3.h>

#include <string>
#include <vector>

#include "hal/result.h"
#include "store/archive_scan.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Registers the module on `db` and creates temp.`name` over main.`blocks` (call_blocks or
// run_blocks), with main.`table`'s stored columns.
ingero::Status create_archive_table(Db& db, const std::string& name, const std::string& table,
                                    const std::string& blocks);

// An eponymous table: its blocks and columns (static storage: it must outlive the connection).
struct EponymousBlocks {
  BlockForm form;
  std::vector<std::string> columns;  // among them "id" and "timestamp"
};
// Registers table `name` on `db`; SQLite's result code.
int register_eponymous_blocks(sqlite3* db, const char* name, const EponymousBlocks* blocks);

}  // namespace ingero::store

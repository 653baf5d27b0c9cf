// temp.archived_calls and temp.archived_runs: the virtual tables that read call_blocks and
// run_blocks back as rows of `events` and `call_runs` (store/call_archive.h).
//
// Its columns are the table's stored columns, in order; its rowid is `id`. Constraints on
// `timestamp` and `id` (=, <, <=, >, >=) choose the blocks read; SQLite checks every
// constraint again on the rows given. ORDER BY timestamp[, id] and ORDER BY id are given
// without a sort. Read-only.
#pragma once

#include <string>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Registers the module on `db` and creates temp.`name` over main.`blocks` (call_blocks or
// run_blocks), with main.`table`'s stored columns.
ingero::Status create_archive_table(Db& db, const std::string& name, const std::string& table,
                                    const std::string& blocks);

}  // namespace ingero::store

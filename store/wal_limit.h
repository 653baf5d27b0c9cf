// A write-ahead log held to a size: what `--max-db-size` needs to be a limit on the disk the
// trace takes, and not only on its database file.
#pragma once

#include <cstdint>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// On a writer's connection in WAL mode: the log is checkpointed once it holds about `bytes`
// (wal_autocheckpoint, in pages, at least 16) and cut back to `bytes` after each checkpoint
// (journal_size_limit), instead of SQLite's default of 4,000 pages kept for good.
ingero::Status limit_wal(Db& db, uint64_t bytes);

}  // namespace ingero::store

#include "store/read_snapshot.h"

#include <sqlite3.h>

#include "store/sqlite_db.h"

namespace ingero::store {

ReadSnapshot::ReadSnapshot(sqlite3* db) : db_(db) {
  bool busy = false;
  for (sqlite3_stmt* st = sqlite3_next_stmt(db, nullptr); st; st = sqlite3_next_stmt(db, st))
    busy = busy || sqlite3_stmt_busy(st);
  // A running statement holds a read transaction even in autocommit mode.
  was_open_ = busy || sqlite3_get_autocommit(db) == 0;
  began_ = !was_open_ && sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK;
}

ReadSnapshot::ReadSnapshot(Db& db) : ReadSnapshot(db.handle()) {}

ReadSnapshot::ReadSnapshot(Db& db, Adopt) : db_(db.handle()), began_(true) {}

bool in_transaction(Db& db) { return sqlite3_get_autocommit(db.handle()) == 0; }

ReadSnapshot::~ReadSnapshot() {
  // Refused only while a statement of the connection writes, which a read never starts.
  if (began_) (void)sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
}

}  // namespace ingero::store

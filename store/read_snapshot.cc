#include "store/read_snapshot.h"

#include <sqlite3.h>

#include "store/sqlite_db.h"

namespace ingero::store {

ReadSnapshot::ReadSnapshot(Db& db) : db_(db) {
  sqlite3* h = db.handle();
  bool busy = false;
  for (sqlite3_stmt* st = sqlite3_next_stmt(h, nullptr); st; st = sqlite3_next_stmt(h, st))
    busy = busy || sqlite3_stmt_busy(st);
  // A running statement holds a read transaction even in autocommit mode.
  was_open_ = busy || sqlite3_get_autocommit(h) == 0;
  began_ = !was_open_ && db.exec("BEGIN").ok();
}

ReadSnapshot::~ReadSnapshot() {
  if (!began_ || db_.exec("COMMIT").ok()) return;
  // A statement of the read still running (the COMMIT is then refused): the transaction only
  // read, so its statements are reset and it ends, rather than leave this connection on an
  // old state of the file for good.
  sqlite3* h = db_.handle();
  for (sqlite3_stmt* st = sqlite3_next_stmt(h, nullptr); st; st = sqlite3_next_stmt(h, st))
    if (sqlite3_stmt_busy(st)) sqlite3_reset(st);
  (void)db_.exec("COMMIT");
}

}  // namespace ingero::store

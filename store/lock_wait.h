// How long a connection waits for another connection's lock on its file, and what it says
// while it waits. Every connection ingero opens waits kBusyTimeoutMs (Db::open); a command that
// must have the file to itself for a moment (compact, whose writes need every reader of a file
// at rest to let go) waits longer and says so once.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <functional>
#include <string>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// What a statement waits for another connection's lock before it fails with SQLITE_BUSY.
inline constexpr int kBusyTimeoutMs = 5000;

// What follows SQLite's "database is locked": who may hold the file, and what to do. Empty for
// any other result code.
std::string busy_hint(int rc);

// PRAGMA wal_checkpoint(TRUNCATE) on `db`, waiting for readers as long as its connection's lock
// wait says: whether the whole log went back into the file (false where a reader, or another
// connection's lock, kept it); an Error for anything else (a full disk, an I/O error), which
// trying again does not mend.
ingero::Result<bool> checkpoint_truncate(Db& db);

// While it lives, statements on `db` wait up to `limit` for a lock, retrying every few
// milliseconds; `notice` is called once, when a wait first lasts `notice_after`. A wait ends
// at once on Ctrl-C (store/interrupt.h) or when `stop`, asked before each retry, says so (a
// statement's time limit, its cancellation). Restores the default wait when it goes.
class LockWait {
 public:
  LockWait(sqlite3* db, std::chrono::milliseconds limit, std::chrono::milliseconds notice_after,
           std::function<void()> notice, std::function<bool()> stop = nullptr);
  ~LockWait();
  LockWait(const LockWait&) = delete;
  LockWait& operator=(const LockWait&) = delete;

 private:
  static int on_busy(void* self, int tries);
  sqlite3* db_;
  std::chrono::milliseconds limit_, notice_after_;
  std::function<void()> notice_;
  std::function<bool()> stop_;
  std::chrono::steady_clock::time_point since_;
  bool noticed_ = false;
};

}  // namespace ingero::store

#include "store/lock_wait.h"

#include <thread>

#include "store/interrupt.h"

namespace ingero::store {

std::string busy_hint(int rc) {
  if ((rc & 0xff) != SQLITE_BUSY) return "";
  return "; another process has the file: a reader (explain, report, query, an MCP tool call) "
         "while this writes it, or ingero compact or a tracer ending its session while this "
         "reads it. Run this again once it is done";
}

ingero::Result<bool> checkpoint_truncate(Db& db) {
  // Its row: busy (1 where a reader kept it from the end of the log), frames, checkpointed.
  auto busy = db.query_int("PRAGMA wal_checkpoint(TRUNCATE)");
  if (!busy) {
    if ((sqlite3_extended_errcode(db.handle()) & 0xff) == SQLITE_BUSY) return false;
    return busy.error();
  }
  return busy->value_or(1) == 0;
}

LockWait::LockWait(sqlite3* db, std::chrono::milliseconds limit,
                   std::chrono::milliseconds notice_after, std::function<void()> notice,
                   std::function<bool()> stop)
    : db_(db),
      limit_(limit),
      notice_after_(notice_after),
      notice_(std::move(notice)),
      stop_(std::move(stop)) {
  sqlite3_busy_handler(db_, &LockWait::on_busy, this);
}

LockWait::~LockWait() { sqlite3_busy_timeout(db_, kBusyTimeoutMs); }

int LockWait::on_busy(void* self, int tries) {
  auto* w = static_cast<LockWait*>(self);
  if (InterruptOnSignal::signal()) return 0;  // Ctrl-C: stop waiting (store/interrupt.h)
  if (w->stop_ && w->stop_()) return 0;
  auto now = std::chrono::steady_clock::now();
  if (tries == 0) w->since_ = now;  // a new wait: each lock a statement asks for is one
  auto waited = now - w->since_;
  if (!w->noticed_ && waited >= w->notice_after_ && w->notice_) {
    w->noticed_ = true;
    w->notice_();
  }
  if (waited >= w->limit_) return 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(tries < 10 ? 2 : 20));
  return 1;
}

}  // namespace ingero::store

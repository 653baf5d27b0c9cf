// Ctrl-C, SIGTERM and SIGHUP while a command rewrites a trace in place (compact): the statement
// in progress is interrupted and rolled back, and the command says so and exits 128 + the
// signal. Killed by the signal instead (the default), it left FILE-journal beside the file, a
// hot journal that read-only readers cannot roll back: every one failed until compact ran again.
#pragma once

#include <csignal>

#include "store/sqlite_db.h"

namespace ingero::store {

class InterruptOnSignal {
 public:
  // From now on, SIGINT, SIGTERM and SIGHUP interrupt `db` (sqlite3_interrupt) instead of
  // killing the process. One at a time. The previous handlers come back when it goes.
  explicit InterruptOnSignal(Db& db);
  ~InterruptOnSignal();
  InterruptOnSignal(const InterruptOnSignal&) = delete;
  InterruptOnSignal& operator=(const InterruptOnSignal&) = delete;

  // The signal that came (0: none), since any InterruptOnSignal was made.
  static int signal();

 private:
  struct sigaction old_[3] = {};
};

}  // namespace ingero::store

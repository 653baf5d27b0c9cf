// What `ingero trace` does first with a file whose last session never ended (its tracer was
// killed, or the power went): ends that session and rebuilds what it left short, under the
// trace lock and before the new session adds to the file.
#pragma once

#include <ostream>
#include <string>

#include "store/sqlite_db.h"

namespace ingero::app {

// Ends every unfinished session of `db` (stopped at its last call, exit reason "unclean stop
// (repaired)"), folds the block it left filling and writes the per-second summaries it lacked
// (store::repair_unfinished). Says what it did on `err` (unless `quiet`). False, having said
// why, when the file could not be repaired: the tracer then refuses to write it.
bool repair_left_sessions(store::Db& db, const std::string& path, bool quiet, std::ostream& err);

}  // namespace ingero::app

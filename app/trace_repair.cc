#include "app/trace_repair.h"

#include "store/compact.h"

namespace ingero::app {

bool repair_left_sessions(store::Db& db, const std::string& path, bool quiet, std::ostream& err) {
  auto r = store::repair_unfinished(db);
  if (!r) {
    err << "ingero trace: " << path << " was left by a tracer that did not stop, and repairing it "
        << "failed: " << r.error().message << "\n";
    return false;
  }
  if (r->sessions_ended && !quiet)
    err << "ingero trace: " << path << ": " << r->sessions_ended
        << (r->sessions_ended == 1 ? " session" : " sessions")
        << " left by a tracer that did not stop cleanly, ended now: " << r->calls_summarised
        << " calls summarised, " << r->blocks_folded << " blocks folded\n";
  return true;
}

}  // namespace ingero::app

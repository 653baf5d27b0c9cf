// TraceWriter's upkeep while a session runs and its end: retention passes, the session's loss
// counters, and the final commit that leaves a self-contained file.
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>

#include "store/lock_wait.h"
#include "store/trace_writer.h"

namespace ingero::store {

ingero::Result<RetentionPass> TraceWriter::apply_retention(const RetentionPolicy& p, int64_t now_ns,
                                                           uint64_t budget) {
  if (auto st = commit(); !st) return st.error();
  auto pass = store::apply_retention(*db_, p, now_ns, budget);
  if (!pass) return pass.error();
  retention_deleted_ += pass->deleted;
  retention_unshipped_ += pass->unshipped;
  retention_calls_ += pass->calls;
  retention_events_ += pass->host_events;
  // In WAL mode the file shrinks when the freed pages are checkpointed: SQLite's automatic
  // checkpoint does it with the writes (an explicit one here cost tens of ms per pass).
  return pass;
}

ingero::Status TraceWriter::update_counters(const SessionCounters& c) {
  auto st = db_->prepare(
      "UPDATE sessions SET ringbuf_drops = ?, call_drops = ?, stack_drops = ?, host_drops = ?, "
      "sample_drops = ?, lost_calls = ?, calls_lost_at_exit = ?, unfinished_calls = ?, "
      "store_errors = ?, events_stored = ?, retention_calls = ?, retention_events = ? WHERE id = "
      "?");
  if (!st) return st.error();
  st->bind(1, int64_t(c.call_drops + c.stack_drops + c.host_drops + c.sample_drops))
      .bind(2, int64_t(c.call_drops))
      .bind(3, int64_t(c.stack_drops))
      .bind(4, int64_t(c.host_drops))
      .bind(5, int64_t(c.sample_drops))
      .bind(6, int64_t(c.lost_calls))
      .bind(7, int64_t(c.calls_lost_at_exit))
      .bind(8, int64_t(c.unfinished_calls))
      .bind(9, int64_t(failed_ + c.store_errors))
      .bind(10, int64_t(written_ - written_before_session_))
      .bind(11, int64_t(retention_calls_))
      .bind(12, int64_t(retention_events_))
      .bind(13, session_id_);
  if (auto r = st->step(); !r) return r.error();
  return {};
}

ingero::Status TraceWriter::end_session(const SessionEnd& end) {
  ingero::Status counted = update_counters(end.counters);
  auto st = db_->prepare(
      "UPDATE sessions SET stopped_at = ?, attached_probes = ?, bpf_stats = ?, exit_reason = ? "
      "WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, end.stopped_at_ns)
      .bind(2, int64_t(end.attached_probes))
      .bind(3, end.bpf_stats_json)
      .bind(4, end.exit_reason)
      .bind(5, session_id_);
  if (auto r = st->step(); !r) return r.error();
  return counted;
}

bool TraceWriter::checkpoint_whole() {
  sqlite3* h = db_->handle();
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(end_wait_ms_);
  sqlite3_busy_timeout(h, 100);  // a try every ~100 ms, up to the bound
  bool whole = false;
  while (true) {
    auto done = checkpoint_truncate(*db_);
    // An error is not a reader: trying again spun a core for the whole bound on a full disk.
    if (!done) {
      left_in_wal_why_ = done.error().message;
      break;
    }
    whole = *done;
    if (whole || std::chrono::steady_clock::now() >= until) break;
  }
  sqlite3_busy_timeout(h, kBusyTimeoutMs);
  return whole;
}

ingero::Status TraceWriter::finish(const SessionEnd& end) {
  // The block still filling is folded too, and every second summarised.
  ingero::Status result = commit_batch(true);
  // Events or summaries were lost to a full disk (or I/O): free the reserve so the session row
  // can still say how many, and when the session stopped. The seconds a failed COMMIT wrote
  // are back in the summarizer: they go into the space just freed.
  if ((failed_ || summaries_.open_seconds()) && !reserve_path_.empty()) {
    (void)::unlink(reserve_path_.c_str());
    if (summaries_.open_seconds() && begin_if_needed())
      if (summaries_.flush(*db_, INT64_MAX)) (void)commit();
  }
  if (auto st = end_session(end); !st && result) result = st;
  // The pages that folding and retention freed and no later row reused go back to the file
  // system (files created with incremental auto-vacuum).
  (void)db_->exec("PRAGMA incremental_vacuum");
  // Self-contained file: fold the WAL back in so the trace can be copied or opened from
  // read-only media. A reader in a read transaction (a report or an export still reading) holds
  // the log: wait for it, a bounded time, then leave the log beside the file and say so. The
  // journal mode changes only where no other connection has the file open; an emptied log
  // left beside the file holds nothing of the trace.
  left_in_wal_ = !checkpoint_whole();
  // The room set aside at open may be what the fold lacked on a full disk: freed, it is tried
  // again. The log was said to be left when the close's own fold, after the reserve went,
  // emptied it (a 2 MiB disk: no -wal beside the file, and a message naming one).
  if (left_in_wal_ && !reserve_path_.empty() && ::unlink(reserve_path_.c_str()) == 0) {
    left_in_wal_why_.clear();
    left_in_wal_ = !checkpoint_whole();
  }
  if (!left_in_wal_) (void)db_->exec("PRAGMA journal_mode = DELETE");
  if (!reserve_path_.empty()) (void)::unlink(reserve_path_.c_str());
  return result;
}

}  // namespace ingero::store

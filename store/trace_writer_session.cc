// TraceWriter's upkeep while a session runs and its end: retention and folding passes, the
// session's loss counters, and the final commit that leaves a self-contained file.
#include <unistd.h>

#include "store/archive_fold.h"
#include "store/fold_runs.h"
#include "store/trace_writer.h"

namespace ingero::store {

ingero::Result<RetentionPass> TraceWriter::apply_retention(const RetentionPolicy& p, int64_t now_ns,
                                                           uint64_t budget) {
  if (auto st = commit(); !st) return st.error();
  auto pass = store::apply_retention(*db_, p, now_ns, budget);
  if (!pass) return pass.error();
  retention_deleted_ += pass->deleted;
  retention_unshipped_ += pass->unshipped;
  // In WAL mode the file shrinks when the freed pages are checkpointed: SQLite's automatic
  // checkpoint does it with the writes (an explicit one here cost tens of ms per pass).
  return pass;
}

ingero::Status TraceWriter::summarise_before(int64_t before_ns) {
  if (summaries_.open_seconds()) {
    if (auto st = begin_if_needed(); !st) return st;
    if (auto st = summaries_.flush(*db_, before_ns); !st) return fail_batch(st.error());
  }
  return commit();
}

ingero::Result<FoldPass> TraceWriter::fold_calls(int64_t before_ns, int64_t now_ns, uint64_t budget,
                                                 int64_t through_id) {
  // Seconds 2 s behind the wall clock are complete even when no call came since.
  if (auto st = summarise_before(now_ns - kSummaryLagNs); !st) return st.error();
  // Only calls whose seconds are summarised: the summaries give each op's p95, and count the
  // calls that folding takes out of `events`.
  return store::fold_calls(*db_, std::min(before_ns, now_ns - kSummaryLagNs - 1000000000), budget,
                           &fold_limits_, through_id);
}

ingero::Result<Archived> TraceWriter::archive_rows(int64_t through_id,
                                                   std::optional<Folding> folding) {
  // Two blocks (8,192 rows, ~30 ms) per transaction: the writer's pause stays short.
  ArchiveOptions o{
      .blocks_per_batch = 2, .through_id = through_id, .whole_blocks = true, .one_batch = true};
  if (folding) {
    const int64_t now_ns = folding->now_ns, full_rows_ns = folding->full_rows_ns;
    // Folding needs each launch op's p95 from the summaries: calls of seconds summarised.
    const int64_t summarised = folding->final ? INT64_MAX : now_ns - kSummaryLagNs;
    if (auto st = summarise_before(summarised); !st) return st.error();
    if (auto dropped = drop_recent_blocks(*db_, now_ns - full_rows_ns); !dropped)
      return dropped.error();
    if (auto st = refresh_limits(*db_, archive_limits_, now_ns); !st) return st.error();
    o.fold = &archive_limits_;
    o.fold_before_ns = folding->final ? INT64_MAX : summarised - 1000000000;
    o.recent_from_ns = now_ns - full_rows_ns;
  } else if (auto st = commit(); !st) {
    return st.error();
  }
  auto calls = archive_calls(*db_, o);
  if (!calls || calls->rows) return calls;
  o.through_id = INT64_MAX;  // runs are not shipped, nor folded
  o.fold = nullptr;
  return archive_runs(*db_, o);
}

ingero::Status TraceWriter::update_counters(const SessionCounters& c) {
  auto st = db_->prepare(
      "UPDATE sessions SET ringbuf_drops = ?, call_drops = ?, stack_drops = ?, host_drops = ?, "
      "sample_drops = ?, lost_calls = ?, calls_lost_at_exit = ?, unfinished_calls = ?, "
      "store_errors = ?, events_stored = ? WHERE id = ?");
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
      .bind(11, session_id_);
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

ingero::Status TraceWriter::finish(const SessionEnd& end) {
  ingero::Status result = {};
  if (summaries_.open_seconds()) {
    if (auto st = begin_if_needed(); !st) result = st;
    if (auto st = summaries_.flush(*db_, INT64_MAX); !st && result) result = st;
  }
  if (auto st = commit(); !st && result) result = st;
  // Events or summaries were lost to a full disk (or I/O): free the reserve so the session row
  // can still say how many, and when the session stopped. The seconds a failed COMMIT wrote
  // are back in the summarizer: they go into the space just freed.
  if ((failed_ || summaries_.open_seconds()) && !reserve_path_.empty()) {
    (void)::unlink(reserve_path_.c_str());
    if (summaries_.open_seconds() && begin_if_needed())
      if (summaries_.flush(*db_, INT64_MAX)) (void)commit();
  }
  if (auto st = end_session(end); !st && result) result = st;
  // The index's sort spills to a temporary file past the page cache: with temp_store MEMORY
  // (right for a session's small temporary tables) its spill stays in memory too, ~16 bytes a
  // row, which for an hour of training is gigabytes.
  (void)db_->exec("PRAGMA temp_store = FILE");
  if (auto ix = db_->exec("CREATE INDEX IF NOT EXISTS idx_events_timestamp ON events(timestamp)");
      !ix && result)
    result = ix;
  // The pages that archiving and folding freed and no later row reused go back to the file
  // system (files created with incremental auto-vacuum; a no-op on others).
  (void)db_->exec("PRAGMA incremental_vacuum");
  // Self-contained file: fold the WAL back in so the trace can be copied or opened from
  // read-only media.
  (void)db_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
  (void)db_->exec("PRAGMA journal_mode = DELETE");
  if (!reserve_path_.empty()) (void)::unlink(reserve_path_.c_str());
  return result;
}

}  // namespace ingero::store

#include "store/untimed_durations.h"

#include "store/call_store.h"
#include "store/unsummarised_calls.h"

namespace ingero::store {

ingero::Result<UntimedDurations> UntimedDurations::load(Db& db) {
  UntimedDurations u;
  if (has_call_store(db)) {
    auto n = db.kept_int("SELECT count(*) FROM call_store WHERE untimed > 0");
    if (!n) return n.error();
    if (n->value_or(0) == 0) return u;
  } else {
    // A plain copy (export --format sqlite) keeps its untimed calls as rows (status 2) and its
    // runs' timed counts, beside the summaries: read as the file it was copied from (it read
    // every untimed launch as 0 ns). Files of schema 7 to 9 timed every call.
    if (!db.table_exists("call_seconds") || !db.column_exists("call_seconds", "timed", "main") ||
        !db.column_exists("call_runs", "timed_calls", "main"))
      return u;
    auto n = db.kept_int("SELECT EXISTS (SELECT 1 FROM main.call_seconds WHERE timed < calls)");
    if (!n) return n.error();
    if (n->value_or(0) == 0) return u;
  }
  u.any_ = true;
  auto st = db.prepare(
      "SELECT node, pid, source, op, sum(sum_ns), sum(timed) FROM call_seconds GROUP BY node, "
      "pid, source, op");
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    u.means_.add(st->text(0), uint32_t(st->int64(1)),
                 std::pair(int(st->int64(2)), int(st->int64(3))), uint64_t(st->int64(4)),
                 uint64_t(st->int64(5)));
  }
  // The calls of a session not ended that no summary counts yet, as compact will count them.
  auto rest =
      for_each_unsummarised_call(db, [&](std::string_view node, int64_t, const SummarizedCall& c) {
        if (c.timed)
          u.means_.add(std::string(node), c.pid, std::pair<int, int>(c.source, c.op), c.dur_ns, 1);
      });
  if (!rest) return rest.error();
  return u;
}

}  // namespace ingero::store

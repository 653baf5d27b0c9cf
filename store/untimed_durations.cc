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
  // (sum of the timed calls' durations, timed calls), by node, process and op, then by op.
  std::map<std::tuple<std::string, uint32_t, int, int>, std::pair<uint64_t, uint64_t>> totals;
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    auto& t = totals[{st->text(0), uint32_t(st->int64(1)), int(st->int64(2)), int(st->int64(3))}];
    t.first += uint64_t(st->int64(4));
    t.second += uint64_t(st->int64(5));
  }
  // The calls of a session not ended that no summary counts yet, as compact will count them.
  auto rest =
      for_each_unsummarised_call(db, [&](std::string_view node, int64_t, const SummarizedCall& c) {
        if (!c.timed) return;
        auto& t = totals[{std::string(node), c.pid, c.source, c.op}];
        t.first += c.dur_ns;
        ++t.second;
      });
  if (!rest) return rest.error();
  std::map<std::tuple<std::string, int, int>, std::pair<uint64_t, uint64_t>> op_totals;
  for (const auto& [k, t] : totals) {
    if (!t.second) continue;
    const auto& [node, pid, source, op] = k;
    u.by_process_[k] = t.first / t.second;
    auto& o = op_totals[{node, source, op}];
    o.first += t.first;
    o.second += t.second;
  }
  for (const auto& [k, t] : op_totals) u.by_op_[k] = t.first / t.second;
  return u;
}

uint64_t UntimedDurations::of(std::string_view node, uint32_t pid, int source, int op) const {
  if (auto it = by_process_.find(std::make_tuple(node, pid, source, op)); it != by_process_.end())
    return it->second;
  if (auto it = by_op_.find(std::make_tuple(node, source, op)); it != by_op_.end())
    return it->second;
  return 0;
}

}  // namespace ingero::store

#include "store/call_count_check.h"

#include <algorithm>
#include <set>

#include "engine/chain.h"
#include "store/call_archive.h"
#include "store/call_store.h"
#include "store/sql_reads_internal.h"

namespace ingero::store {

CallCountCheck::CallCountCheck(const EventFilter& f, std::pair<int64_t, int64_t> span) : f_(f) {
  from_open_ = f.from_ns <= span.first;
  to_open_ = f.to_ns >= span.second;
}

void CallCountCheck::flush() {
  if (cur_n_) seconds_[cur_].read += cur_n_;
  read_ += cur_n_;
  cur_n_ = 0;
}

void CallCountCheck::add_run(const engine::RunShape& r) {
  // Its calls started somewhere between its first start and its end.
  int64_t first = second_of(r.ts_ns), last = second_of(r.ts_ns + int64_t(r.span_ns));
  if (first == last && first == cur_) {
    cur_n_ += r.calls;
    return;
  }
  seconds_[first].read += r.calls;
  read_ += r.calls;
  for (int64_t s = first; s < last; ++s) {
    seconds_[s].joined = true;
    seconds_[s + 1];
  }
}

ingero::Error CallCountCheck::damaged(Db& db, const std::string& what) const {
  // Archived calls are found by their blocks' entries: a damaged time range in one hides the
  // block from a window as a damaged index hides rows.
  if (has_call_store(db))  // schema 10: blocks are found by their entries' time ranges
    return ingero::make_error(
        db.path() + ": damaged: " + what +
        " (a block of calls whose entry in call_store was lost or holds a damaged time range, or "
        "a damaged index idx_call_store_ts, hides its calls from a window without an error); "
        "run: "
        "sqlite3 -readonly " +
        db.path() + " 'PRAGMA quick_check' (REINDEX on a copy rebuilds the indexes)");
  std::string archive = has_call_archive(db) || has_run_archive(db)
                            ? ", as does an archive block whose entry (call_blocks, run_blocks) "
                              "holds a damaged time range"
                            : "";
  return ingero::make_error(db.path() + ": damaged: " + what +
                            " (a damaged time index, idx_events_timestamp, ends a read early "
                            "without an error" +
                            archive + "); run: sqlite3 -readonly " + db.path() +
                            " 'PRAGMA quick_check' (REINDEX on a copy rebuilds the indexes)");
}

ingero::Status CallCountCheck::verify(Db& db) {
  flush();
  if (!db.table_exists("events")) return {};
  if (!db.table_exists("call_seconds")) return verify_rows(db);
  // The whole seconds of the window, after the last retention cut.
  int64_t lo = from_open_ || f_.from_ns == INT64_MIN ? INT64_MIN : second_of(f_.from_ns - 1) + 1;
  int64_t hi = to_open_ || f_.to_ns == INT64_MAX ? INT64_MAX : second_of(f_.to_ns + 1) - 1;
  if (db.table_exists("retention_state")) {
    auto cut = db.query_int("SELECT max(deleted_before) FROM retention_state");
    if (!cut) return cut.error();
    if (*cut && **cut > INT64_MIN) lo = std::max(lo, second_of(**cut - 1) + 1);
  }
  if (lo > hi) return {};
  return verify_summaries(db, lo, hi);
}

ingero::Status CallCountCheck::verify_summaries(Db& db, int64_t lo, int64_t hi) {
  constexpr int64_t kMaxSecond = INT64_MAX / kSecond - 1;
  auto ns = [](int64_t s) {
    return s <= -kMaxSecond ? INT64_MIN : s >= kMaxSecond ? INT64_MAX : s * kSecond;
  };
  std::string sql =
      "SELECT c.timestamp, sum(c.calls) FROM call_seconds c JOIN sources s ON s.id = c.source "
      "AND s.vendor <> 'host' JOIN ops o ON o.source_id = c.source AND o.op_id = c.op "
      "WHERE c.timestamp BETWEEN " +
      std::to_string(ns(lo)) + " AND " + std::to_string(ns(hi));
  if (f_.pid) sql += " AND c.pid = " + std::to_string(*f_.pid);
  if (f_.node) sql += " AND c.node = " + sql_quote(*f_.node);
  auto st = db.prepare(sql + " GROUP BY c.timestamp");
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    seconds_[second_of(st->int64(0))].summarized += uint64_t(st->int64(1));
  }
  // Seconds a run spans are one group; a group reaching outside [lo, hi] is not compared.
  uint64_t read = 0, summarized = 0, short_by = 0;
  int64_t group_start = 0, first_short = INT64_MIN;
  bool open = false, inside = true;
  for (const auto& [s, x] : seconds_) {
    if (!open) {
      group_start = s;
      read = summarized = 0;
      inside = true;
      open = true;
    }
    read += x.read;
    summarized += x.summarized;
    inside = inside && s >= lo && s <= hi;
    if (x.joined) continue;
    open = false;
    if (inside && read < summarized) {
      short_by += summarized - read;
      if (first_short == INT64_MIN) first_short = group_start;
    }
  }
  if (!short_by) return {};
  // Calls the tracer summarised whose rows a failed write lost (a full disk) are known losses,
  // counted in the sessions, not damage.
  if (db.column_exists("sessions", "store_errors")) {
    std::string lost = "SELECT coalesce(sum(store_errors), 0) FROM sessions";
    if (f_.node) lost += " WHERE node = " + sql_quote(*f_.node);
    auto n = db.query_int(lost);
    if (!n) return n.error();
    if (short_by <= uint64_t(n->value_or(0))) return {};
  }
  return damaged(db, std::to_string(short_by) +
                         " calls counted by the file's per-second summaries were not read, the "
                         "first in the second from " +
                         engine::format_wall(ns(first_short)));
}

ingero::Status CallCountCheck::verify_rows(Db& db) {
  // Files before the summaries: the window's call rows counted along the table, not the index.
  if (!db.column_exists("sources", "vendor")) return {};
  std::set<std::pair<int64_t, int64_t>> call_ops;
  {
    auto st = db.prepare(
        "SELECT s.id, o.op_id FROM sources s JOIN ops o ON o.source_id = s.id WHERE s.vendor <> "
        "'host'");
    if (!st) return st.error();
    while (true) {
      auto r = st->step();
      if (!r) return r.error();
      if (!*r) break;
      call_ops.emplace(st->int64(0), st->int64(1));
    }
  }
  std::string sql = "SELECT source, op, count(*) FROM events NOT INDEXED WHERE timestamp BETWEEN " +
                    std::to_string(f_.from_ns) + " AND " + std::to_string(f_.to_ns);
  if (f_.pid) sql += " AND pid = " + std::to_string(*f_.pid);
  if (f_.node && db.column_exists("events", "node")) sql += " AND node = " + sql_quote(*f_.node);
  auto st = db.prepare(sql + " GROUP BY source, op");
  if (!st) return st.error();
  uint64_t rows = 0;
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    if (call_ops.count({st->int64(0), st->int64(1)})) rows += uint64_t(st->int64(2));
  }
  if (read_ >= rows) return {};
  return damaged(db, "the window holds " + std::to_string(rows) + " calls but " +
                         std::to_string(read_) + " were read");
}

ingero::Status verify_every_call(Db& db) {
  StringPool strings;
  EventFilter every;
  CallCountCheck count(every, {INT64_MIN, INT64_MAX});
  auto st = reads::merge_rows_and_runs(
      db, strings, every, INT64_MIN,
      [&](const hal::Event& e) {
        count.add(int64_t(e.ts_ns));
        return true;
      },
      [&](const engine::CallRun& r) {
        count.add_run(r);
        return true;
      });
  return st ? count.verify(db) : st;
}

}  // namespace ingero::store

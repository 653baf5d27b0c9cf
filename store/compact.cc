#include "store/compact.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <tuple>

#include "engine/quantile_sketch.h"
#include "store/call_block.h"
#include "store/call_count_check.h"
#include "store/call_store.h"
#include "store/call_summaries.h"
#include "store/file_access.h"
#include "store/interrupt.h"
#include "store/lock_wait.h"
#include "store/row_block.h"
#include "store/schema.h"
#include "store/sketch_sql.h"
#include "store/sql_reads_internal.h"
#include "store/tiers.h"
#include "store/unsummarised_calls.h"

namespace ingero::store {
namespace {

constexpr int64_t kSecond = 1000000000;

// The launch ops (source, op) of the file's dictionary.
ingero::Result<std::set<std::pair<int, int>>> launch_ops(Db& db) {
  std::set<std::pair<int, int>> out;
  auto st = db.prepare("SELECT source_id, op_id FROM ops WHERE kind = 'launch'");
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    out.insert({int(st->int64(0)), int(st->int64(1))});
  }
  return out;
}

// Each (session, pid, launch op)'s fold limit from the summaries' sketches, as the writer's
// own would have been at the session's end.
using Limits = std::map<std::tuple<int64_t, uint32_t, int, int>, int64_t>;
ingero::Result<Limits> limits_from_summaries(Db& db, const std::set<std::pair<int, int>>& ops) {
  std::map<std::tuple<int64_t, uint32_t, int, int>, engine::QuantileSketch> sketches;
  auto st = db.prepare("SELECT session_id, pid, source, op, sketch FROM call_seconds");
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    int source = int(st->int64(2)), op = int(st->int64(3));
    if (!ops.count({source, op})) continue;
    auto sk = sketch_column(st->get(), 4);
    if (!sk) return ingero::make_error(db.path() + ": a damaged call_seconds sketch");
    sketches[{st->int64(0), uint32_t(st->int64(1)), source, op}].merge(*sk);
  }
  Limits out;
  for (const auto& [k, sk] : sketches)
    if (!sk.empty()) out[k] = int64_t(double(sk.quantile(0.95)) * kKeepAboveP95Share);
  return out;
}

// Folds the blocks an unfinished session left filling, and (`all`) those never folded
// (written with --keep-all, or before a process's launch limits were known).
ingero::Status fold_blocks(Db& db, const std::set<std::pair<int, int>>& ops, bool all,
                           Repaired& out) {
  auto tails = db.prepare(std::string("SELECT id, session_id FROM call_store WHERE kept IS NULL") +
                          (all ? " OR (folded = 0 AND full IS NOT NULL AND kept > 0)" : ""));
  if (!tails) return tails.error();
  std::vector<std::pair<int64_t, int64_t>> todo;
  while (true) {
    auto r = tails->step();
    if (!r) return r.error();
    if (!*r) break;
    todo.emplace_back(tails->int64(0), tails->int64(1));
  }
  if (todo.empty()) return {};
  auto limits = limits_from_summaries(db, ops);
  if (!limits) return limits.error();
  auto upd = db.prepare(
      "UPDATE call_store SET kept = ?, runs = ?, folded = ?, kept_data = ?, run_data = ? WHERE "
      "id = ?");
  if (!upd) return upd.error();
  for (auto [id, session] : todo) {
    auto rows = decode_full(db, id);
    if (!rows) return rows.error();
    CallBlock b;
    if (auto st = b.add_decoded(*rows, [&](int s, int o) { return ops.count({s, o}) > 0; }); !st)
      return ingero::make_error(db.path() + ": call block " + std::to_string(id) + ": " +
                                st.error().message);
    FoldedCalls f;
    int64_t sid = session;
    b.fold(
        [&](uint32_t pid, int s, int o) -> std::optional<int64_t> {
          auto it = limits->find({sid, pid, s, o});
          if (it == limits->end()) return std::nullopt;
          return it->second;
        },
        f);
    std::string kept, runs;  // none when folding left the block whole (as the writer does)
    upd->reset();
    sqlite3_clear_bindings(upd->get());
    upd->bind(1, int64_t(f.kept_rows)).bind(2, int64_t(f.runs.rows())).bind(3, int64_t(f.folded));
    if (f.folded) {
      kept = f.kept.encode();
      runs = f.runs.encode();
      if (kept.empty() || runs.empty()) return ingero::make_error("compressing a block failed");
      sqlite3_bind_blob(upd->get(), 4, kept.data(), int(kept.size()), SQLITE_STATIC);
      sqlite3_bind_blob(upd->get(), 5, runs.data(), int(runs.size()), SQLITE_STATIC);
    }
    upd->bind(6, id);
    if (auto r = upd->step(); !r) return r.error();
    ++out.blocks_folded;
  }
  return {};
}

ingero::Status fold_tails(Db& db, const std::set<std::pair<int, int>>& ops, Repaired& out) {
  return fold_blocks(db, ops, false, out);
}

// Writes the summaries of the seconds of unfinished sessions that have none: every call of the
// session from the second after its last summarised one (store/unsummarised_calls.h).
ingero::Status summarise_rest(Db& db, Repaired& out) {
  CallSummarizer sums;
  auto st = for_each_unsummarised_call(
      db, [&](std::string_view node, int64_t session, const SummarizedCall& c) {
        sums.add(node, session, c);
        ++out.calls_summarised;
      });
  if (!st) return st;
  out.seconds_rebuilt += sums.open_seconds();
  return sums.flush(db, INT64_MAX);
}

// Whether the rows' ids and timestamps lie in the entry's ranges (columns 3 to 6 of `entry`)
// and, `exact` (a block's every call or event), span them: an entry whose start moved to 0 said
// "events over 1795875763 s" in explain, exit 0. The calls a block kept beside its runs may be
// none (every call folded): none lies outside.
bool rows_in_range(const RowBlock& rows, const Stmt& entry, bool exact) {
  if (rows.rows() == 0) return !exact;
  int id = -1, ts = -1;
  for (size_t c = 0; c < rows.columns().size(); ++c) {
    if (rows.columns()[c] == "id") id = int(c);
    if (rows.columns()[c] == "timestamp") ts = int(c);
  }
  if (id < 0 || ts < 0) return false;
  int64_t min_id = INT64_MAX, max_id = INT64_MIN, min_ts = INT64_MAX, max_ts = INT64_MIN;
  for (size_t r = 0; r < rows.rows(); ++r) {
    int64_t i = rows.int64(r, size_t(id)), t = rows.int64(r, size_t(ts));
    min_id = std::min(min_id, i);
    max_id = std::max(max_id, i);
    min_ts = std::min(min_ts, t);
    max_ts = std::max(max_ts, t);
  }
  if (exact)
    return min_id == entry.int64(3) && max_id == entry.int64(4) && min_ts == entry.int64(5) &&
           max_ts == entry.int64(6);
  return min_id >= entry.int64(3) && max_id <= entry.int64(4) && min_ts >= entry.int64(5) &&
         max_ts <= entry.int64(6);
}

constexpr const char* kCannotMend =
    "; compact cannot mend a damaged block, and left the file as it was";
// Every block the file holds decodes, to as many rows as its entry says. compact cannot mend a
// damaged block, which every reader refuses: going on, it said "0 of N calls" folded, exit 0,
// and the file was no more readable than before.
ingero::Status check_blocks(Db& db) {
  struct Form {
    const char *table, *data, *rows, *what;
  };
  static constexpr Form kForms[] = {{"call_store", "full", "calls", "its calls"},
                                    {"call_store", "kept_data", "kept", "its calls kept"},
                                    {"call_store", "run_data", "runs", "its runs"},
                                    {"host_store", "data", "events", "its events"}};
  // The frame and its checksum, its id and time columns read (the rest skipped): the rows must
  // lie in the range the entry gives, since blocks are chosen and merged by their entries.
  const std::vector<std::string> range_columns = {"id", "timestamp"};
  RowBlock rows;
  for (const Form& f : kForms) {
    if (!db.table_exists(f.table)) continue;
    auto st = db.prepare(std::string("SELECT id, ") + f.data + ", " + f.rows +
                         ", first_id, last_id, first_ts, last_ts FROM " + f.table + " WHERE " +
                         f.data + " IS NOT NULL ORDER BY id");
    if (!st) return st.error();
    while (true) {
      auto r = st->step();
      if (!r) return r.error();
      if (!*r) break;
      std::string_view data(static_cast<const char*>(sqlite3_column_blob(st->get(), 1)),
                            size_t(sqlite3_column_bytes(st->get(), 1)));
      std::string name = std::string(f.table == std::string_view("host_store") ? "host" : "call") +
                         " block " + std::to_string(st->int64(0)) + " (" + f.what + ")";
      std::string why;
      if (auto d = RowBlock::decode_into(data, rows, 64u << 20, &range_columns); !d)
        why = d.error().message;
      else if (int64_t(rows.rows()) != st->int64(2))
        why = "it holds " + std::to_string(rows.rows()) + " rows where its entry says " +
              std::to_string(st->int64(2));
      else if (f.rows != std::string_view("runs") &&
               !rows_in_range(rows, *st, f.rows != std::string_view("kept")))
        why = "its rows do not lie in the id and time range its entry says";
      if (!why.empty())
        return ingero::make_error(db.path() + ": " + name + ": " + why + kCannotMend);
    }
  }
  if (auto counts = check_block_counts(db); !counts)
    return ingero::make_error(counts.error().message + kCannotMend);
  return {};
}

// Every call the file's per-second summaries count is read, as the readers read them: going
// on past a lost block, compact said "0 of N calls" folded, exit 0, on a file explain refused.
ingero::Status check_call_counts(Db& db) {
  if (auto st = verify_every_call(db); !st)
    return ingero::make_error(st.error().message + kCannotMend);
  return {};
}

}  // namespace

ingero::Result<Repaired> repair_unfinished(Db& db) {
  Repaired out;
  if (!has_call_store(db)) return out;
  auto ids = unended_sessions(db);
  if (!ids) return ids.error();
  const std::vector<int64_t>& unfinished = *ids;
  auto tail = db.query_int("SELECT count(*) FROM call_store WHERE kept IS NULL");
  if (!tail) return tail.error();
  if (unfinished.empty() && tail->value_or(0) == 0) return out;
  auto ops = launch_ops(db);
  if (!ops) return ops.error();
  if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st.error();
  auto fail = [&](const ingero::Error& e) {
    (void)db.exec("ROLLBACK");
    return e;
  };
  // Summaries first: folding the tails reads the launches' limits from them.
  if (auto st = summarise_rest(db, out); !st) return fail(st.error());
  if (auto st = fold_tails(db, *ops, out); !st) return fail(st.error());
  // Ended: a session with no stop time reads as still being written. It stopped at its last
  // call or host event, and says how; the events it stored are those its blocks hold and those
  // retention deleted (its own count was last written at a commit before the kill, or never).
  for (int64_t s : unfinished) {
    std::string id = std::to_string(s);
    if (auto st = db.exec(
            "UPDATE sessions SET stopped_at = max(started_at, coalesce((SELECT max(end_ts) FROM "
            "call_store WHERE session_id = " +
            id +
            "), 0), coalesce((SELECT max(end_ts) FROM host_store WHERE "
            "session_id = " +
            id +
            "), 0)), exit_reason = 'unclean stop (repaired)', events_stored = "
            "coalesce((SELECT sum(calls) FROM call_store WHERE session_id = " +
            id + "), 0) + coalesce((SELECT sum(events) FROM host_store WHERE session_id = " + id +
            "), 0) + coalesce(retention_calls, 0) + coalesce(retention_events, 0) WHERE id = " +
            id);
        !st)
      return fail(st.error());
  }
  if (auto st = db.exec("COMMIT"); !st) return fail(st.error());
  out.sessions_ended = unfinished.size();
  return out;
}

ingero::Result<uint64_t> fold_unfolded(Db& db) {
  auto ops = launch_ops(db);
  if (!ops) return ops.error();
  Repaired r;
  if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st.error();
  if (auto st = fold_blocks(db, *ops, true, r); !st) {
    (void)db.exec("ROLLBACK");
    return st.error();
  }
  if (auto st = db.exec("COMMIT"); !st) return st.error();
  return r.blocks_folded;
}

ingero::Result<Compacted> compact_trace(const std::string& path, int64_t full_rows_ns,
                                        std::span<const hal::SqlView> views,
                                        const CompactWait& wait) {
  if (auto st = roll_back_interrupted_write(path); !st) return st.error();
  {  // classified read-only: a file refused is left byte for byte as it was
    auto ro = Db::open(path, Db::Mode::kReadOnly);
    if (!ro) return ro.error();
    auto info = inspect(**ro);
    if (!info) return info.error();
    if (info->format == TraceFormat::kLegacyGo)
      return ingero::make_error(path + ": a trace from the original Go implementation (schema " +
                                info->legacy_version + "); it is read-only here");
    if (auto st = check_tables(**ro, *info); !st) return st.error();
    // Pages SQLite cannot read back: compact would rewrite around them (a flipped byte was
    // VACUUMed into a smaller file, still damaged, exit 0), as `trace` refuses such a file.
    if (auto qc = check_intact(**ro); !qc) return qc.error();
    if (info->format != TraceFormat::kIngero || !has_call_store(**ro))
      return ingero::make_error(path + ": not a trace of schema " + std::to_string(kSchemaVersion) +
                                " (convert it first)");
    if (auto st = check_blocks(**ro); !st) return st.error();
    if (auto st = check_call_counts(**ro); !st) return st.error();
  }
  auto db = Db::open(path, Db::Mode::kReadWrite);
  if (!db) return db.error();
  Db& d = **db;
  LockWait waits(d.handle(), wait.limit, std::chrono::seconds(1), wait.notice);
  // A signal interrupts the statement in progress, which SQLite rolls back; between
  // statements, the next stage is not begun.
  InterruptOnSignal interruptible(d);
  auto stop = [] {
    return ingero::make_error("interrupted by signal " +
                              std::to_string(InterruptOnSignal::signal()));
  };
  if (auto st = migrate(d, views); !st) return st.error();
  Compacted out;
  if (InterruptOnSignal::signal()) return stop();
  auto rep = repair_unfinished(d);
  if (!rep) return rep.error();
  out.repaired = *rep;
  if (InterruptOnSignal::signal()) return stop();
  auto refolded = fold_unfolded(d);
  if (!refolded) return refolded.error();
  out.blocks_refolded = *refolded;
  auto last = d.query_int("SELECT max(end_ts) FROM call_store");
  if (!last) return last.error();
  int64_t before = last->value_or(0) - full_rows_ns;
  std::string doomed =
      "full IS NOT NULL AND kept_data IS NOT NULL AND end_ts <= " + std::to_string(before);
  {  // statements finished before VACUUM, which refuses to run beside one in progress
    auto st = d.prepare("SELECT count(*), coalesce(sum(calls), 0) FROM call_store WHERE " + doomed);
    if (!st) return st.error();
    if (auto r = st->step(); !r) return r.error();
    out.blocks = uint64_t(st->int64(0));
    out.folded_calls = uint64_t(st->int64(1));
  }
  if (auto s = d.exec("UPDATE call_store SET full = NULL WHERE " + doomed); !s) return s.error();
  {
    auto totals = d.prepare(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(CASE WHEN full IS NULL THEN kept ELSE 0 "
        "END), 0) FROM call_store");
    if (!totals) return totals.error();
    if (auto r = totals->step(); !r) return r.error();
    out.calls = uint64_t(totals->int64(0));
    out.kept_rows = uint64_t(totals->int64(1));
  }
  // The file rewritten to its size: the blocks' old `full` forms go back to the file system.
  if (InterruptOnSignal::signal()) return stop();
  if (auto s = d.exec("VACUUM"); !s) return s.error();
  return out;
}

}  // namespace ingero::store

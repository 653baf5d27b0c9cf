#include "store/retention.h"

#include <sqlite3.h>

#include <algorithm>
#include <optional>
#include <string>

namespace ingero::store {
namespace {

// The time-series tables and their time column; rows arrive nearly in time order, so rowid
// order is the age order the batches follow (no time index is needed while writing).
constexpr const char* kTables[] = {"events",          "system_snapshots", "process_stats",
                                   "device_counters", "call_seconds",     "call_runs",
                                   "device_samples",  "device_events"};

ingero::Result<int64_t> scalar(Db& db, const std::string& sql) {
  auto st = db.prepare(sql);
  if (!st) return st.error();
  auto r = st->step();
  if (!r) return r.error();
  return *r && !st->is_null(0) ? st->int64(0) : 0;
}

// Archived calls and runs (store/call_archive.h): blocks, each with its rows' time range.
constexpr const char* kBlockTables[] = {"call_blocks", "run_blocks"};

// Over the size: the time before which a pass deletes about a tenth of the oldest data, the
// least of a tenth of the events (the rowid span counts them without a scan: rows only ever
// go from the start) and a tenth of each table's blocks, so a small overshoot costs a small
// deletion. 0: nothing to delete.
ingero::Result<int64_t> size_cut(Db& db, uint64_t budget) {
  std::optional<int64_t> cut;
  auto take = [&](const ingero::Result<std::optional<int64_t>>& t) {
    if (t && t->has_value()) cut = cut ? std::min(*cut, **t + 1) : **t + 1;
  };
  if (db.table_exists("events")) {
    auto span = scalar(db, "SELECT max(rowid) - min(rowid) + 1 FROM events");
    if (!span) return span.error();
    uint64_t step = std::min<uint64_t>(budget, std::max<int64_t>(1, *span / 10));
    auto t = db.query_int("SELECT timestamp FROM events ORDER BY rowid LIMIT 1 OFFSET " +
                          std::to_string(step - 1));
    if (!t) return t.error();
    take(t);
  }
  for (const char* table : kBlockTables) {
    if (!db.table_exists(table)) continue;
    auto n = scalar(db, std::string("SELECT count(*) FROM ") + table);
    if (!n) return n.error();
    if (*n == 0) continue;
    auto t = db.query_int(std::string("SELECT last_ts FROM ") + table +
                          " ORDER BY first_ts LIMIT 1 OFFSET " + std::to_string(*n / 10));
    if (!t) return t.error();
    take(t);
  }
  return cut.value_or(0);
}

// Deletes up to 64 blocks of `table` whose rows all started before `cut`, adding their rows to
// `out` (those above `shipped_through` to its unshipped).
ingero::Status delete_blocks(Db& db, const char* table, int64_t cut,
                             std::optional<int64_t> shipped_through, RetentionPass& out) {
  // first_ts < cut as well (implied): the candidates come from idx_*_ts, not a scan of blocks.
  std::string doomed = std::string("SELECT id FROM ") + table + " WHERE first_ts < " +
                       std::to_string(cut) + " AND last_ts < " + std::to_string(cut) +
                       " ORDER BY first_ts LIMIT 64";
  auto rows = scalar(db, std::string("SELECT coalesce(sum(rows), 0) FROM ") + table +
                             " WHERE id IN (" + doomed + ")");
  if (!rows) return rows.error();
  if (shipped_through) {
    auto n =
        scalar(db, std::string("SELECT coalesce(sum(rows), 0) FROM ") + table + " WHERE id IN (" +
                       doomed + ") AND last_id > " + std::to_string(*shipped_through));
    if (!n) return n.error();
    out.unshipped += uint64_t(*n);
  }
  if (auto st = db.exec(std::string("DELETE FROM ") + table + " WHERE id IN (" + doomed + ")"); !st)
    return st;
  if (sqlite3_changes(db.handle()) == 64) out.more = true;
  out.deleted += uint64_t(*rows);
  return {};
}

}  // namespace

ingero::Result<uint64_t> used_bytes(Db& db) {
  auto pages = scalar(db, "PRAGMA page_count");
  if (!pages) return pages.error();
  auto free = scalar(db, "PRAGMA freelist_count");
  if (!free) return free.error();
  auto size = scalar(db, "PRAGMA page_size");
  if (!size) return size.error();
  return uint64_t(*pages - *free) * uint64_t(*size);
}

ingero::Result<RetentionPass> apply_retention(Db& db, const RetentionPolicy& p, int64_t now_ns,
                                              uint64_t budget) {
  RetentionPass out;
  if (!p.active()) return out;
  auto used = used_bytes(db);
  if (!used) return used.error();
  // The newest time any table may keep: by age, and, over the size, the time of the oldest
  // `budget` events (a pass frees about that much; the next pass checks again).
  int64_t cut = p.retain_ns > 0 ? now_ns - p.retain_ns : INT64_MIN;
  if (p.max_bytes && *used > p.max_bytes) {
    auto by_size = size_cut(db, budget);
    if (!by_size) return by_size.error();
    if (*by_size) cut = std::max(cut, *by_size);
  }
  if (cut == INT64_MIN) return out;
  if (auto st = db.exec("BEGIN"); !st) return st.error();
  for (const char* table : kTables) {
    if (!db.table_exists(table)) continue;
    // The newest row stays, whatever its age: SQLite gives the next row max(rowid) + 1, so an
    // emptied table would hand out its ids again, below a shipper's resume point.
    std::string doomed = std::string("SELECT rowid FROM ") + table + " WHERE timestamp < " +
                         std::to_string(cut) + " AND rowid < (SELECT max(rowid) FROM " + table +
                         ") ORDER BY rowid LIMIT " + std::to_string(budget);
    if (auto s = p.shipped_through.find(table); s != p.shipped_through.end()) {
      auto n = scalar(
          db, "SELECT count(*) FROM (" + doomed + ") WHERE rowid > " + std::to_string(s->second));
      if (!n) {
        (void)db.exec("ROLLBACK");
        return n.error();
      }
      out.unshipped += uint64_t(*n);
    }
    std::string sql = std::string("DELETE FROM ") + table + " WHERE rowid IN (" + doomed + ")";
    if (auto st = db.exec(sql); !st) {
      (void)db.exec("ROLLBACK");
      return st.error();
    }
    uint64_t n = uint64_t(sqlite3_changes(db.handle()));
    out.deleted += n;
    if (n == budget) out.more = true;
  }
  for (const char* table : kBlockTables) {
    if (!db.table_exists(table)) continue;
    std::optional<int64_t> through;
    if (auto s = p.shipped_through.find("events");
        s != p.shipped_through.end() && std::string_view(table) == "call_blocks")
      through = s->second;
    if (auto st = delete_blocks(db, table, cut, through, out); !st) {
      (void)db.exec("ROLLBACK");
      return st.error();
    }
  }
  // Copies of rows (store/archive_fold.h) of calls past the policy go with their blocks; they
  // are not more calls, and are not counted.
  if (db.table_exists("recent_blocks")) {
    std::string doomed = "SELECT id FROM recent_blocks WHERE first_ts < " + std::to_string(cut) +
                         " AND last_ts < " + std::to_string(cut);
    if (auto st = db.exec("DELETE FROM recent_folds WHERE block_id IN (" + doomed +
                          ");\nDELETE FROM recent_blocks WHERE id IN (" + doomed + ");\n");
        !st) {
      (void)db.exec("ROLLBACK");
      return st.error();
    }
  }
  // Readers compare the calls they read with the per-second summaries (store/call_count_check.h):
  // before this time, rows and summaries went in separate batches and may disagree.
  if (out.deleted) {
    std::string sql =
        "CREATE TABLE IF NOT EXISTS retention_state (id INTEGER PRIMARY KEY CHECK (id = 1), "
        "deleted_before INTEGER NOT NULL); INSERT INTO retention_state (id, deleted_before) "
        "VALUES (1, " +
        std::to_string(cut) +
        ") ON CONFLICT (id) DO UPDATE SET deleted_before = max(deleted_before, "
        "excluded.deleted_before)";
    if (auto st = db.exec(sql); !st) {
      (void)db.exec("ROLLBACK");
      return st.error();
    }
  }
  if (auto st = db.exec("COMMIT"); !st) {
    (void)db.exec("ROLLBACK");
    return st.error();
  }
  // Hand the freed pages back (files created with auto_vacuum = INCREMENTAL; a no-op on others).
  // At most 512 pages (8 MiB) a pass: vacuum moves pages, and its cost grows with them.
  (void)db.exec("PRAGMA incremental_vacuum(512)");
  auto after = used_bytes(db);
  if (!after) return after.error();
  out.used_bytes = *after;
  if (p.max_bytes && *after > p.max_bytes && out.deleted) out.more = true;
  return out;
}

}  // namespace ingero::store

#include "store/retention.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "store/archive_scan.h"
#include "store/call_store.h"
#include "store/host_store.h"
#include "store/lock_wait.h"

namespace ingero::store {
namespace {

// The time-series tables of rows and their time column; rows arrive nearly in time order, so
// rowid order is the age order the batches follow.
constexpr const char* kTables[] = {"system_snapshots", "process_stats",  "device_counters",
                                   "call_seconds",     "device_samples", "device_events"};

// The tables of blocks: of calls (store/call_store.h) and of host events (store/host_store.h).
struct BlockStore {
  const char* table;
  const char* count;  // the column counting a block's events
  const BlockForm& form;
  bool calls;
};
const BlockStore& call_blocks() {
  static const BlockStore s{"call_store", "calls", sql_calls_form(), true};
  return s;
}
const BlockStore& host_blocks() {
  static const BlockStore s{"host_store", "events", host_form(), false};
  return s;
}

ingero::Result<int64_t> scalar(Db& db, const std::string& sql) {
  auto st = db.prepare(sql);
  if (!st) return st.error();
  auto r = st->step();
  if (!r) return r.error();
  return *r && !st->is_null(0) ? st->int64(0) : 0;
}

// Over the size: the time before which a pass deletes the oldest `share` of the data (at
// least a tenth, so that a file just over its limit is not trimmed a sliver at every commit):
// the least of that share of the blocks of calls and of host events. 0: nothing to delete.
ingero::Result<int64_t> size_cut(Db& db, double share) {
  share = std::clamp(share, 0.1, 1.0);
  std::optional<int64_t> cut;
  for (const BlockStore* s : {&call_blocks(), &host_blocks()}) {
    std::string table = s->table;
    auto n = scalar(db, "SELECT count(*) FROM " + table);
    if (!n) return n.error();
    if (*n <= 1) continue;
    auto t = db.query_int("SELECT end_ts FROM " + table + " ORDER BY first_ts LIMIT 1 OFFSET " +
                          std::to_string(std::min<int64_t>(*n - 1, int64_t(double(*n) * share))));
    if (!t) return t.error();
    if (t->has_value()) cut = cut ? std::min(*cut, **t + 1) : **t + 1;
  }
  return cut.value_or(0);
}

// Deletes up to 64 blocks of `s` whose events all ended before `cut` (never the newest block:
// the writer's next ids follow the greatest left), adding their events to `out` (those above
// `shipped_through` to its unshipped).
ingero::Status delete_blocks(Db& db, const BlockStore& s, int64_t cut,
                             std::optional<int64_t> shipped_through, RetentionPass& out) {
  std::string table = s.table, count = s.count;
  // first_ts < cut as well (implied): the candidates come from the index on first_ts.
  std::string doomed = "SELECT id FROM " + table + " WHERE first_ts < " + std::to_string(cut) +
                       " AND end_ts < " + std::to_string(cut) + " AND id < (SELECT max(id) FROM " +
                       table + ") ORDER BY first_ts LIMIT 64";
  auto st = db.prepare("SELECT coalesce(sum(" + count + "), 0), min(first_ts) FROM " + table +
                       " WHERE id IN (" + doomed + ")");
  if (!st) return st.error();
  if (auto r = st->step(); !r) return r.error();
  uint64_t events = uint64_t(st->int64(0));
  if (events && !st->is_null(1))
    out.first_ts = out.first_ts ? std::min(out.first_ts, st->int64(1)) : st->int64(1);
  if (shipped_through) {
    // Blocks wholly above the shipper's point, and the calls above it of one across it (ids
    // of calls and host events interleave: its calls are counted from its rows).
    std::string through = std::to_string(*shipped_through);
    auto n = scalar(db, "SELECT coalesce(sum(" + count + "), 0) FROM " + table + " WHERE id IN (" +
                            doomed + ") AND first_id > " + through);
    if (!n) return n.error();
    out.unshipped += uint64_t(*n);
    BlockForm across = s.form;
    across.filter =
        "id IN (" + doomed + ") AND first_id <= " + through + " AND last_id > " + through;
    ArchiveScan scan(db.handle(), across, db.path(), {"timestamp", "id"}, 0, 1);
    ArchiveScan::Bounds b{.lo_id = *shipped_through + 1};
    int rc = scan.start(b, false);
    for (; rc == SQLITE_OK && !scan.eof(); rc = scan.next()) ++out.unshipped;
    if (rc != SQLITE_OK)
      return ingero::make_error(!scan.error().empty() ? scan.error()
                                                      : db.path() + ": " + sqlite3_errstr(rc));
  }
  if (auto d = db.exec("DELETE FROM " + table + " WHERE id IN (" + doomed + ")"); !d) return d;
  if (sqlite3_changes(db.handle()) == 64) out.more = true;
  out.deleted += events;
  (s.calls ? out.calls : out.host_events) += events;
  return {};
}

ingero::Status record(Db& db, const RetentionPass& p, int64_t cut) {
  std::string sql =
      "CREATE TABLE IF NOT EXISTS retention_state (id INTEGER PRIMARY KEY CHECK (id = 1), "
      "deleted_before INTEGER NOT NULL, calls INTEGER NOT NULL DEFAULT 0, "
      "events INTEGER NOT NULL DEFAULT 0, first_ts INTEGER NOT NULL DEFAULT 0);\n";
  for (const char* c : {"calls", "events", "first_ts"})
    if (db.table_exists("retention_state") && !db.column_exists("retention_state", c))
      sql += std::string("ALTER TABLE retention_state ADD COLUMN ") + c +
             " INTEGER NOT NULL DEFAULT 0;\n";
  sql += "INSERT INTO retention_state (id, deleted_before, calls, events, first_ts) VALUES (1, " +
         std::to_string(cut) + ", " + std::to_string(p.calls) + ", " +
         std::to_string(p.host_events) + ", " + std::to_string(p.first_ts) +
         ") ON CONFLICT (id) DO UPDATE SET deleted_before = max(deleted_before, "
         "excluded.deleted_before), calls = calls + excluded.calls, events = events + "
         "excluded.events, first_ts = CASE WHEN first_ts = 0 OR (excluded.first_ts <> 0 AND "
         "excluded.first_ts < first_ts) THEN excluded.first_ts ELSE first_ts END";
  return db.exec(sql);
}

// The log back into the file, as far as no reader holds it, without waiting for one: a reader's
// snapshot (explain, an MCP tool call on the live file) pins the log's end until it lets go,
// and TRUNCATE waited for it the whole busy timeout, 5 s, at each checkpoint of a pass, while the
// rings filled (1.18 M of 2.4 M calls lost beside an 8 s read). What it holds goes at a later
// pass. Whether the whole log went.
bool checkpoint_without_waiting(Db& db) {
  LockWait none(db.handle(), std::chrono::milliseconds(0), std::chrono::milliseconds::max(), {});
  auto whole = checkpoint_truncate(db);
  return whole && *whole;
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

uint64_t wal_bytes(const std::string& path) {
  struct stat sb {};
  return ::stat((path + "-wal").c_str(), &sb) == 0 ? uint64_t(sb.st_size) : 0;
}

ingero::Result<RetentionPass> apply_retention(Db& db, const RetentionPolicy& p, int64_t now_ns,
                                              uint64_t budget) {
  RetentionPass out;
  if (!p.active()) return out;
  // The WAL counts in the size: once it is an eighth of the limit, it goes back into the file
  // (where no reader holds it), whether or not rows go too. A log a reader pins is not counted:
  // deleting rows cannot shrink it, only add to it, and counting it deleted nearly every row at
  // each pass while the reader read (768 of ~107,000 calls kept beside a 10 s read, S = 1 MiB).
  bool pinned = false;
  if (p.max_bytes && wal_bytes(db.path()) > p.max_bytes / 8)
    pinned = !checkpoint_without_waiting(db);
  uint64_t wal = pinned ? 0 : wal_bytes(db.path());
  auto used = used_bytes(db);
  if (!used) return used.error();
  // The newest time any table may keep: by age, and, over the size, the time of the oldest
  // tenth of the data (a pass frees about that much; the next pass checks again).
  int64_t cut = p.retain_ns > 0 ? now_ns - p.retain_ns : INT64_MIN;
  if (p.max_bytes && *used + wal > p.max_bytes) {
    // One pass takes the file (and what is left of the log) to nine tenths of the limit,
    // however much the commits since the last pass wrote: the limit holds whatever the pace
    // of passes (a slow disk's checkpoints), and not only where several passes fit a tick.
    double excess = double(*used + wal) - 0.9 * double(p.max_bytes);
    auto by_size = size_cut(db, excess / double(std::max<uint64_t>(1, *used)));
    if (!by_size) return by_size.error();
    if (*by_size) cut = std::max(cut, *by_size);
  }
  if (cut == INT64_MIN) return out;
  if (auto st = db.exec("BEGIN"); !st) return st.error();
  auto fail = [&](const ingero::Error& e) {
    (void)db.exec("ROLLBACK");
    return e;
  };
  for (const char* table : kTables) {
    if (!db.table_exists(table)) continue;
    // The newest row stays, whatever its age: an emptied table would hand out its ids again,
    // below a shipper's resume point.
    std::string doomed = std::string("SELECT rowid FROM ") + table + " WHERE timestamp < " +
                         std::to_string(cut) + " AND rowid < (SELECT max(rowid) FROM " + table +
                         ") ORDER BY rowid LIMIT " + std::to_string(budget);
    if (auto s = p.shipped_through.find(table); s != p.shipped_through.end()) {
      auto n = scalar(
          db, "SELECT count(*) FROM (" + doomed + ") WHERE rowid > " + std::to_string(s->second));
      if (!n) return fail(n.error());
      out.unshipped += uint64_t(*n);
    }
    if (auto st = db.exec(std::string("DELETE FROM ") + table + " WHERE rowid IN (" + doomed + ")");
        !st)
      return fail(st.error());
    uint64_t n = uint64_t(sqlite3_changes(db.handle()));
    out.deleted += n;
    if (n == budget) out.more = true;
  }
  std::optional<int64_t> through;
  if (auto s = p.shipped_through.find("events"); s != p.shipped_through.end()) through = s->second;
  for (const BlockStore* s : {&call_blocks(), &host_blocks()})
    if (auto st = delete_blocks(db, *s, cut, through, out); !st) return fail(st.error());
  // Readers compare the calls they read with the per-second summaries (store/call_count_check.h),
  // and say what retention removed: how many calls and events, from when to when.
  if (out.deleted)
    if (auto st = record(db, out, cut); !st) return fail(st.error());
  if (auto st = db.exec("COMMIT"); !st) return fail(st.error());
  // Hand the freed pages back (files created with auto_vacuum = INCREMENTAL), at most 512
  // pages (8 MiB) a pass: vacuum moves pages, and its cost grows with them; then the WAL, which
  // holds the deleted pages' old contents, back to nothing where no reader holds it.
  (void)db.exec("PRAGMA incremental_vacuum(512)");
  if (p.max_bytes) (void)checkpoint_without_waiting(db);
  auto after = used_bytes(db);
  if (!after) return after.error();
  out.used_bytes = *after;
  if (p.max_bytes && *after > p.max_bytes && out.deleted) out.more = true;
  return out;
}

}  // namespace ingero::store

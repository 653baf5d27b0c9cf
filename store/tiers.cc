#include "store/tiers.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "store/archive_fold.h"
#include "store/call_archive.h"
#include "store/file_access.h"
#include "store/fold_runs.h"
#include "store/schema.h"

namespace ingero::store {

namespace {

ingero::Status check_writable_trace(const std::string& path) {
  auto ro = Db::open(path, Db::Mode::kReadOnly);
  if (!ro) return ro.error();
  auto info = inspect(**ro);
  if (!info && sqlite3_extended_errcode((*ro)->handle()) == SQLITE_READONLY_ROLLBACK) {
    // An interrupted compact or fold: its journal is rolled back by the first read of a
    // connection that may write, and the file is as before that transaction.
    ro->reset();
    auto rw = Db::open(path, Db::Mode::kReadWrite);
    if (!rw) return rw.error();
    if (auto r = (*rw)->query_int("PRAGMA application_id"); !r) return r.error();
    rw->reset();
    ro = Db::open(path, Db::Mode::kReadOnly);
    if (!ro) return ro.error();
    info = inspect(**ro);
  }
  if (!info) return info.error();
  if (info->format == TraceFormat::kLegacyGo)
    return ingero::make_error(path + ": a trace from the original Go implementation (schema " +
                              info->legacy_version +
                              "); it is opened read-only, never written. `ingero merge` converts "
                              "it into a new file, which compact can then fold");
  if (info->format == TraceFormat::kEmpty)
    return ingero::make_error(path + ": not an ingero trace (an empty file)");
  return check_intact(**ro);
}

std::optional<int64_t> opt(const Stmt& st, int col) {
  if (st.is_null(col)) return std::nullopt;
  return st.int64(col);
}

// The rows of main.events and the archived calls (their blocks decoded through
// temp.archived_calls, when installed) after `after_id` up to `through_id`, merged by id: the
// columns folding reads, `budget` rows of each at most.
class RowsById {
 public:
  static ingero::Result<RowsById> open(Db& db, int64_t after_id, int64_t through_id,
                                       uint64_t budget) {
    std::string cols =
        "SELECT id, timestamp, duration, pid, tid, source, op, ret_code, status, "
        "coalesce(off_cpu_ns, 0), coalesce(preempts, 0), node, session_id, comm, cgroup_id, "
        "stack_hash, coalesce(nested_calls, 0), library_id, stream, device FROM ";
    std::string range = " WHERE id > ? AND id <= ? ORDER BY id LIMIT ?";
    RowsById r;
    const bool archive = db.table_exists("archived_calls", "temp");
    for (int i = 0; i < (archive ? 2 : 1); ++i) {
      auto st = db.prepare(cols + (i ? "temp.archived_calls" : "main.events") + range);
      if (!st) return st.error();
      r.src_[i] = std::move(*st);
      r.src_[i]->bind(1, after_id).bind(2, through_id).bind(3, int64_t(budget));
      if (auto s = r.step(i); !s) return s.error();
    }
    r.pick();
    return r;
  }
  // The current row (columns as in open()), or nullptr past the last.
  Stmt* row() { return cur_ < 0 ? nullptr : &*src_[cur_]; }
  bool archived() const { return cur_ == 1; }
  ingero::Status next() {
    if (auto s = step(cur_); !s) return s;
    pick();
    return {};
  }

 private:
  ingero::Status step(int i) {
    auto r = src_[i]->step();
    if (!r) return r.error();
    live_[i] = *r;
    return {};
  }
  void pick() {
    cur_ = !live_[0] && !live_[1]                                             ? -1
           : !live_[0] || (live_[1] && src_[1]->int64(0) < src_[0]->int64(0)) ? 1
                                                                              : 0;
  }
  std::optional<Stmt> src_[2];
  bool live_[2] = {false, false};
  int cur_ = -1;
};

// The next `budget` event rows after row `after_id`, up to row `through_id` and the first call
// that started at or after `before_ns`, in start order; `last_id` is the last row considered.
ingero::Result<std::vector<FoldRow>> read_rows(Db& db, int64_t after_id, int64_t through_id,
                                               int64_t before_ns, uint64_t budget, FoldLimits& lim,
                                               FoldPass& out, int64_t& last_id, bool past_cut) {
  bool reread = false;
  // The newest row keeps its row: SQLite gives the next row max(id) + 1, and an id handed out
  // again would be below the fold's and the shipper's resume points, never folded nor shipped.
  auto newest = db.query_int("SELECT max(id) FROM events");
  if (!newest) return newest.error();
  int64_t newest_id = newest->value_or(0);
  auto src = RowsById::open(db, after_id, through_id, budget);
  if (!src) return src.error();
  std::vector<FoldRow> rows;
  last_id = after_id;
  bool reached_cut = false;
  while (out.considered < budget && src->row()) {
    Stmt* sel = src->row();
    FoldRow w;
    w.archived = src->archived();
    w.id = sel->int64(0);
    w.ts = sel->int64(1);
    w.source = int(sel->int64(5));
    w.call = lim.call_sources.count(w.source) > 0;
    bool too_new = w.call && w.ts >= before_ns;
    if (too_new && !past_cut) {
      reached_cut = true;  // newer calls keep their rows for now; resume here next pass
      break;
    }
    if (too_new && !out.first_too_new) out.first_too_new = w.id;
    last_id = w.id;
    ++out.considered;
    if (!w.call) {
      if (auto st = src->next(); !st) return st.error();
      continue;
    }
    w.dur = sel->int64(2);
    w.pid = uint32_t(sel->int64(3));
    w.tid = uint32_t(sel->int64(4));
    w.op = int(sel->int64(6));
    bool ok = !sel->is_null(7) && sel->int64(7) == 0 && sel->int64(8) == 0;
    bool on_cpu = sel->int64(9) == 0 && sel->int64(10) == 0;
    w.node = sel->text(11);
    bool was = reread;
    if (auto st =
            decide_foldable(db, lim, w, ok && on_cpu && w.id != newest_id && !too_new, reread);
        !st)
      return st.error();
    if (reread && !was) lim.read_for_ns = before_ns;
    w.session = sel->int64(12);
    w.comm = sel->text(13);
    w.cgroup = sel->int64(14);
    w.stack = sel->int64(15);
    w.nested = sel->int64(16);
    w.library = opt(*sel, 17);
    w.stream = opt(*sel, 18);
    w.device = opt(*sel, 19);
    rows.push_back(std::move(w));
    if (auto st = src->next(); !st) return st.error();
  }
  out.more = !reached_cut && out.considered == budget;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const FoldRow& a, const FoldRow& b) { return a.ts < b.ts; });
  return rows;
}

// Folds the foldable rows into runs (call_runs) and deletes their rows, counting them in `out`;
// the ids of the archived ones folded are added to `archived` (their blocks are rewritten
// after).
ingero::Status write_runs(Db& db, const std::vector<FoldRow>& rows, const FoldLimits& lim,
                          FoldPass& out, std::vector<int64_t>& archived) {
  auto ins = prepare_run_insert(db);
  if (!ins) return ins.error();
  auto del = db.prepare("DELETE FROM events WHERE id = ?");
  if (!del) return del.error();
  return form_runs(rows, lim, [&](const FoldRun& r) -> ingero::Status {
    if (auto st = insert_run(*ins, r, false); !st) return st;
    for (const FoldRow* c : r.calls) {
      if (c->archived) {
        archived.push_back(c->id);
        continue;
      }
      del->reset();
      del->bind(1, c->id);
      if (auto s = del->step(); !s) return s.error();
    }
    out.folded += r.calls.size();
    ++out.runs;
    return {};
  });
}

}  // namespace

ingero::Result<FoldState> fold_state(Db& db) {
  FoldState s;
  if (!db.table_exists("call_folding")) return s;
  auto st = db.prepare(
      "SELECT last_event_id, folded_before, folded_calls, runs FROM call_folding WHERE id = 1");
  if (!st) return st.error();
  auto r = st->step();
  if (!r) return r.error();
  if (*r) {
    s.last_event_id = st->int64(0);
    s.folded_before_ns = st->int64(1);
    s.folded_calls = uint64_t(st->int64(2));
    s.runs = uint64_t(st->int64(3));
  }
  return s;
}

ingero::Result<FoldPass> fold_calls(Db& db, int64_t before_ns, uint64_t budget, FoldLimits* cache,
                                    int64_t through_id, bool past_cut) {
  FoldPass out;
  // Calls archived since they came (a live trace archives as it goes) are folded from their
  // blocks: the pass reads them through temp.archived_calls and rewrites the blocks.
  if (auto st = install_archive_reader(db); !st) return st.error();
  // The whole pass is one write transaction, the reads included: two folders of one file (a
  // `compact` beside another, or beside the tracer) that both read the same rows before either
  // deleted them would each write their runs, and the calls would count twice.
  if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st.error();
  struct Rollback {
    Db& db;
    bool on = true;
    ~Rollback() {
      if (on) (void)db.exec("ROLLBACK");
    }
  } rollback{db};
  auto state = fold_state(db);
  if (!state) return state.error();
  FoldLimits local;
  FoldLimits& lim = cache ? *cache : local;
  if (auto st = refresh_limits(db, lim, before_ns); !st) return st.error();
  int64_t last_id = 0;
  auto rows = read_rows(db, state->last_event_id, through_id, before_ns, budget, lim, out, last_id,
                        past_cut);
  if (!rows) return rows.error();
  keep_nested(*rows);
  std::vector<int64_t> archived;
  if (auto st = write_runs(db, *rows, lim, out, archived); !st) return st.error();
  rows->clear();
  if (auto st = drop_archived_calls(db, std::move(archived)); !st) return st.error();
  auto upd = db.prepare(
      "INSERT INTO call_folding (id, last_event_id, folded_before, folded_calls, runs) "
      "VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET last_event_id = "
      "excluded.last_event_id, "
      "folded_before = max(folded_before, excluded.folded_before), "
      "folded_calls = folded_calls + excluded.folded_calls, runs = runs + excluded.runs");
  if (!upd) return upd.error();
  upd->bind(1, last_id).bind(2, before_ns).bind(3, int64_t(out.folded)).bind(4, int64_t(out.runs));
  if (auto s = upd->step(); !s) return s.error();
  if (auto st = db.exec("COMMIT"); !st) return st.error();
  rollback.on = false;
  return out;
}

ingero::Result<Compacted> compact_trace(const std::string& path, int64_t full_rows_ns,
                                        std::span<const hal::SqlView> views, bool archive) {
  if (auto st = check_writable_trace(path); !st) return st.error();
  auto db = Db::open(path, Db::Mode::kReadWrite);
  if (!db) return db.error();
  Db& d = **db;
  if (auto st = migrate(d, views); !st) return st.error();
  auto last = d.query_int("SELECT max(timestamp) FROM events");
  if (!last) return last.error();
  Compacted out;
  auto calls = d.query_int("SELECT coalesce(sum(calls), 0) FROM call_seconds");
  if (!calls) return calls.error();
  out.calls_before = uint64_t(calls->value_or(0));
  if (!last->has_value()) return out;
  int64_t before = **last - full_rows_ns;
  // A merged file holds its nodes one after the other by id, each in time order: the first
  // node's recent calls come before the next node's old ones, so its passes go past the cut.
  auto nodes = d.query_int("SELECT count(DISTINCT node) FROM sessions");
  if (!nodes) return nodes.error();
  bool merged = nodes->value_or(0) > 1;
  // A trace that folded its calls as it archived them keeps copies of the recent ones: those
  // older than the window go as the tracer's would.
  if (auto dropped = drop_recent_blocks(d, before); !dropped) return dropped.error();
  int64_t first_too_new = 0;
  while (true) {
    auto pass = fold_calls(d, before, 200000, nullptr, INT64_MAX, merged);
    if (!pass) return pass.error();
    out.folded += pass->folded;
    out.runs += pass->runs;
    if (pass->first_too_new && !first_too_new) first_too_new = pass->first_too_new;
    if (!pass->more) break;
  }
  // A trace appended later folds from the first call kept for being recent.
  if (first_too_new)
    if (auto st = d.exec("UPDATE call_folding SET last_event_id = min(last_event_id, " +
                         std::to_string(first_too_new - 1) + ")");
        !st)
      return st.error();
  if (archive) {
    auto a = archive_calls(d);
    if (!a) return a.error();
    out.archived = a->rows;
    out.blocks = a->blocks;
    auto r = archive_runs(d);
    if (!r) return r.error();
    out.archived_runs = r->rows;
    out.run_blocks = r->blocks;
  }
  (void)d.exec("PRAGMA temp_store = FILE");
  if (auto st = d.exec("VACUUM"); !st) return st.error();
  return out;
}

}  // namespace ingero::store

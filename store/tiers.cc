#include "store/tiers.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/quantile_sketch.h"
#include "store/call_archive.h"
#include "store/file_access.h"
#include "store/schema.h"
#include "store/sketch_sql.h"

namespace ingero::store {

namespace {

struct Row {
  int64_t id = 0, ts = 0, dur = 0;
  uint32_t pid = 0, tid = 0;
  int source = 0, op = 0;
  bool call = false;      // a GPU call (not a host event)
  bool archived = false;  // read from call_blocks (store/call_archive.h), not main.events
  bool foldable = false;  // a launch that says nothing on its own
  int64_t session = 0, cgroup = 0, stack = 0, nested = 0;
  std::optional<int64_t> library, stream, device;
  std::string node, comm;
};

struct Run {
  std::vector<int64_t> ids;       // its calls' rows in main.events
  std::vector<int64_t> archived;  // its archived calls
  size_t calls() const { return ids.size() + archived.size(); }
  const Row* first = nullptr;
  int64_t end = 0, sum = 0, min = INT64_MAX, max = 0, nested = 0;
};

ingero::Status read_limits(Db& db, FoldLimits& f) {
  f = FoldLimits{};
  auto st = db.prepare(
      "SELECT s.id, o.op_id, o.kind FROM sources s LEFT JOIN ops o ON o.source_id = s.id "
      "WHERE s.vendor <> 'host'");
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    f.call_sources.insert(int(st->int64(0)));
    if (st->text_view(2) == "launch") f.launch_ops.insert({int(st->int64(0)), int(st->int64(1))});
  }
  std::map<std::tuple<std::string, uint32_t, int, int>, engine::QuantileSketch> sketches;
  auto sums = db.prepare("SELECT node, pid, source, op, sketch FROM call_seconds");
  if (!sums) return sums.error();
  while (true) {
    auto r = sums->step();
    if (!r) return r.error();
    if (!*r) break;
    int source = int(sums->int64(2)), op = int(sums->int64(3));
    if (!f.launch_ops.count({source, op})) continue;
    auto sk = sketch_column(sums->get(), 4);
    if (!sk) return ingero::make_error(db.path() + ": a damaged call_seconds sketch");
    sketches[{sums->text(0), uint32_t(sums->int64(1)), source, op}].merge(*sk);
  }
  for (const auto& [k, sk] : sketches)
    f.limit[k] = int64_t(double(sk.quantile(0.95)) * kKeepAboveP95Share);
  return {};
}

ingero::Status write_run(Db& db, Stmt& ins, Stmt& del, const Run& r) {
  const Row& f = *r.first;
  ins.reset();
  sqlite3_clear_bindings(ins.get());
  ins.bind(1, std::string_view(f.node))
      .bind(2, f.session)
      .bind(3, f.ts)
      .bind(4, r.end - f.ts)
      .bind(5, int64_t(f.pid))
      .bind(6, int64_t(f.tid))
      .bind(7, std::string_view(f.comm))
      .bind(8, f.cgroup)
      .bind(9, int64_t(f.source))
      .bind(10, int64_t(f.op))
      .bind(14, int64_t(r.calls()))
      .bind(15, r.sum)
      .bind(16, r.min)
      .bind(17, r.max)
      .bind(18, r.nested)
      .bind(19, f.stack);
  if (f.library) ins.bind(11, *f.library);
  if (f.stream) ins.bind(12, *f.stream);
  if (f.device) ins.bind(13, *f.device);
  if (auto s = ins.step(); !s) return s.error();
  for (int64_t id : r.ids) {
    del.reset();
    del.bind(1, id);
    if (auto s = del.step(); !s) return s.error();
  }
  (void)db;
  return {};
}

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
ingero::Result<std::vector<Row>> read_rows(Db& db, int64_t after_id, int64_t through_id,
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
  std::vector<Row> rows;
  last_id = after_id;
  bool reached_cut = false;
  while (out.considered < budget && src->row()) {
    Stmt* sel = src->row();
    Row w;
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
    bool launch = lim.launch_ops.count({w.source, w.op}) > 0;
    w.node = sel->text(11);
    using Key = std::tuple<std::string_view, uint32_t, int, int>;
    auto l = lim.limit.find(Key{w.node, w.pid, w.source, w.op});
    if (launch && l == lim.limit.end() && !reread) {  // a process or op new since the last read
      if (auto st = read_limits(db, lim); !st) return st.error();
      lim.read_for_ns = before_ns;
      reread = true;
      l = lim.limit.find(Key{w.node, w.pid, w.source, w.op});
    }
    w.foldable = ok && on_cpu && launch && l != lim.limit.end() && w.dur < l->second &&
                 w.id != newest_id && !too_new;
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
                   [](const Row& a, const Row& b) { return a.ts < b.ts; });
  return rows;
}

// Calls inside another call of their thread (files from before nested calls were folded at
// capture, schema < 5, store a runtime launch and its driver launch as two rows) keep their
// rows, both of them: spread over a run, the inner one would no longer be inside the outer
// and would count as a launch of its own.
void keep_nested(std::vector<Row>& rows) {
  std::map<std::tuple<std::string_view, int64_t, uint32_t, uint32_t>, Row*> outer;
  for (Row& w : rows) {
    if (!w.call) continue;
    Row*& o = outer[{w.node, w.session, w.pid, w.tid}];
    if (o && w.ts < o->ts + o->dur) {
      o->foldable = w.foldable = false;
      if (w.ts + w.dur <= o->ts + o->dur) continue;
    }
    o = &w;
  }
}

// Folds the foldable rows into runs (call_runs) and deletes their rows, counting them in `out`;
// the ids of the archived ones folded are added to `archived` (their blocks are rewritten
// after).
ingero::Status write_runs(Db& db, const std::vector<Row>& rows, const FoldLimits& lim,
                          FoldPass& out, std::vector<int64_t>& archived) {
  auto ins = db.prepare(
      "INSERT INTO call_runs (node, session_id, timestamp, span_ns, pid, tid, comm, cgroup_id, "
      "source, op, library_id, stream, device, calls, sum_ns, min_ns, max_ns, nested_calls, "
      "stack_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!ins) return ins.error();
  auto del = db.prepare("DELETE FROM events WHERE id = ?");
  if (!del) return del.error();
  // Open runs by (node, session, pid, tid); any kept call of the process closes its runs.
  // Open runs by (node, session, pid, tid, source, op): launches of different ops interleaved
  // on a thread (cudaLaunchKernel, cuLaunchKernelEx) each make their own run. A kept call
  // other than a launch (a sync, a copy, an allocation) closes every run of its process, so the
  // gaps and round trips around it stay where they were; a kept launch (slow, failed, off-CPU)
  // closes the runs of its thread only.
  using RunKey = std::tuple<std::string_view, int64_t, uint32_t, uint32_t, int, int>;
  std::map<RunKey, Run> open;
  auto close = [&](std::map<RunKey, Run>::iterator it) -> ingero::Status {
    if (auto st = write_run(db, *ins, *del, it->second); !st) return st;
    out.folded += it->second.calls();
    archived.insert(archived.end(), it->second.archived.begin(), it->second.archived.end());
    ++out.runs;
    return {};
  };
  for (const Row& w : rows) {
    RunKey k{w.node, w.session, w.pid, w.tid, w.source, w.op};
    if (!w.foldable) {
      // Runs never span a kept call of their thread: spread over the run, folded calls would
      // land inside it and read as nested in it.
      for (auto it = open.lower_bound({w.node, w.session, w.pid, w.tid, 0, 0});
           it != open.end() && std::get<3>(it->first) == w.tid && std::get<2>(it->first) == w.pid &&
           std::get<0>(it->first) == w.node && std::get<1>(it->first) == w.session;) {
        if (auto st = close(it); !st) return st.error();
        it = open.erase(it);
      }
      if (lim.launch_ops.count({w.source, w.op})) continue;
      for (auto it = open.lower_bound({w.node, w.session, w.pid, 0, 0, 0});
           it != open.end() && std::get<2>(it->first) == w.pid &&
           std::get<0>(it->first) == w.node && std::get<1>(it->first) == w.session;) {
        if (auto st = close(it); !st) return st.error();
        it = open.erase(it);
      }
      continue;
    }
    auto it = open.find(k);
    if (it != open.end()) {
      const Row& f = *it->second.first;
      bool same = f.stream == w.stream && f.device == w.device && f.library == w.library &&
                  f.comm == w.comm && f.cgroup == w.cgroup;
      if (!same || w.ts - it->second.end > kMaxRunGapNs || w.ts < it->second.end) {
        if (auto st = close(it); !st) return st.error();
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) it = open.emplace(k, Run{}).first;
    Run& r = it->second;
    if (!r.first) r.first = &w;
    (w.archived ? r.archived : r.ids).push_back(w.id);
    r.end = std::max(r.end, w.ts + w.dur);
    r.sum += w.dur;
    r.min = std::min(r.min, w.dur);
    r.max = std::max(r.max, w.dur);
    r.nested += w.nested;
  }
  for (auto it = open.begin(); it != open.end(); ++it)
    if (auto st = close(it); !st) return st.error();
  return {};
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
  constexpr int64_t kReread = int64_t(30) * 1000000000;
  if (!cache || lim.read_for_ns == INT64_MIN || before_ns - lim.read_for_ns > kReread) {
    if (auto st = read_limits(db, lim); !st) return st.error();
    lim.read_for_ns = before_ns;
  }
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

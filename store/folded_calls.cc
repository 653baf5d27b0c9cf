#include "store/folded_calls.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "store/call_store.h"
#include "store/op_dictionary.h"
#include "store/sqlite_db.h"
#include "store/untimed_durations.h"

namespace ingero::store {

// What a run's read takes, rows and archive alike: the id last (ties in start time come in id
// order), and, of the archive, the node after it.
const std::vector<std::string> RunCursor::kColumns = {
    "timestamp", "span_ns",      "pid",        "tid",         "comm",  "cgroup_id", "source",
    "op",        "library_id",   "stream",     "device",      "calls", "sum_ns",    "min_ns",
    "max_ns",    "nested_calls", "stack_hash", "timed_calls", "func",  "funcs",     "id"};

ingero::Result<std::unique_ptr<RunCursor>> RunCursor::open(Db& db, const EventFilter& f,
                                                           StringPool& strings, int64_t min_start) {
  std::unique_ptr<RunCursor> out(new RunCursor(db, strings));
  if (!db.table_exists("call_runs")) return out;
  bool store = has_call_store(db);  // schema 10: every run is in a block (store/call_store.h)
  auto untimed = UntimedDurations::load(db);
  if (!untimed) return untimed.error();
  out->untimed_ = std::move(*untimed);
  if (auto st = for_each_op(db, OpVendors::kAll,
                            [&](const OpEntry& o) {
                              out->names_[{o.source, o.op}] = {
                                  strings.intern(o.vendor), strings.intern(o.api),
                                  strings.intern(o.name),
                                  hal::kind_from_name(o.kind).value_or(hal::EventKind::kUnknown)};
                            });
      !st)
    return st.error();
  if (db.table_exists("libraries")) {
    auto libs = db.prepare("SELECT id, path FROM libraries");
    if (!libs) return libs.error();
    while (true) {
      auto r = libs->step();
      if (!r) return r.error();
      if (!*r) break;
      out->libraries_[libs->int64(0)] = strings.intern(libs->text_view(1));
    }
  }
  // A run overlaps the window when it starts before its end and ends after its start. The id
  // last: ties in start time come in id order, from the rows and the archive alike.
  std::string select = "SELECT ";
  for (const auto& c : kColumns) {
    // Runs of files before schema 10 timed every call; a plain copy of a later file says how
    // many of its runs' calls were timed (its runs read as every call timed and succeeded).
    std::string col =
        c == "timed_calls" && !store && !db.column_exists("call_runs", "timed_calls", "main")
            ? "calls AS timed_calls"
            : c;
    // Nor did they keep a run's kernels (a plain copy of a later file does: export).
    // The file's own call_runs, not a reader's TEMP view over it.
    if ((c == "func" || c == "funcs") && !store && !db.column_exists("call_runs", c, "main"))
      col = "NULL AS " + c;
    // A row's node before its id (the archive's comes after it): whose means its untimed
    // calls take.
    if (c == "id")
      select += db.column_exists("call_runs", "node", "main") ? "node, " : "'' AS node, ";
    select += col + (&c == &kColumns.back() ? " FROM " : ", ");
  }
  std::string where = " WHERE timestamp <= " + std::to_string(f.to_ns) +
                      " AND timestamp + span_ns >= " + std::to_string(f.from_ns);
  if (min_start != std::numeric_limits<int64_t>::min())
    where += " AND timestamp >= " + std::to_string(min_start);
  if (f.pid) where += " AND pid = " + std::to_string(*f.pid);
  if (f.node) where += " AND node = " + sql_quote(*f.node);
  auto st = db.prepare(select + (store ? "ingero_runs WHERE 0" : "main.call_runs" + where) +
                       " ORDER BY timestamp, id");
  if (!st) return st.error();
  std::unique_ptr<ArchiveScan> scan;
  ArchiveScan::Bounds bounds{.lo_ts = min_start, .hi_ts = f.to_ns};
  if (store || db.table_exists("archived_runs", "temp")) {
    // No run is longer than its block's time from first start to last end: a start bound the
    // archive can choose blocks by.
    auto longest = db.query_int(std::string("SELECT max(end_ts - first_ts) FROM ") +
                                (store ? "main.call_store" : "main.run_blocks"));
    if (!longest) return longest.error();
    int64_t span = std::max<int64_t>(0, longest->value_or(0));
    int64_t from = f.from_ns < std::numeric_limits<int64_t>::min() + span
                       ? std::numeric_limits<int64_t>::min()
                       : f.from_ns - span;
    bounds.lo_ts = std::max(bounds.lo_ts, from);
    // The archived runs are read straight from their blocks, and checked here against what
    // the statement's WHERE checks of the rows.
    std::vector<std::string> cols = kColumns;
    cols.push_back("node");
    scan = store
               ? std::make_unique<ArchiveScan>(db.handle(),
                                               f.rows ? sql_runs_form() : engine_runs_form(),
                                               db.path(), std::move(cols), 0, kColumns.size() - 1)
               : std::make_unique<ArchiveScan>(db.handle(), "main.run_blocks", "run archive block",
                                               db.path(), std::move(cols), 0, kColumns.size() - 1);
    out->filter_ = f;
  }
  out->rows_ = MergedRows(std::make_unique<Stmt>(std::move(*st)), std::move(scan), bounds);
  return out;
}

RunCursor::RunCursor(Db& db, StringPool& strings) : db_(db), strings_(strings) {}
RunCursor::~RunCursor() = default;

ingero::Result<bool> RunCursor::next(engine::CallRun& w) {
  if (!rows_) return false;
  while (true) {
    auto r = rows_.next();
    if (!r || !*r) return r;
    if (rows_.archived()) {
      auto row = rows_.scan().current();
      // As the statement's WHERE: overlapping the window, of the process and node asked for.
      if (row.int64(0) + row.int64(1) < filter_.from_ns ||
          (filter_.pid && (row.is_null(2) || uint32_t(row.int64(2)) != *filter_.pid)) ||
          (filter_.node && (row.is_null(kNode) || row.text_view(kNode) != *filter_.node)))
        continue;
      auto done = take(row, w, row.is_null(kNode) ? "" : row.text_view(kNode));
      if (!done || *done) return done;
    } else if (auto done = take(rows_.row(), w, rows_.row().text_view(kRowNode)); !done || *done) {
      return done;
    }
  }
}

template <class Row>
ingero::Result<bool> RunCursor::take(const Row& st, engine::CallRun& w,
                                     std::string_view node) const {
  auto n = names_.find({st.int64(6), st.int64(7)});
  if (n == names_.end()) return false;  // as the calls view: an op missing from the dictionary
  w = engine::CallRun{};
  w.ts_ns = st.int64(0);
  w.span_ns = uint64_t(std::max<int64_t>(0, st.int64(1)));
  w.pid = uint32_t(st.int64(2));
  w.tid = uint32_t(st.int64(3));
  auto comm = st.text_view(4);
  std::copy_n(comm.data(), std::min(comm.size(), w.comm.size() - 1), w.comm.data());
  w.cgroup_id = uint64_t(st.int64(5));
  w.vendor = n->second.vendor;
  w.api = n->second.api;
  w.op = n->second.op;
  w.kind = n->second.kind;
  if (!st.is_null(8))
    if (auto l = libraries_.find(st.int64(8)); l != libraries_.end()) w.library = l->second;
  if (!st.is_null(9)) w.stream = uint64_t(st.int64(9));
  if (!st.is_null(10)) w.device = uint64_t(st.int64(10));
  w.calls = uint64_t(std::max<int64_t>(0, st.int64(11)));
  w.sum_ns = uint64_t(std::max<int64_t>(0, st.int64(12)));
  w.min_ns = uint64_t(std::max<int64_t>(0, st.int64(13)));
  w.max_ns = uint64_t(std::max<int64_t>(0, st.int64(14)));
  w.nested = uint64_t(std::max<int64_t>(0, st.int64(15)));
  w.stack_id = uint64_t(st.int64(16));
  if (!st.is_null(18)) w.func = uint64_t(st.int64(18));
  if (!st.is_null(19)) {
    std::string_view text = st.text_view(19);
    auto it = funcs_.find(text);
    if (it == funcs_.end()) {
      std::string_view kept = strings_.intern(text);
      it = funcs_.emplace(kept, kept).first;
    }
    w.funcs = it->second;
  }
  uint64_t timed = st.is_null(17) ? w.calls : uint64_t(std::max<int64_t>(0, st.int64(17)));
  // A damaged row (no calls, or extremes that do not fit the total of its timed calls) is not
  // expanded into invented calls.
  if (w.calls == 0 || timed > w.calls ||
      (timed && (w.min_ns > w.max_ns || w.sum_ns < w.min_ns + (timed > 1 ? w.max_ns : 0) ||
                 (timed > 1 && w.sum_ns > w.max_ns * timed))))
    return ingero::make_error(db_.path() +
                              ": a damaged call_runs row (its count, total and "
                              "extremes do not fit together)");
  // Calls seen at entry only take their process and op's mean (store/untimed_durations.h).
  // They stay marked untimed (engine/call_run.h): no tail or quantile takes an estimate.
  w.untimed = w.calls - timed;
  w.untimed_ns = w.timed_min_ns = w.timed_max_ns = 0;
  if (w.untimed) {
    uint64_t est = untimed_.of(node, w.pid, int(st.int64(6)), int(st.int64(7)));
    w.untimed_ns = est;
    w.timed_min_ns = timed ? w.min_ns : 0;
    w.timed_max_ns = timed ? w.max_ns : 0;
    if (!timed) w.sum_ns = 0;  // no timed call: nothing of its own to add (unchecked above)
    w.sum_ns += est * w.untimed;
    w.min_ns = timed ? std::min(w.min_ns, est) : est;
    w.max_ns = timed ? std::max(w.max_ns, est) : est;
  }
  return true;
}

void RunExpander::add(const engine::CallRun& r) {
  size_t i;
  if (free_.empty()) {
    i = slots_.size();
    slots_.push_back({r, 0});
  } else {
    i = free_.back();
    free_.pop_back();
    slots_[i] = {r, 0};
  }
  active_.push({r.ts_ns, i});
}

bool RunExpander::next(hal::Event& e) {
  auto [ts, i] = active_.top();
  active_.pop();
  Slot& s = slots_[i];
  uint64_t k = s.k;
  bool in = ts >= from_ns_ && ts <= to_ns_;
  if (in) s.run.call(k, ts, e);
  if (++s.k < s.run.calls)
    active_.push({ts + int64_t(s.run.duration(k) + s.run.gap(k)), i});
  else
    free_.push_back(i);
  return in;
}

ingero::Result<int64_t> older_folded_runs(Db& db) {
  if (!db.is_table("call_runs")) return int64_t(0);
  // Those still rows, and those archived in blocks (schema 8 and 9: store/call_archive.h).
  auto runs = db.query_int(db.table_exists("archived_runs", "temp")
                               ? "SELECT (SELECT count(*) FROM main.call_runs) + "
                                 "(SELECT count(*) FROM temp.archived_runs)"
                               : "SELECT count(*) FROM main.call_runs");
  if (!runs) return runs.error();
  return runs->value_or(0);
}

}  // namespace ingero::store

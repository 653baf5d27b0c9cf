#include "store/archive_fold.h"

#include <algorithm>

#include "store/archive_scan.h"

namespace ingero::store {
namespace archive_detail {

ingero::Result<FoldedBlock> fold_block(Db& db, FoldLimits& lim, const RowBlock& rows,
                                       int64_t fold_before_ns, int64_t considered_id) {
  const auto& names = rows.columns();
  auto col = [&](const char* n) {
    auto it = std::find(names.begin(), names.end(), n);
    return it == names.end() ? -1 : int(it - names.begin());
  };
  const int id = col("id"), ts = col("timestamp"), dur = col("duration"), pid = col("pid"),
            tid = col("tid"), source = col("source"), op = col("op"), ret = col("ret_code"),
            status = col("status"), off_cpu = col("off_cpu_ns"), preempts = col("preempts"),
            node = col("node"), session = col("session_id"), comm = col("comm"),
            cgroup = col("cgroup_id"), stack = col("stack_hash"), nested = col("nested_calls"),
            library = col("library_id"), stream = col("stream"), device = col("device");
  if (id < 0 || ts < 0 || dur < 0 || pid < 0 || tid < 0 || source < 0 || op < 0 || node < 0)
    return ingero::make_error(db.path() + ": events lacks a column folding needs");
  auto opt = [&](size_t r, int c) -> std::optional<int64_t> {
    auto v = archived_int(rows, r, c);
    return v ? std::optional<int64_t>(int64_t(*v)) : std::nullopt;
  };
  auto num = [&](size_t r, int c) { return opt(r, c).value_or(0); };
  auto text = [&](size_t r, int c) {
    return c < 0 ? std::string() : std::string(rows.bytes(r, size_t(c)));
  };
  FoldedBlock out;
  out.calls.reserve(rows.rows());
  bool reread = false;
  for (size_t r = 0; r < rows.rows(); ++r) {
    FoldRow w;
    w.row = uint32_t(r);
    w.id = num(r, id);
    w.ts = num(r, ts);
    w.dur = num(r, dur);
    w.pid = uint32_t(num(r, pid));
    w.tid = uint32_t(num(r, tid));
    w.source = int(num(r, source));
    w.op = int(num(r, op));
    w.call = true;
    w.node = text(r, node);
    w.session = num(r, session);
    w.comm = text(r, comm);
    w.cgroup = num(r, cgroup);
    w.stack = num(r, stack);
    w.nested = num(r, nested);
    w.library = opt(r, library);
    w.stream = opt(r, stream);
    w.device = opt(r, device);
    auto code = opt(r, ret);
    bool ok = code && *code == 0 && num(r, status) == 0;
    bool on_cpu = num(r, off_cpu) == 0 && num(r, preempts) == 0;
    bool eligible = ok && on_cpu && w.ts < fold_before_ns && w.id > considered_id;
    if (auto st = decide_foldable(db, lim, w, eligible, reread); !st) return st.error();
    out.calls.push_back(std::move(w));
  }
  // Rows of a block are in id order; folding takes them by start (ties: id).
  std::vector<size_t> by_start(out.calls.size());
  for (size_t i = 0; i < by_start.size(); ++i) by_start[i] = i;
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](size_t a, size_t b) { return out.calls[a].ts < out.calls[b].ts; });
  std::vector<FoldRow> sorted;
  sorted.reserve(out.calls.size());
  for (size_t i : by_start) sorted.push_back(std::move(out.calls[i]));
  out.calls = std::move(sorted);
  keep_nested(out.calls);
  auto st = form_runs(out.calls, lim, [&](const FoldRun& run) -> ingero::Status {
    out.folded += run.calls.size();
    out.runs.push_back(run);
    return {};
  });
  if (!st) return st.error();
  // The kept rows, in id order: those of no run.
  std::vector<char> gone(rows.rows(), 0);
  for (const FoldRun& run : out.runs)
    for (const FoldRow* c : run.calls) gone[c->row] = 1;
  RowBlock kept(names);
  for (size_t r = 0; r < rows.rows(); ++r) {
    if (gone[r]) continue;
    int64_t t = num(r, ts);
    out.kept.add(num(r, id), t, t + num(r, dur));
    kept.add_row(rows, r);
  }
  out.kept.calls = out.kept.rows;
  if (out.kept.rows > 0) {
    out.kept_data = kept.encode();
    if (out.kept_data.empty()) return ingero::make_error("compressing a block failed");
  }
  return out;
}

ingero::Status count_folded(Db& db, uint64_t calls, uint64_t runs, int64_t before_ns,
                            int64_t considered_id) {
  if (calls == 0 && runs == 0 && considered_id == 0) return {};
  auto upd = db.prepare(
      "INSERT INTO call_folding (id, last_event_id, folded_before, folded_calls, runs) "
      "VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
      "last_event_id = max(last_event_id, excluded.last_event_id), "
      "folded_before = max(folded_before, excluded.folded_before), "
      "folded_calls = folded_calls + excluded.folded_calls, runs = runs + excluded.runs");
  if (!upd) return upd.error();
  upd->bind(1, considered_id)
      .bind(2, calls ? before_ns : int64_t(0))
      .bind(3, int64_t(calls))
      .bind(4, int64_t(runs));
  if (auto s = upd->step(); !s) return s.error();
  return {};
}

}  // namespace archive_detail

ingero::Result<std::optional<int64_t>> recent_from_id(Db& db) {
  if (!db.table_exists("recent_blocks")) return std::optional<int64_t>();
  // Blocks' id ranges never overlap: the one that ends first begins first.
  return db.query_int("SELECT first_id FROM main.recent_blocks ORDER BY last_id LIMIT 1");
}

ingero::Result<uint64_t> drop_recent_blocks(Db& db, int64_t before_ns) {
  if (!db.table_exists("recent_blocks")) return uint64_t(0);
  if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st.error();
  auto fail = [&](const ingero::Error& e) {
    (void)db.exec("ROLLBACK");
    return e;
  };
  auto sel = db.prepare(
      "SELECT b.id, b.end_ts, coalesce(f.folded_calls, 0), coalesce(f.runs, 0) FROM "
      "main.recent_blocks b LEFT JOIN main.recent_folds f ON f.block_id = b.id ORDER BY "
      "b.last_id");
  if (!sel) return fail(sel.error());
  std::vector<int64_t> doomed;
  uint64_t calls = 0, runs = 0;
  int64_t until = INT64_MIN;
  while (true) {
    auto r = sel->step();
    if (!r) return fail(r.error());
    if (!*r || sel->int64(1) >= before_ns) break;
    doomed.push_back(sel->int64(0));
    until = std::max(until, sel->int64(1));
    calls += uint64_t(sel->int64(2));
    runs += uint64_t(sel->int64(3));
  }
  sel->reset();
  auto del = db.prepare("DELETE FROM main.recent_blocks WHERE id = ?");
  if (!del) return fail(del.error());
  auto del_fold = db.prepare("DELETE FROM main.recent_folds WHERE block_id = ?");
  if (!del_fold) return fail(del_fold.error());
  for (int64_t b : doomed) {
    for (Stmt* st : {&*del, &*del_fold}) {
      st->reset();
      st->bind(1, b);
      if (auto r = st->step(); !r) return fail(r.error());
    }
  }
  if (auto st = archive_detail::count_folded(db, calls, runs, until); !st) return fail(st.error());
  if (auto st = db.exec("COMMIT"); !st) return fail(st.error());
  return uint64_t(doomed.size());
}

}  // namespace ingero::store

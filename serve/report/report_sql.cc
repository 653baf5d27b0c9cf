#include "serve/report/report_sql.h"

#include <map>

#include "store/call_archive.h"

namespace ingero::serve::report {
namespace {

using nlohmann::json;

Result<store::Stmt> prepare(store::Db& db, const std::string& sql, const std::string& what) {
  auto st = db.prepare(sql);
  if (!st) return make_error(what + ": " + st.error().message);
  return std::move(*st);
}

// A column as JSON: integers stay integers, text stays text, NULL is null.
json column_json(const store::Stmt& st, int col) {
  switch (sqlite3_column_type(st.get(), col)) {
    case SQLITE_INTEGER:
      return st.int64(col);
    case SQLITE_FLOAT:
      return st.real(col);
    case SQLITE_NULL:
      return nullptr;
    default:
      return st.text(col);
  }
}

// Steps a statement to the end, calling `row` for each row.
template <class F>
Status each_row(store::Stmt& st, const std::string& what, F&& row) {
  while (true) {
    auto r = st.step();
    if (!r) return make_error(what + ": " + r.error().message);
    if (!*r) return {};
    row();
  }
}

// The sessions columns the report shows, ours and the original implementation's; a file has
// a subset of them.
constexpr const char* kSessionColumns[] = {"id",
                                           "node",
                                           "host",
                                           "kernel",
                                           "os_release",
                                           "cpu_model",
                                           "cpu_cores",
                                           "mem_total",
                                           "gpu_model",
                                           "gpu_driver",
                                           "cuda_ver",
                                           "python_ver",
                                           "started_at",
                                           "stopped_at",
                                           "ingero_ver",
                                           "pid_filter",
                                           "flags",
                                           "backends",
                                           "attached_probes",
                                           "events_stored",
                                           "ringbuf_drops",
                                           "call_drops",
                                           "stack_drops",
                                           "host_drops",
                                           "sample_drops",
                                           "calls_lost_at_exit",
                                           "lost_calls",
                                           "store_errors",
                                           "unfinished_calls",
                                           "exit_reason"};

}  // namespace

std::string window_where(const engine::Window& w, const char* ts_column) {
  bool lo = w.from_ns != std::numeric_limits<int64_t>::min();
  bool hi = w.to_ns != std::numeric_limits<int64_t>::max();
  if (!lo && !hi) return "";
  return std::string(" WHERE ") + ts_column + " BETWEEN " + std::to_string(w.from_ns) + " AND " +
         std::to_string(w.to_ns);
}

std::string window_and(const engine::Window& w, const char* ts_column) {
  std::string s = window_where(w, ts_column);
  return s.empty() ? s : " AND" + s.substr(6);
}

Result<int64_t> query_count(store::Db& db, const std::string& sql, const std::string& what) {
  auto st = prepare(db, sql, what);
  if (!st) return st.error();
  auto r = st->step();
  if (!r) return make_error(what + ": " + r.error().message);
  return *r && !st->is_null(0) ? st->int64(0) : 0;
}

// The window's calls as rows to aggregate: one per call that has its row (n = 1), and one per
// run of launches folded by tiered retention standing for its calls (n of them, dur_ns their
// total, end_ns the end of the last). Durations are summed with total(), read back saturated:
// sum() fails the whole report on an overflow ("integer overflow": a damaged duration near
// INT64_MAX).
std::string counted_calls(store::Db& db, const engine::Window& w) {
  std::string rows =
      "SELECT node, pid, tid, comm, status, ts_ns, dur_ns, ts_ns + coalesce(dur_ns, 0) AS end_ns, "
      "1 AS n "
      "FROM calls" +
      window_where(w, "ts_ns");
  if (db.table_exists("call_runs"))
    rows +=
        " UNION ALL SELECT node, pid, tid, comm, 'ok', timestamp, sum_ns, timestamp + span_ns, "
        "calls FROM call_runs" +
        window_where(w, "timestamp");
  return " FROM (" + rows + ")";
}

Result<CallTotals> call_totals(store::Db& db, const engine::Window& w) {
  const std::string what = "counting calls";
  auto st = prepare(db,
                    "SELECT coalesce(sum(n), 0), count(DISTINCT node || ':' || pid), "
                    "coalesce(sum(status = 'error'), 0), coalesce(sum(status = 'unfinished'), 0), "
                    "min(ts_ns), max(end_ns)" +
                        counted_calls(db, w),
                    what);
  if (!st) return st.error();
  CallTotals t;
  auto r = st->step();
  if (!r) return make_error(what + ": " + r.error().message);
  if (*r) {
    t.calls = uint64_t(st->int64(0));
    t.processes = uint64_t(st->int64(1));
    t.errors = uint64_t(st->int64(2));
    t.unfinished = uint64_t(st->int64(3));
    t.first_ns = st->int64(4);
    t.last_end_ns = st->int64(5);
  }
  return t;
}

Result<json> sessions_json(store::Db& db) {
  json out = json::array();
  if (!db.table_exists("sessions")) return out;
  std::vector<std::string> cols;
  for (const char* c : kSessionColumns)
    if (db.column_exists("sessions", c)) cols.push_back(c);
  if (cols.empty()) return out;
  std::string sql = "SELECT ";
  for (size_t i = 0; i < cols.size(); ++i) sql += (i ? ", " : "") + cols[i];
  sql += " FROM sessions ORDER BY " + std::string(db.column_exists("sessions", "id") ? "id" : "1");
  const std::string what = "reading sessions";
  auto st = prepare(db, sql, what);
  if (!st) return st.error();
  Status s = each_row(*st, what, [&] {
    json row = json::object();
    for (size_t i = 0; i < cols.size(); ++i) row[cols[i]] = column_json(*st, int(i));
    out.push_back(std::move(row));
  });
  if (!s) return s.error();
  return out;
}

Result<json> nodes_json(store::Db& db, const engine::Window& w,
                        const std::vector<std::string>& names) {
  const std::string what = "per-node totals";
  auto st = prepare(db,
                    "SELECT node, sum(n), count(DISTINCT pid), coalesce(sum(status = 'error'), 0), "
                    "coalesce(sum(status = 'unfinished'), 0), total(dur_ns), "
                    "min(ts_ns), max(end_ns)" +
                        counted_calls(db, w) + " GROUP BY node ORDER BY node",
                    what);
  if (!st) return st.error();
  std::map<std::string, json> rows;
  for (const auto& n : names)
    rows[n] = {{"node", n},       {"calls", 0},   {"processes", 0}, {"errors", 0},
               {"unfinished", 0}, {"busy_ns", 0}, {"first_ns", 0},  {"last_ns", 0}};
  Status s = each_row(*st, what, [&] {
    rows[st->text(0)] = {{"node", st->text(0)},        {"calls", st->int64(1)},
                         {"processes", st->int64(2)},  {"errors", st->int64(3)},
                         {"unfinished", st->int64(4)}, {"busy_ns", st->int64(5)},
                         {"first_ns", st->int64(6)},   {"last_ns", st->int64(7)}};
  });
  if (!s) return s.error();
  json out = json::array();
  for (auto& [name, row] : rows) out.push_back(std::move(row));
  return out;
}

Result<json> processes_json(store::Db& db, const engine::Window& w, size_t limit, uint64_t* total) {
  auto n = query_count(db, "SELECT count(DISTINCT node || ':' || pid)" + counted_calls(db, w),
                       "counting processes");
  if (!n) return n.error();
  *total = uint64_t(*n);
  // Names: process_names has (pid, name) in every file; cmdline and node in ours.
  bool names = db.table_exists("process_names");
  bool cmd = names && db.column_exists("process_names", "cmdline");
  bool pn_node = names && db.column_exists("process_names", "node");
  std::string join, name_cols = ", '', ''";
  if (names) {
    join = " LEFT JOIN process_names pn ON pn.pid = c.pid" +
           std::string(pn_node ? " AND pn.node = c.node" : "");
    name_cols =
        std::string(", coalesce(pn.name, ''), ") + (cmd ? "coalesce(pn.cmdline, '')" : "''");
  }
  const std::string what = "per-process totals";
  auto st = prepare(
      db,
      "SELECT c.node, c.pid, c.calls, c.threads, c.errors, c.unfinished, c.busy, c.first, c.last, "
      "c.comm" +
          name_cols +
          " FROM (SELECT node, pid, sum(n) AS calls, count(DISTINCT tid) AS threads, "
          "coalesce(sum(status = 'error'), 0) AS errors, "
          "coalesce(sum(status = 'unfinished'), 0) AS unfinished, total(dur_ns) AS "
          "busy, "
          "min(ts_ns) AS first, max(end_ns) AS last, max(comm) AS comm" +
          counted_calls(db, w) + " GROUP BY node, pid ORDER BY calls DESC, node, pid LIMIT " +
          std::to_string(limit) + ") c" + join +
          " GROUP BY c.node, c.pid ORDER BY c.calls DESC, c.node, c.pid",
      what);
  if (!st) return st.error();
  json out = json::array();
  Status s = each_row(*st, what, [&] {
    std::string name = st->text(10);
    if (name.empty()) name = st->text(9);
    out.push_back({{"node", st->text(0)},
                   {"pid", st->int64(1)},
                   {"calls", st->int64(2)},
                   {"threads", st->int64(3)},
                   {"errors", st->int64(4)},
                   {"unfinished", st->int64(5)},
                   {"busy_ns", st->int64(6)},
                   {"first_ns", st->int64(7)},
                   {"last_ns", st->int64(8)},
                   {"name", name},
                   {"cmdline", st->text(11)}});
  });
  if (!s) return s.error();
  return out;
}

Result<std::vector<std::string>> node_names(store::Db& db) {
  std::vector<std::string> out;
  if (!db.column_exists("events", "node")) return out;
  const std::string what = "listing nodes";
  auto st = prepare(db, store::node_names_sql(db), what);
  if (!st) return st.error();
  Status s = each_row(*st, what, [&] { out.push_back(st->text(0)); });
  if (!s) return s.error();
  return out;
}

}  // namespace ingero::serve::report

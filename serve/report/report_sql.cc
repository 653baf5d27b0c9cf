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

Result<int64_t> query_count(store::Db& db, const std::string& sql, const std::string& what) {
  auto st = prepare(db, sql, what);
  if (!st) return st.error();
  auto r = st->step();
  if (!r) return make_error(what + ": " + r.error().message);
  return *r && !st->is_null(0) ? st->int64(0) : 0;
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

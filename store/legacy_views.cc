#include "store/legacy_views.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "store/contract_views.h"

namespace ingero::store {
namespace {

// Op names the original implementation wrote, and their kinds.
constexpr std::pair<std::string_view, std::string_view> kLegacyKinds[] = {
    {"cudaMalloc", "alloc"},
    {"cudaMallocManaged", "alloc"},
    {"cudaFree", "free"},
    {"cudaLaunchKernel", "launch"},
    {"cudaMemcpy", "memcpy"},
    {"cudaMemcpyAsync", "memcpy"},
    {"cudaStreamSync", "sync"},
    {"cudaDeviceSync", "sync"},
    {"cudaStreamSynchronize", "sync"},
    {"cudaDeviceSynchronize", "sync"},
    {"cuLaunchKernel", "launch"},
    {"cuMemcpy", "memcpy"},
    {"cuMemcpyAsync", "memcpy"},
    {"cuCtxSynchronize", "sync"},
    {"cuMemAlloc", "alloc"},
    {"cuMemAllocManaged", "alloc"},
    {"graphBeginCapture", "graph_capture"},
    {"graphEndCapture", "graph_end_capture"},
    {"graphInstantiate", "graph_instantiate"},
    {"graphLaunch", "graph_launch"},
    {"cudaGraphLaunch", "graph_launch"},
    {"cudaGraphInstantiate", "graph_instantiate"},
    {"cudaStreamBeginCapture", "graph_capture"},
    {"cudaStreamEndCapture", "graph_end_capture"},
    {"sched_switch", "sched_switch"},
    {"sched_wakeup", "sched_wakeup"},
    {"mm_page_alloc", "page_alloc"},
    {"oom_kill", "oom_kill"},
    {"process_exec", "process_exec"},
    {"process_exit", "process_exit"},
    {"process_fork", "process_fork"},
    {"pod_oom_kill", "oom_kill"},
    {"block_read", "block_io"},
    {"block_write", "block_io"},
    {"block_discard", "block_io"},
    {"tcp_retransmit", "tcp_retransmit"},
};

std::string kind_case(const char* name_expr) {
  std::string s = "CASE " + std::string(name_expr);
  for (auto& [op, kind] : kLegacyKinds)
    s += " WHEN '" + std::string(op) + "' THEN '" + std::string(kind) + "'";
  return s + " ELSE 'unknown' END";
}

// Our calls view's columns, in order, with their expression over the legacy tables.
// Columns without an entry are NULL.
std::string calls_select(const TraceFileInfo& info) {
  const std::string kind = kind_case("o.name");
  const std::string node = info.legacy_has_node ? "e.node" : "''";
  std::map<std::string, std::string> expr = {
      {"id", "e.rowid"},
      {"node", node},
      {"session_id", "0"},
      {"ts_ns", "e.timestamp"},
      {"dur_ns", legacy_duration_sql("e.")},
      {"pid", "e.pid"},
      {"tid", "e.tid"},
      {"comm", "coalesce(pn.name, '')"},
      {"cgroup_id", "e.cgroup_id"},
      {"vendor", "'nvidia'"},
      {"api", "CASE e.source WHEN 1 THEN 'cuda_runtime' ELSE 'cuda_driver' END"},
      {"kind", kind},
      {"op", "coalesce(o.name, 'op' || e.op)"},
      {"ret", "e.ret_code"},
      {"status", "CASE WHEN e.ret_code = 0 AND " + legacy_duration_sql("e.") +
                     " IS NULL THEN 'untimed' WHEN e.ret_code = 0 THEN 'ok' ELSE 'error' END"},
      {"direction", "CASE WHEN " + kind +
                        " = 'memcpy' THEN CASE e.arg1 WHEN 0 THEN 'H2H' WHEN 1 THEN 'H2D' "
                        "WHEN 2 THEN 'D2H' WHEN 3 THEN 'D2D' WHEN 4 THEN 'default' END END"},
      {"bytes", "CASE WHEN " + kind + " IN ('alloc', 'memcpy', 'memset') THEN e.arg0 END"},
      {"func", "CASE WHEN " + kind + " = 'launch' THEN e.arg0 END"},
      {"device", "e.gpu_id"},
      {"stack_hash", "e.stack_hash"},
      {"stack_of_site", "0"},
      {"nested_calls", "coalesce(lo.nested_calls, 0)"},
      {"nested_op", "CASE WHEN lo.id IS NOT NULL THEN coalesce(no.name, 'op' || lo.nested_op) END"},
  };
  std::vector<std::string> cols = {"id",        "node",     "session_id",    "ts_ns",
                                   "dur_ns",    "pid",      "tid",           "comm",
                                   "cgroup_id", "vendor",   "api",           "kind",
                                   "op",        "ret",      "status",        "off_cpu_ns",
                                   "preempts",  "switches", "preemptor_pid", "preemptor_comm",
                                   "direction"};
  for (const auto& c : field_columns())
    if (c != "direction") cols.push_back(c);
  cols.push_back("stack_hash");
  cols.push_back("library_id");
  for (const char* c : {"stack_of_site", "nested_calls", "nested_op"}) cols.push_back(c);
  cols.push_back("kernel");  // the original implementation never named kernels
  std::string s = "SELECT ";
  for (size_t i = 0; i < cols.size(); ++i) {
    auto it = expr.find(cols[i]);
    s += (i ? ", " : "") + (it == expr.end() ? std::string("NULL") : it->second) + " AS " + cols[i];
  }
  s += "\n  FROM main.events e LEFT JOIN main.ops o ON o.source_id = e.source AND o.op_id = e.op"
       "\n  LEFT JOIN main.process_names pn ON pn.pid = e.pid"
       "\n  LEFT JOIN temp.legacy_outer lo ON lo.id = e.rowid"
       "\n  LEFT JOIN main.ops no ON no.source_id = 4 AND no.op_id = lo.nested_op"
       "\n WHERE e.source IN (1, 4) AND e.rowid NOT IN (SELECT id FROM temp.legacy_nested) AND " +
       legacy_has_time_sql("e.");
  return s;
}

// The calls of the file that may fold or hold one, sorted by thread (node, pid, tid) and start,
// a runtime call before a driver call begun at the same instant. Read in the file's order (a
// scan: SQLite's sorter spilled to temporary files), sorted here. A row whose time is not an
// integer, or that has no time or no duration, neither folds nor holds a call.
struct FoldCall {
  uint32_t node;
  bool driver;
  int32_t op;
  int64_t pid, tid, ts, end, id;
};

ingero::Result<std::vector<FoldCall>> fold_candidates(Db& db, const TraceFileInfo& info) {
  auto rows =
      db.prepare(std::string("SELECT rowid, ") + (info.legacy_has_node ? "node" : "''") +
                 ", pid, tid, source, timestamp, timestamp + duration, op "
                 "FROM main.events WHERE source IN (1, 4) AND typeof(timestamp) = "
                 "'integer' AND " +
                 legacy_has_time_sql("") + " AND " + legacy_duration_sql("") + " IS NOT NULL");
  if (!rows) return rows.error();
  std::vector<FoldCall> calls;
  std::unordered_map<std::string, uint32_t> nodes;
  while (true) {
    auto row = rows->step();
    if (!row) return row.error();
    if (!*row) break;
    auto [it, fresh] = nodes.try_emplace(std::string(rows->text_view(1)), uint32_t(nodes.size()));
    calls.push_back({.node = it->second,
                     .driver = rows->int64(4) == 4,
                     .op = int32_t(rows->int64(7)),
                     .pid = rows->int64(2),
                     .tid = rows->int64(3),
                     .ts = rows->int64(5),
                     .end = rows->int64(6),
                     .id = rows->int64(0)});
  }
  std::sort(calls.begin(), calls.end(), [](const FoldCall& x, const FoldCall& y) {
    return std::tie(x.node, x.pid, x.tid, x.ts, x.driver, x.id) <
           std::tie(y.node, y.pid, y.tid, y.ts, y.driver, y.id);
  });
  return calls;
}

// The tables the views read the fold from (TEMP: a read-only connection's only writable
// schema).
ingero::Status install_fold(Db& db, const LegacyFold& fold) {
  if (auto st = db.exec(
          "DROP TABLE IF EXISTS temp.legacy_nested;\n"
          "DROP TABLE IF EXISTS temp.legacy_outer;\n"
          "CREATE TEMP TABLE legacy_nested(id INTEGER PRIMARY KEY, outer_id INTEGER NOT NULL);\n"
          "CREATE TEMP TABLE legacy_outer(id INTEGER PRIMARY KEY, nested_calls INTEGER NOT NULL,\n"
          "                               nested_op INTEGER NOT NULL);\n");
      !st)
    return st;
  auto nested = db.prepare("INSERT INTO temp.legacy_nested VALUES (?, ?)");
  if (!nested) return nested.error();
  auto outer = db.prepare("INSERT INTO temp.legacy_outer VALUES (?, ?, ?)");
  if (!outer) return outer.error();
  auto run = [](Stmt& s) -> ingero::Status {
    auto r = s.step();
    s.reset();
    if (!r) return r.error();
    return {};
  };
  if (auto st = db.exec("BEGIN"); !st) return st;
  ingero::Status st;
  for (size_t i = 0; st && i < fold.nested.size(); ++i)
    st = run(nested->bind(1, fold.nested[i].first).bind(2, fold.nested[i].second));
  for (size_t i = 0; st && i < fold.outer.size(); ++i)
    st = run(outer->bind(1, fold.outer[i].id)
                 .bind(2, fold.outer[i].calls)
                 .bind(3, int64_t(fold.outer[i].first_op)));
  if (!st) {
    (void)db.exec("ROLLBACK");
    return st;
  }
  return db.exec("COMMIT");
}

}  // namespace

// The original implementation probed both the CUDA runtime (source 1) and the driver (source 4)
// and stored both calls of a runtime call that enters the driver: a cudaLaunchKernel and the
// cuLaunchKernel inside it were two launches. Our tracer folds such a call into the call in
// flight on its thread (`nested_calls`; one launch is one row), so a legacy file reads the same
// way: a driver call that begins and ends within a runtime call of its node, process and thread
// is counted in the innermost such call.
ingero::Result<LegacyFold> find_nested_calls(Db& db, const TraceFileInfo& info) {
  auto calls = fold_candidates(db, info);
  if (!calls) return calls.error();
  LegacyFold fold;
  // The thread's runtime calls still open at the call walked, innermost last, and the calls
  // found inside each.
  struct Open {
    const FoldCall* call;
    int64_t inside;
    int32_t first_op;
  };
  std::vector<Open> open;
  auto close = [&](const Open& o) {
    if (o.inside) fold.outer.push_back({o.call->id, o.inside, o.first_op});
  };
  const FoldCall* prev = nullptr;
  for (const FoldCall& c : *calls) {
    if (prev && (prev->node != c.node || prev->pid != c.pid || prev->tid != c.tid)) {
      for (const Open& o : open) close(o);
      open.clear();
    }
    prev = &c;
    while (!open.empty() && open.back().call->end < c.ts) {  // ended before this one began
      close(open.back());
      open.pop_back();
    }
    if (!c.driver) {
      open.push_back({&c, 0, 0});
      continue;
    }
    for (size_t i = open.size(); i-- > 0;) {
      if (c.end > open[i].call->end) continue;  // ends after it
      if (!open[i].inside++) open[i].first_op = c.op;
      fold.nested.emplace_back(c.id, open[i].call->id);
      break;
    }
  }
  for (const Open& o : open) close(o);
  std::sort(fold.nested.begin(), fold.nested.end());
  return fold;
}

int64_t legacy_nested_calls(Db& db, const std::optional<std::string>& node, int64_t from_ns,
                            int64_t to_ns) {
  std::string sql =
      "SELECT count(*) FROM temp.legacy_nested n JOIN main.events e ON e.rowid = n.id WHERE "
      "e.timestamp BETWEEN " +
      std::to_string(from_ns) + " AND " + std::to_string(to_ns);
  if (node && db.column_exists("events", "node")) sql += " AND e.node = " + sql_quote(*node);
  auto n = db.query_int(sql);
  return n && *n ? **n : 0;
}

std::string legacy_has_time_sql(std::string_view e) { return std::string(e) + "timestamp > 0"; }

std::string legacy_duration_sql(std::string_view e) {
  const std::string d = std::string(e) + "duration";
  return "CASE WHEN typeof(" + d + ") = 'integer' AND " + d + " >= 0 AND " + d +
         " <= 9223372036854775807 - " + std::string(e) + "timestamp THEN " + d + " END";
}

std::string legacy_end_sql(std::string_view e) {
  return std::string(e) + "timestamp + coalesce(" + legacy_duration_sql(e) + ", 0)";
}

ingero::Result<std::string> legacy_damage_words(Db& db) {
  auto st = db.prepare("SELECT coalesce(sum(NOT (" + legacy_has_time_sql("") +
                       ")), 0), coalesce(sum(" + legacy_has_time_sql("") + " AND " +
                       legacy_duration_sql("") + " IS NULL), 0) FROM main.events");
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  int64_t timeless = *row ? st->int64(0) : 0, no_duration = *row ? st->int64(1) : 0;
  std::string s;
  if (timeless)
    s += std::to_string(timeless) +
         (timeless == 1 ? " event stamped at or before 1970 (no time) is left out"
                        : " events stamped at or before 1970 (no time) are left out");
  if (no_duration)
    s += (s.empty() ? "" : "; ") + std::to_string(no_duration) +
         (no_duration == 1
              ? " event whose duration is negative or ends past 2262 is read without one"
              : " events whose duration is negative or ends past 2262 are read without one") +
         ": counted, not timed";
  return s;
}

std::string_view folded_calls_words(int64_t n) {
  return n == 1 ? " driver call made inside a runtime call is counted in it"
                : " driver calls made inside runtime calls are counted in them";
}

std::string_view legacy_kind(std::string_view op_name) {
  for (auto& [op, kind] : kLegacyKinds)
    if (op == op_name) return kind;
  return "";
}

std::optional<TraceFileInfo> detect_legacy(Db& db) {
  if (!db.table_exists("events") || !db.table_exists("sources") || !db.table_exists("ops"))
    return std::nullopt;
  for (const char* col : {"timestamp", "pid", "tid", "source", "op", "duration"})
    if (!db.column_exists("events", col)) return std::nullopt;
  TraceFileInfo info;
  info.format = TraceFormat::kLegacyGo;
  info.legacy_has_node = db.column_exists("events", "node");
  if (db.table_exists("schema_info")) {
    auto v = db.query_text("SELECT value FROM schema_info WHERE key = 'version'");
    if (v && *v) info.legacy_version = **v;
  }
  if (info.legacy_version.empty()) info.legacy_version = info.legacy_has_node ? "0.9" : "0.8";
  return info;
}

ingero::Status install_legacy_views(Db& db, const TraceFileInfo& info, const LegacyFold& fold) {
  if (auto st = install_fold(db, fold); !st) return st;
  const std::string node = info.legacy_has_node ? "e.node" : "''";
  const std::string host_kind = kind_case("o.name");
  const std::string duration = legacy_duration_sql("e.");
  std::string sql;
  for (const char* v : {"calls", "host_events", "tcp_events", "stacks"})
    sql += std::string("DROP VIEW IF EXISTS temp.") + v + ";\n";
  sql += stacks_view_sql("CREATE TEMP VIEW", false, db.table_exists("stack_traces"));
  sql += "CREATE TEMP VIEW calls AS " + calls_select(info) + ";\n";
  sql += "CREATE TEMP VIEW host_events AS SELECT e.rowid AS id, " + node +
         " AS node, 0 AS session_id, e.timestamp AS ts_ns, " + duration +
         " AS dur_ns, e.timestamp AS timestamp_ns, " + duration +
         " AS duration_ns, e.pid, e.tid, "
         "coalesce(pn.name, '') AS comm, e.cgroup_id, coalesce(o.name, 'op' || e.op) AS event, " +
         host_kind +
         " AS kind, NULL AS cpu, NULL AS state, "
         "CASE WHEN o.name = 'process_fork' THEN e.arg1 END AS peer_pid, NULL AS peer_tid, "
         "NULL AS peer_comm, CASE WHEN o.name IN ('mm_page_alloc', 'block_read', 'block_write', "
         "'block_discard') THEN e.arg0 END AS bytes, NULL AS count, NULL AS device, "
         "NULL AS sector, NULL AS detail, NULL AS saddr, NULL AS daddr, NULL AS sport, "
         "NULL AS dport, e.ret_code AS code, NULL AS flags, NULL AS peer_cgroup FROM main.events e "
         "LEFT JOIN main.ops o ON o.source_id = e.source AND o.op_id = e.op "
         "LEFT JOIN main.process_names pn ON pn.pid = e.pid "
         "WHERE e.source NOT IN (1, 4) AND " +
         legacy_has_time_sql("e.") + ";\n";
  sql += "CREATE TEMP VIEW tcp_events AS SELECT e.rowid AS id, " + node +
         " AS node, e.timestamp AS timestamp_ns, e.pid, e.tid, '' AS comm, e.cgroup_id, "
         "'tcp_retransmit_skb' AS event, NULL AS saddr, NULL AS daddr, NULL AS sport, "
         "NULL AS dport, NULL AS tcp_state FROM main.events e WHERE e.source = 6 AND " +
         legacy_has_time_sql("e.") + ";\n";
  return db.exec(sql);
}

}  // namespace ingero::store

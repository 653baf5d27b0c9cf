#include "store/legacy_views.h"

#include <map>
#include <string>

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
      {"dur_ns", "e.duration"},
      {"pid", "e.pid"},
      {"tid", "e.tid"},
      {"comm", "coalesce(pn.name, '')"},
      {"cgroup_id", "e.cgroup_id"},
      {"vendor", "'nvidia'"},
      {"api", "CASE e.source WHEN 1 THEN 'cuda_runtime' ELSE 'cuda_driver' END"},
      {"kind", kind},
      {"op", "coalesce(o.name, 'op' || e.op)"},
      {"ret", "e.ret_code"},
      {"status", "CASE WHEN e.ret_code = 0 THEN 'ok' ELSE 'error' END"},
      {"direction", "CASE WHEN " + kind +
                        " = 'memcpy' THEN CASE e.arg1 WHEN 0 THEN 'H2H' WHEN 1 THEN 'H2D' "
                        "WHEN 2 THEN 'D2H' WHEN 3 THEN 'D2D' WHEN 4 THEN 'default' END END"},
      {"bytes", "CASE WHEN " + kind + " IN ('alloc', 'memcpy', 'memset') THEN e.arg0 END"},
      {"func", "CASE WHEN " + kind + " = 'launch' THEN e.arg0 END"},
      {"device", "e.gpu_id"},
      {"stack_hash", "e.stack_hash"},
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
  cols.push_back("kernel");  // the original implementation never named kernels
  std::string s = "SELECT ";
  for (size_t i = 0; i < cols.size(); ++i) {
    auto it = expr.find(cols[i]);
    s += (i ? ", " : "") + (it == expr.end() ? std::string("NULL") : it->second) + " AS " + cols[i];
  }
  s += "\n  FROM main.events e LEFT JOIN main.ops o ON o.source_id = e.source AND o.op_id = e.op"
       "\n  LEFT JOIN main.process_names pn ON pn.pid = e.pid"
       "\n WHERE e.source IN (1, 4)";
  return s;
}

}  // namespace

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

ingero::Status install_legacy_views(Db& db, const TraceFileInfo& info) {
  const std::string node = info.legacy_has_node ? "e.node" : "''";
  const std::string host_kind = kind_case("o.name");
  std::string sql;
  for (const char* v : {"calls", "host_events", "tcp_events", "stacks"})
    sql += std::string("DROP VIEW IF EXISTS temp.") + v + ";\n";
  sql += stacks_view_sql("CREATE TEMP VIEW", false, db.table_exists("stack_traces"));
  sql += "CREATE TEMP VIEW calls AS " + calls_select(info) + ";\n";
  sql += "CREATE TEMP VIEW host_events AS SELECT e.rowid AS id, " + node +
         " AS node, 0 AS session_id, e.timestamp AS ts_ns, e.duration AS dur_ns, "
         "e.timestamp AS timestamp_ns, e.duration AS duration_ns, e.pid, e.tid, "
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
         "WHERE e.source NOT IN (1, 4);\n";
  sql += "CREATE TEMP VIEW tcp_events AS SELECT e.rowid AS id, " + node +
         " AS node, e.timestamp AS timestamp_ns, e.pid, e.tid, '' AS comm, e.cgroup_id, "
         "'tcp_retransmit_skb' AS event, NULL AS saddr, NULL AS daddr, NULL AS sport, "
         "NULL AS dport, NULL AS tcp_state FROM main.events e WHERE e.source = 6;\n";
  return db.exec(sql);
}

}  // namespace ingero::store

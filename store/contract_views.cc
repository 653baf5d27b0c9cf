#include "store/contract_views.h"

#include "store/schema.h"

namespace ingero::store {
namespace {

// `has` says which optional events columns the file has (a file written by an older build and
// opened read-only cannot gain them): a missing one reads as NULL, or 0 for the v5 counts.
// `call_store`: the file keeps its calls in call_store (schema 10, store/call_store.h), read
// through ingero_calls, and its host events in host_rows. `kernel_table`: it has kernel_names.
std::string views_body(const char* create, const std::function<bool(const std::string&)>& has,
                       bool call_store, bool kernel_table) {
  std::string fields;
  for (const auto& c : field_columns()) {
    if (c == "direction") continue;
    fields += has(c) ? ", e." + c : ", NULL AS " + c;
  }
  bool v5 = has("nested_calls");
  std::string v5_cols =
      v5 ? ", coalesce(e.stack_of_site, 0) AS stack_of_site,\n"
           "       coalesce(e.nested_calls, 0) AS nested_calls, no.name AS nested_op\n"
         : ", 0 AS stack_of_site, 0 AS nested_calls, NULL AS nested_op\n";
  std::string v5_join =
      v5 ? "  LEFT JOIN ops no ON no.source_id = e.nested_source AND no.op_id = e.nested_op\n" : "";
  // A launch's kernel, from the names the tracer learned (store/kernel_names.h): by process and
  // function, so every launch of a function is named whenever its name became known.
  std::string kernel_col = kernel_table ? ", k.name AS kernel\n" : ", NULL AS kernel\n";
  std::string kernel_join =
      kernel_table ? "  LEFT JOIN kernel_names k ON k.node = e.node AND k.pid = e.pid AND\n"
                     "                               k.func = e.func AND o.kind = 'launch'\n"
                   : "";
  // Who woke a thread that blocked (sched_switch): absent from files written before it was kept.
  std::string waker_cols;
  for (const char* w : {"waker_pid", "waker_tid", "runq_ns"})
    waker_cols += std::string(", ") + (has(w) ? "e." : "NULL AS ") + w;
  // A call still in progress (class 3, "not ready": ncclInProgress) answered, and failed not:
  // as the summaries, explain and the metrics count it (hal/call_failure.h). Files written
  // before the classes (or before err_class) say 'error' for it.
  std::string not_ready =
      has("err_class") ? "            WHEN e.err_class = 3 THEN 'not_ready'\n" : "";
  std::string c = create;
  std::string calls_from = call_store ? "ingero_calls" : "events";
  std::string host_from = call_store ? "main.host_rows" : "events";
  return c +
         " calls AS\n"
         "SELECT e.id, e.node, e.session_id, e.timestamp AS ts_ns, e.duration AS dur_ns,\n"
         "       e.pid, e.tid, e.comm, e.cgroup_id, s.vendor, s.api, o.kind, o.name AS op,\n"
         "       e.ret_code AS ret,\n"
         "       CASE WHEN e.status = 1 THEN 'unfinished' WHEN e.status = 2 THEN 'untimed'\n"
         "            WHEN e.ret_code = 0 THEN 'ok'\n" +
         not_ready +
         "            ELSE 'error' END AS status,\n"
         "       e.off_cpu_ns, e.preempts, e.switches, e.peer_pid AS preemptor_pid,\n"
         "       e.peer_comm AS preemptor_comm,\n"
         "       CASE e.direction WHEN 0 THEN 'H2H' WHEN 1 THEN 'H2D' WHEN 2 THEN 'D2H'\n"
         "            WHEN 3 THEN 'D2D' WHEN 4 THEN 'default' WHEN 5 THEN 'peer' END AS direction" +
         fields + ", e.stack_hash, e.library_id" + v5_cols + kernel_col + "  FROM " + calls_from +
         " e JOIN sources s ON s.id = e.source\n"
         "  JOIN ops o ON o.source_id = e.source AND o.op_id = e.op\n" +
         v5_join + kernel_join + " WHERE s.vendor <> 'host';\n" + c +
         " host_events AS\n"
         "SELECT e.id, e.node, e.session_id, e.timestamp AS ts_ns, e.duration AS dur_ns,\n"
         "       e.timestamp AS timestamp_ns, e.duration AS duration_ns, e.pid, e.tid, e.comm,\n"
         "       e.cgroup_id, o.name AS event, o.kind, e.cpu, e.state, e.peer_pid, e.peer_tid,\n"
         "       e.peer_comm, e.bytes, e.count, e.device, e.sector, e.detail, e.saddr, e.daddr,\n"
         "       e.sport, e.dport, e.ret_code AS code, e.flags, e.peer_cgroup" +
         waker_cols + ", e.stack_hash\n  FROM " + host_from +
         " e JOIN sources s ON s.id = e.source\n"
         "  JOIN ops o ON o.source_id = e.source AND o.op_id = e.op\n"
         " WHERE s.vendor = 'host';\n" +
         c +
         " tcp_events AS\n"
         "SELECT e.id, e.node, e.timestamp AS timestamp_ns, e.pid, e.tid, e.comm, e.cgroup_id,\n"
         "       'tcp_retransmit_skb' AS event, e.saddr, e.daddr, e.sport, e.dport,\n"
         "       e.state AS tcp_state\n"
         "  FROM " +
         host_from + " e WHERE e.source = 6;\n";
}

}  // namespace

std::string stacks_view_sql(const char* create, bool stack_table, bool legacy_table) {
  // Ours: one row per frame in stack_frames.
  const char* ours =
      "SELECT stack_id, frame, kind, function, file, line, module, module_offset, build_id,\n"
      "       CASE WHEN module_offset IS NULL THEN '' ELSE printf('%s+0x%x', module, "
      "module_offset) END AS address,\n"
      "       CASE kind WHEN 'python' THEN '[Python] ' || file || ':' || coalesce(line, '?') || "
      "' in ' || function || '()'\n"
      "            ELSE coalesce(nullif(function, ''), '?\?') ||\n"
      "                 CASE WHEN file <> '' THEN ' at ' || file || ':' || coalesce(line, '?') "
      "ELSE '' END ||\n"
      "                 printf(' (%s+0x%x)', module, module_offset) END AS location\n"
      "  FROM stack_frames";
  // The original implementation's stack_traces: frames as a JSON array, native {i, s, f},
  // Python {pf, pfn, pl}. `address` is its raw instruction pointer; there is no file offset.
  const char* legacy =
      "SELECT st.hash AS stack_id, CAST(j.key AS INTEGER) AS frame,\n"
      "  CASE WHEN json_extract(j.value, '$.pf') IS NOT NULL THEN 'python' ELSE 'native' END AS "
      "kind,\n"
      "  coalesce(json_extract(j.value, '$.pfn'), json_extract(j.value, '$.s'), '') AS function,\n"
      "  coalesce(json_extract(j.value, '$.pf'), '') AS file, json_extract(j.value, '$.pl') AS "
      "line,\n"
      "  coalesce(json_extract(j.value, '$.f'), '') AS module, NULL AS module_offset, '' AS "
      "build_id,\n"
      "  coalesce(json_extract(j.value, '$.i'), '') AS address,\n"
      "  CASE WHEN json_extract(j.value, '$.pf') IS NOT NULL THEN '[Python] ' ||\n"
      "    json_extract(j.value, '$.pf') || ':' || json_extract(j.value, '$.pl') || ' in ' ||\n"
      "    json_extract(j.value, '$.pfn') || '()'\n"
      "  ELSE coalesce(json_extract(j.value, '$.s'), json_extract(j.value, '$.i'), '?\?') || ' ('"
      " ||\n"
      "    coalesce(json_extract(j.value, '$.f'), '?') || ')' END AS location\n"
      "  FROM stack_traces st,\n"
      "       json_each(CASE WHEN json_valid(st.frames) THEN st.frames ELSE '[]' END) j";
  std::string body;
  if (stack_table) body = ours;
  if (legacy_table) body += std::string(body.empty() ? "" : "\nUNION ALL\n") + legacy;
  if (body.empty())
    body =
        "SELECT 0 AS stack_id, 0 AS frame, '' AS kind, '' AS function, '' AS file, 0 AS line,\n"
        "  '' AS module, 0 AS module_offset, '' AS build_id, '' AS address, '' AS location "
        "WHERE 0";
  return std::string(create) + " stacks AS\n" + body + ";\n";
}

std::string contract_views_sql(bool temp, bool stack_table, bool legacy_stack_table,
                               const std::function<bool(const std::string&)>& has_column,
                               bool call_store, bool kernel_table) {
  std::string drops;
  const char* schema = temp ? "temp." : "main.";
  for (const char* v : {"calls", "host_events", "tcp_events", "stacks"})
    drops += std::string("DROP VIEW IF EXISTS ") + schema + v + ";\n";
  const char* create = temp ? "CREATE TEMP VIEW" : "CREATE VIEW";
  auto all = [](const std::string&) { return true; };
  return drops + views_body(create, has_column ? has_column : all, call_store, kernel_table) +
         stacks_view_sql(create, stack_table, legacy_stack_table);
}

ingero::Status install_vendor_views(Db& db, bool temp, std::span<const hal::SqlView> views) {
  const std::string schema = temp ? "temp." : "main.";
  for (const auto& v : views) {
    std::string name(v.name);
    if (db.is_table(name)) continue;  // an older file's own table of that name
    std::string sql = "DROP VIEW IF EXISTS " + schema + name + ";\n" +
                      (temp ? "CREATE TEMP VIEW " : "CREATE VIEW ") + name + " AS\n" +
                      std::string(v.select) + ";\n";
    if (auto st = db.exec(sql); !st) return st;
    // A view is created without looking at what it reads; one this file cannot serve (it names
    // a table the file lacks) is not installed.
    if (!db.prepare("SELECT * FROM " + schema + name + " LIMIT 0"))
      if (auto st = db.exec("DROP VIEW " + schema + name); !st) return st;
  }
  return {};
}

ingero::Status install_device_counters_compat(Db& db) {
  if (db.table_exists("device_counters") || !db.is_table("rdma_counters")) return {};
  return db.exec(std::string("DROP VIEW IF EXISTS temp.device_counters;\n"
                             "CREATE TEMP VIEW device_counters AS\n") +
                 kRdmaCountersAsDeviceCounters + ";\n");
}

}  // namespace ingero::store

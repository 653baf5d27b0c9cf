#include "fleet/ch_schema.h"

#include "store/schema.h"

namespace ingero::fleet {
namespace {

constexpr const char* kDayPartition = "toYYYYMMDD(toDateTime(intDiv({}, 1000000000), 'UTC'))";

std::string day_partition(const std::string& column) {
  std::string s = kDayPartition;
  return s.replace(s.find("{}"), 2, column);
}

// Columns every table shipped by row id starts with.
std::vector<ColumnSpec> rowid_head(const std::string& node, const std::string& session_start,
                                   const std::string& id) {
  std::vector<ColumnSpec> c = {{"node", "String", node}};
  if (!session_start.empty()) c.push_back({"session_start", "UInt64", session_start});
  c.push_back({"file_start", "UInt64", ":file_start"});
  c.push_back({"src_id", "UInt64", id});
  return c;
}

TableSpec sessions() {
  TableSpec t;
  t.name = "sessions";
  t.mode = ShipMode::kSessions;
  t.columns = {{"node", "String", "s.node"},
               {"started_at", "UInt64", "s.started_at"},
               {"stopped_at", "UInt64", "s.stopped_at"}};
  for (const char* c : {"host", "kernel", "os_release", "cpu_model"})
    t.columns.push_back({c, "String", std::string("s.") + c});
  t.columns.push_back({"cpu_cores", "UInt32", "s.cpu_cores"});
  t.columns.push_back({"mem_total", "Int64", "s.mem_total"});
  t.columns.push_back({"mono_offset_ns", "Int64", "s.mono_offset_ns"});
  for (const char* c : {"ingero_ver", "pid_filter", "flags", "backends"})
    t.columns.push_back({c, "String", std::string("s.") + c});
  for (const char* c : {"attached_probes", "events_stored", "ringbuf_drops", "lost_calls",
                        "store_errors", "unfinished_calls"})
    t.columns.push_back({c, "Int64", std::string("s.") + c});
  // Losses by kind (trace schema v5); -1 when the file predates them (Spool::select_sql).
  for (const char* c :
       {"call_drops", "stack_drops", "host_drops", "sample_drops", "calls_lost_at_exit"})
    t.columns.push_back({c, "Int64", std::string("s.") + c});
  t.columns.push_back({"bpf_stats", "String", "s.bpf_stats"});
  t.columns.push_back({"exit_reason", "String", "s.exit_reason"});
  t.columns.push_back({"file_start", "UInt64", ":file_start"});
  t.columns.push_back({"src_id", "UInt64", "s.id"});
  // A session's row is shipped when it starts and again when it stops: the later version
  // (larger stopped_at) replaces the earlier one when parts merge; readers take the latest.
  t.engine = "ReplacingMergeTree(stopped_at)";
  t.order_by = "(node, started_at)";
  t.source_from = "sessions s";
  t.source_id = "s.id";
  return t;
}

TableSpec libraries() {
  TableSpec t;
  t.name = "libraries";
  t.columns = rowid_head("coalesce(ss.node, '')", "coalesce(ss.started_at, 0)", "l.id");
  for (const char* c : {"backend", "vendor", "api", "path", "soname", "version", "build_id"})
    t.columns.push_back({c, "String", std::string("l.") + c});
  t.columns.push_back({"embedded", "UInt8", "l.embedded"});
  for (const char* c : {"specs_total", "specs_resolved", "probes_attached"})
    t.columns.push_back({c, "Int64", std::string("l.") + c});
  t.columns.push_back({"missing", "String", "l.missing"});
  t.columns.push_back({"errors", "String", "l.errors"});
  t.order_by = "(node, session_start, src_id)";
  t.source_from = "libraries l LEFT JOIN sessions ss ON ss.id = l.session_id";
  t.source_id = "l.id";
  return t;
}

TableSpec events() {
  TableSpec t;
  t.name = "events";
  t.columns = rowid_head("e.node", "coalesce(ss.started_at, 0)", "e.id");
  auto add = [&](const char* name, const char* type, const std::string& src) {
    t.columns.push_back({name, type, src});
  };
  add("ts_ns", "UInt64", "e.timestamp");
  add("dur_ns", "UInt64", "e.duration");
  add("pid", "UInt32", "e.pid");
  add("tid", "UInt32", "e.tid");
  add("comm", "String", "e.comm");
  add("cgroup_id", "Int64", "e.cgroup_id");
  add("vendor", "String", "src.vendor");
  add("api", "String", "src.api");
  add("kind", "String", "o.kind");
  add("op", "String", "o.name");
  add("ret", "Nullable(Int64)", "e.ret_code");
  add("status", "UInt8", "e.status");
  add("off_cpu_ns", "Nullable(Int64)", "e.off_cpu_ns");
  add("preempts", "Nullable(Int64)", "e.preempts");
  add("switches", "Nullable(Int64)", "e.switches");
  add("peer_comm", "String", "e.peer_comm");
  add("detail", "String", "e.detail");
  add("saddr", "String", "e.saddr");
  add("daddr", "String", "e.daddr");
  add("stack_hash", "Int64", "e.stack_hash");
  add("library_id", "Nullable(Int64)", "e.library_id");
  for (const std::string& f : store::field_columns())
    t.columns.push_back({f, "Nullable(Int64)", "e." + f});
  t.partition = day_partition("ts_ns");
  t.order_by = "(node, pid, ts_ns)";
  t.day_column = "ts_ns";
  t.source_from =
      "events e JOIN sources src ON src.id = e.source "
      "JOIN ops o ON o.source_id = e.source AND o.op_id = e.op "
      "LEFT JOIN sessions ss ON ss.id = e.session_id";
  t.source_id = "e.id";
  return t;
}

TableSpec snapshots() {
  TableSpec t;
  t.name = "system_snapshots";
  t.columns = rowid_head("x.node", "", "x.id");
  t.columns.push_back({"timestamp", "UInt64", "x.timestamp"});
  for (const char* c : {"cpu_pct", "mem_pct"})
    t.columns.push_back({c, "Float64", std::string("x.") + c});
  t.columns.push_back({"mem_avail", "Int64", "x.mem_avail"});
  t.columns.push_back({"swap_mb", "Int64", "x.swap_mb"});
  t.columns.push_back({"load_avg", "Float64", "x.load_avg"});
  t.columns.push_back({"procs_running", "Int64", "x.procs_running"});
  t.partition = day_partition("timestamp");
  t.order_by = "(node, timestamp)";
  t.day_column = "timestamp";
  t.source_from = "system_snapshots x";
  t.source_id = "x.id";
  return t;
}

TableSpec process_stats() {
  TableSpec t;
  t.name = "process_stats";
  t.columns = rowid_head("p.node", "coalesce(ss.started_at, 0)", "p.id");
  t.columns.push_back({"timestamp", "UInt64", "p.timestamp"});
  t.columns.push_back({"duration", "UInt64", "p.duration"});
  t.columns.push_back({"pid", "UInt32", "p.pid"});
  t.columns.push_back({"comm", "String", "p.comm"});
  t.columns.push_back({"cgroup_id", "Int64", "p.cgroup_id"});
  for (const char* c :
       {"switches", "involuntary", "off_cpu_ns", "max_off_cpu_ns", "wakeups", "page_allocs",
        "page_bytes", "forks", "block_ios", "block_bytes", "block_ns"})
    t.columns.push_back({c, "Int64", std::string("p.") + c});
  t.partition = day_partition("timestamp");
  t.order_by = "(node, pid, timestamp)";
  t.day_column = "timestamp";
  t.source_from = "process_stats p LEFT JOIN sessions ss ON ss.id = p.session_id";
  t.source_id = "p.id";
  return t;
}

// Every backend's polled counters (SQLite device_counters, schema 6+); the rdma_counters view
// keeps the columns of the table shipped before.
TableSpec device_counters() {
  TableSpec t;
  t.name = "device_counters";
  t.columns = rowid_head("r.node", "coalesce(ss.started_at, 0)", "r.id");
  t.columns.push_back({"timestamp", "UInt64", "r.timestamp"});
  t.columns.push_back({"backend", "String", "r.backend"});
  t.columns.push_back({"device", "String", "r.device"});
  t.columns.push_back({"port", "UInt32", "r.port"});
  t.columns.push_back({"counter", "String", "r.counter"});
  t.columns.push_back({"value", "Int64", "r.value"});
  t.columns.push_back({"base_value", "Int64", "r.base_value"});
  t.columns.push_back({"unit", "String", "r.unit"});
  t.columns.push_back({"is_error", "UInt8", "r.is_error"});
  t.columns.push_back({"attributes", "String", "r.attributes"});
  t.partition = day_partition("timestamp");
  t.order_by = "(node, timestamp)";
  t.day_column = "timestamp";
  t.source_from = "device_counters r LEFT JOIN sessions ss ON ss.id = r.session_id";
  t.source_id = "r.id";
  return t;
}

TableSpec causal_chains() {
  TableSpec t;
  t.name = "causal_chains";
  t.mode = ShipMode::kChains;
  t.columns = {{"node", "String", "c.node"},
               {"session_start", "UInt64", "coalesce(ss.started_at, 0)"},
               {"file_start", "UInt64", ":file_start"},
               {"id", "String", "c.id"},
               {"detected_at", "UInt64", "c.detected_at"}};
  for (const char* c :
       {"severity", "summary", "root_cause", "explanation", "recommendations", "cuda_op"})
    t.columns.push_back({c, "String", std::string("c.") + c});
  t.columns.push_back({"cuda_p99_us", "Int64", "c.cuda_p99_us"});
  t.columns.push_back({"cuda_p50_us", "Int64", "c.cuda_p50_us"});
  t.columns.push_back({"tail_ratio", "Float64", "c.tail_ratio"});
  for (const char* c : {"timeline", "rule", "vendor", "api", "pids"})
    t.columns.push_back({c, "String", std::string("c.") + c});
  t.columns.push_back({"window_start", "Int64", "c.window_start"});
  t.columns.push_back({"window_end", "Int64", "c.window_end"});
  t.order_by = "(node, session_start, id)";
  t.source_from = "causal_chains c LEFT JOIN sessions ss ON ss.id = c.session_id";
  return t;
}

TableSpec stack_frames() {
  TableSpec t;
  t.name = "stack_frames";
  t.mode = ShipMode::kStacks;
  t.columns = {
      {"node", "String", ":node"},          {"stack_id", "Int64", "f.stack_id"},
      {"frame", "UInt32", "f.frame"},       {"kind", "String", "f.kind"},
      {"module", "String", "f.module"},     {"module_offset", "Nullable(Int64)", "f.module_offset"},
      {"build_id", "String", "f.build_id"}, {"function", "String", "f.function"},
      {"file", "String", "f.file"},         {"line", "Nullable(Int64)", "f.line"}};
  t.order_by = "(node, stack_id, frame)";
  t.source_from = "stack_frames f";
  return t;
}

// The device side channel's rows (SQLite device_samples and device_events): an absent figure
// stays NULL.
TableSpec device_samples() {
  TableSpec t;
  t.name = "device_samples";
  t.columns = rowid_head("d.node", "coalesce(ss.started_at, 0)", "d.id");
  t.columns.push_back({"timestamp", "UInt64", "d.timestamp"});
  t.columns.push_back({"period_ns", "Int64", "d.period_ns"});
  t.columns.push_back({"source", "String", "d.source"});
  t.columns.push_back({"device", "UInt32", "d.device"});
  t.columns.push_back({"uuid", "String", "d.uuid"});
  t.columns.push_back({"pid", "Nullable(UInt32)", "d.pid"});
  for (const char* c : {"sm_util", "mem_util"})
    t.columns.push_back({c, "Nullable(Float64)", std::string("d.") + c});
  for (const char* c : {"mem_used", "mem_total", "sm_clock_mhz", "mem_clock_mhz", "power_mw",
                        "temperature_c", "throttle_reasons", "ecc_corrected", "ecc_uncorrected"})
    t.columns.push_back({c, "Nullable(Int64)", std::string("d.") + c});
  t.partition = day_partition("timestamp");
  t.order_by = "(node, device, timestamp)";
  t.day_column = "timestamp";
  t.source_from = "device_samples d LEFT JOIN sessions ss ON ss.id = d.session_id";
  t.source_id = "d.id";
  return t;
}

TableSpec device_events() {
  TableSpec t;
  t.name = "device_events";
  t.columns = rowid_head("d.node", "coalesce(ss.started_at, 0)", "d.id");
  t.columns.push_back({"timestamp", "UInt64", "d.timestamp"});
  t.columns.push_back({"source", "String", "d.source"});
  t.columns.push_back({"device", "UInt32", "d.device"});
  t.columns.push_back({"uuid", "String", "d.uuid"});
  t.columns.push_back({"kind", "String", "d.kind"});
  t.columns.push_back({"code", "Int64", "d.code"});
  t.columns.push_back({"detail", "String", "d.detail"});
  t.partition = day_partition("timestamp");
  t.order_by = "(node, timestamp)";
  t.day_column = "timestamp";
  t.source_from = "device_events d LEFT JOIN sessions ss ON ss.id = d.session_id";
  t.source_id = "d.id";
  return t;
}

TableSpec process_names() {
  TableSpec t;
  t.name = "process_names";
  t.mode = ShipMode::kProcesses;
  t.columns = {{"node", "String", "p.node"},
               {"pid", "UInt32", "p.pid"},
               {"name", "String", "p.name"},
               {"cmdline", "String", "p.cmdline"},
               {"seen_at", "UInt64", "p.seen_at"}};
  t.order_by = "(node, pid, seen_at)";
  t.source_from = "process_names p";
  return t;
}

TableSpec cgroups() {
  TableSpec t;
  t.name = "cgroup_metadata";
  t.mode = ShipMode::kCgroups;
  t.columns = {{"node", "String", ":node"},
               {"cgroup_id", "Int64", "g.cgroup_id"},
               {"container_id", "String", "g.container_id"},
               {"cgroup_path", "String", "g.cgroup_path"},
               {"pod_name", "String", "g.pod_name"},
               {"namespace", "String", "g.namespace"}};
  // Who the cgroup belongs to, added later (docs/schema.md): NULL where unknown, and in files
  // written before them. ensure_schema() adds them to tables created without.
  for (const char* c : {"container_name", "pod_uid", "qos_class", "runtime", "names_from"})
    t.columns.push_back({c, "Nullable(String)", std::string("g.") + c});
  t.order_by = "(node, cgroup_id)";
  t.source_from = "cgroup_metadata g";
  return t;
}

std::string columns_ddl(const TableSpec& t) {
  std::string s;
  for (const auto& c : t.columns) s += (s.empty() ? "  " : ",\n  ") + c.name + " " + c.type;
  return s;
}

}  // namespace

std::string TableSpec::column_list() const {
  std::string s;
  for (const auto& c : columns) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

int TableSpec::column_index(std::string_view column) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i].name == column) return int(i);
  return -1;
}

const std::vector<TableSpec>& fleet_tables() {
  static const std::vector<TableSpec> tables = {
      sessions(),      libraries(),     stack_frames(),    events(),
      snapshots(),     process_stats(), device_counters(), device_samples(),
      device_events(), process_names(), cgroups(),         causal_chains()};
  return tables;
}

const TableSpec* find_table(std::string_view name) {
  for (const auto& t : fleet_tables())
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<std::string> local_ddl(const std::string& db) {
  std::vector<std::string> out = {"CREATE DATABASE IF NOT EXISTS " + db};
  for (const auto& t : fleet_tables()) {
    std::string s = "CREATE TABLE IF NOT EXISTS " + db + "." + t.name + " (\n" + columns_ddl(t) +
                    "\n) ENGINE = " + t.engine;
    if (!t.partition.empty()) s += "\nPARTITION BY " + t.partition;
    s += "\nORDER BY " + t.order_by;
    out.push_back(std::move(s));
  }
  for (auto& v : views_ddl(db)) out.push_back(std::move(v));
  return out;
}

std::vector<std::string> distributed_ddl(const std::string& db, const std::string& cluster,
                                         const std::string& shard_db) {
  std::vector<std::string> out = {"CREATE DATABASE IF NOT EXISTS " + db};
  for (const auto& t : fleet_tables())
    out.push_back("CREATE TABLE IF NOT EXISTS " + db + "." + t.name + " (\n" + columns_ddl(t) +
                  "\n) ENGINE = Distributed(" + cluster + ", " + shard_db + ", " + t.name +
                  ", cityHash64(node))");
  for (auto& v : views_ddl(db)) out.push_back(std::move(v));
  return out;
}

std::vector<std::string> views_ddl(const std::string& db) {
  std::string fields, host;
  for (const std::string& f : store::field_columns())
    if (f != "direction") fields += ", " + f;
  return {
      "CREATE VIEW IF NOT EXISTS " + db +
          ".calls AS\n"
          "SELECT src_id AS id, node, session_start, ts_ns, dur_ns, pid, tid, comm, cgroup_id,\n"
          "       vendor, api, kind, op, ret,\n"
          "       multiIf(status = 1, 'unfinished', ifNull(ret, 1) = 0, 'ok', 'error') AS status,\n"
          "       off_cpu_ns, preempts, switches, peer_pid AS preemptor_pid,\n"
          "       peer_comm AS preemptor_comm,\n"
          "       if(isNull(direction), NULL, transform(assumeNotNull(direction),\n"
          "          [toInt64(0), 1, 2, 3, 4, 5], ['H2H', 'H2D', 'D2H', 'D2D', 'default', "
          "'peer'],\n"
          "          '')) AS direction" +
          fields + ", stack_hash, library_id\n  FROM " + db + ".events WHERE vendor != 'host'",
      // The columns of the trace file's rdma_counters.
      "CREATE VIEW IF NOT EXISTS " + db +
          ".rdma_counters AS\n"
          "SELECT node, session_start, file_start, src_id, timestamp, device, port,\n"
          "       visitParamExtractString(attributes, 'transport') AS transport,\n"
          "       visitParamExtractString(attributes, 'state') AS state,\n"
          "       visitParamExtractString(attributes, 'rate') AS rate, counter, value, base_value, "
          "unit,\n"
          "       is_error\n  FROM " +
          db + ".device_counters WHERE backend = 'rdma'",
      "CREATE VIEW IF NOT EXISTS " + db +
          ".host_events AS\n"
          "SELECT src_id AS id, node, session_start, ts_ns, dur_ns, ts_ns AS timestamp_ns,\n"
          "       dur_ns AS duration_ns, pid, tid, comm, cgroup_id, op AS event, kind, cpu, "
          "state,\n"
          "       peer_pid, peer_tid, peer_comm, bytes, count, device, sector, detail, saddr,\n"
          "       daddr, sport, dport, ret AS code, flags, peer_cgroup\n  FROM " +
          db + ".events WHERE vendor = 'host'"};
}

}  // namespace ingero::fleet

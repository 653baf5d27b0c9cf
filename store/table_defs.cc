#include "store/table_defs.h"

#include <cstdlib>
#include <iostream>

#include "hal/event.h"

namespace ingero::store {
namespace {

// Declarations used over and over.
const std::string kText = "TEXT NOT NULL DEFAULT ''";
const std::string kInt0 = "INTEGER NOT NULL DEFAULT 0";
const std::string kInt = "INTEGER NOT NULL";

ColumnDef col(std::string name, std::string decl, std::string ch, std::string comment = "",
              std::string ch_name = "") {
  return {std::move(name), std::move(decl), std::move(ch), std::move(comment), std::move(ch_name)};
}

TableDef sessions() {
  TableDef t{"sessions", {}, {}, {}, {}};
  auto& c = t.columns;
  c.push_back(col("id", "INTEGER PRIMARY KEY", ""));
  c.push_back(col("node", kText, "String"));
  for (const char* s : {"host", "kernel", "os_release", "cpu_model"})
    c.push_back(col(s, kText, "String"));
  c.push_back(col("cpu_cores", kInt0, "UInt32"));
  c.push_back(col("mem_total", kInt0, "Int64", "MiB"));
  c.push_back(col("started_at", kInt, "UInt64", "unix epoch ns"));
  c.push_back(col("stopped_at", kInt0, "UInt64"));
  c.push_back(col("mono_offset_ns", kInt0, "Int64", "CLOCK_REALTIME - CLOCK_MONOTONIC at start"));
  for (const char* s : {"ingero_ver", "pid_filter", "flags", "backends"})
    c.push_back(col(s, kText, "String"));
  c.push_back(col("attached_probes", kInt0, "Int64"));
  c.push_back(col("events_stored", kInt0, "Int64"));
  c.push_back(
      col("ringbuf_drops", kInt0, "Int64", "records the kernel could not queue (all kinds)"));
  c.push_back(col("lost_calls", kInt0, "Int64", "not traced: thread table full, too deep"));
  c.push_back(col("store_errors", kInt0, "Int64", "events decoded but not written"));
  c.push_back(col("unfinished_calls", kInt0, "Int64"));
  c.push_back(
      col("bpf_stats", "TEXT NOT NULL DEFAULT '{}'", "String", "every in-kernel counter, JSON"));
  c.push_back(col("exit_reason", kText, "String"));
  // v5: losses by kind (older files gain them by ALTER TABLE; store/schema.cc).
  for (const char* s :
       {"call_drops", "stack_drops", "host_drops", "sample_drops", "calls_lost_at_exit"})
    c.push_back(col(s, kInt0, "Int64"));
  // v10: what retention deleted while the session ran (not shipped).
  for (const char* s : {"retention_calls", "retention_events"}) c.push_back(col(s, kInt0, ""));
  return t;
}

TableDef process_names() {
  TableDef t{"process_names", {}, "PRIMARY KEY (node, pid)", {}, {}};
  t.columns = {col("node", kText, "String"), col("pid", kInt, "UInt32"),
               col("name", "TEXT NOT NULL", "String"), col("cmdline", kText, "String"),
               col("seen_at", kInt0, "UInt64")};
  return t;
}

TableDef libraries() {
  TableDef t{"libraries", {}, {}, {}, {}};
  auto& c = t.columns;
  c.push_back(col("id", "INTEGER PRIMARY KEY", ""));
  c.push_back(col("session_id", kInt, ""));
  for (const char* s : {"backend", "vendor", "api", "path"})
    c.push_back(col(s, "TEXT NOT NULL", "String"));
  for (const char* s : {"soname", "version", "build_id"}) c.push_back(col(s, kText, "String"));
  c.push_back(col("embedded", kInt0, "UInt8"));
  for (const char* s : {"specs_total", "specs_resolved", "probes_attached"})
    c.push_back(col(s, kInt0, "Int64"));
  c.push_back(col("missing", kText, "String"));
  c.push_back(col("errors", kText, "String"));
  // Found while tracing, after a process had mapped it (older files gain them by ALTER TABLE).
  for (const char* s : {"late_pid", "late_ns"}) c.push_back(col(s, kInt0, ""));
  return t;
}

TableDef system_snapshots() {
  TableDef t{"system_snapshots", {}, {}, {}, {}};
  t.columns = {
      col("id", "INTEGER PRIMARY KEY", ""),
      col("node", kText, "String"),
      col("timestamp", kInt, "UInt64", "unix epoch ns"),
      col("cpu_pct", "REAL NOT NULL", "Float64", "busy share of all CPUs over the last interval"),
      col("mem_pct", "REAL NOT NULL", "Float64", "(total - available) / total"),
      col("mem_avail", kInt, "Int64", "MiB"),
      col("swap_mb", kInt, "Int64", "MiB in use"),
      col("load_avg", "REAL NOT NULL", "Float64", "1-minute"),
      col("procs_running", kInt0, "Int64")};
  t.indexes = {"CREATE INDEX IF NOT EXISTS idx_snapshots_ts ON system_snapshots(timestamp)"};
  return t;
}

TableDef process_stats() {
  TableDef t{"process_stats", {}, {}, {}, {}};
  auto& c = t.columns;
  c.push_back(col("id", "INTEGER PRIMARY KEY", ""));
  c.push_back(col("node", kText, "String"));
  c.push_back(col("session_id", kInt0, ""));
  c.push_back(col("timestamp", kInt, "UInt64", "interval start, unix epoch ns"));
  c.push_back(col("duration", kInt, "UInt64", "interval length, ns"));
  c.push_back(col("pid", kInt, "UInt32"));
  c.push_back(col("comm", kText, "String"));
  c.push_back(col("cgroup_id", kInt0, "Int64"));
  for (const char* s :
       {"switches", "involuntary", "off_cpu_ns", "max_off_cpu_ns", "wakeups", "page_allocs",
        "page_bytes", "forks", "block_ios", "block_bytes", "block_ns"})
    c.push_back(col(s, kInt0, "Int64"));
  t.indexes = {"CREATE INDEX IF NOT EXISTS idx_process_stats_ts ON process_stats(timestamp)"};
  return t;
}

TableDef cgroup_metadata() {
  TableDef t{"cgroup_metadata", {}, {}, {}, {}};
  t.columns = {col("cgroup_id", "INTEGER PRIMARY KEY", "Int64",
                   "bpf_get_current_cgroup_id(): the cgroup v2 inode"),
               col("container_id", kText, "String"), col("cgroup_path", kText, "String"),
               col("pod_name", kText, "String"), col("namespace", kText, "String")};
  // Who the cgroup belongs to, added after schema 9 (store/cgroup_metadata.h: older files gain
  // them by ALTER TABLE): NULL where unknown.
  for (const char* s : {"container_name", "pod_uid", "qos_class", "runtime", "names_from"})
    t.columns.push_back(col(s, "TEXT", "Nullable(String)"));
  return t;
}

TableDef causal_chains() {
  TableDef t{"causal_chains", {}, {}, {}, {}};
  auto& c = t.columns;
  c.push_back(col("id", "TEXT PRIMARY KEY", "String", "\"{node}:{rule}:{op}:{pid}\""));
  c.push_back(col("detected_at", kInt, "UInt64", "unix epoch ns"));
  c.push_back(col("severity", "TEXT NOT NULL", "String", "HIGH, MEDIUM, LOW"));
  for (const char* s : {"summary", "root_cause", "explanation"})
    c.push_back(col(s, "TEXT NOT NULL", "String"));
  c.push_back(
      col("recommendations", "TEXT NOT NULL DEFAULT '[]'", "String", "JSON array of strings"));
  c.push_back(col("cuda_op", kText, "String", "the affected op (any vendor)"));
  c.push_back(col("cuda_p99_us", kInt0, "Int64"));
  c.push_back(col("cuda_p50_us", kInt0, "Int64"));
  c.push_back(col("tail_ratio", "REAL NOT NULL DEFAULT 0", "Float64"));
  c.push_back(col("timeline", "TEXT NOT NULL DEFAULT '[]'", "String",
                  "JSON array of {layer, op, detail, dur_us}"));
  c.push_back(col("node", kText, "String"));
  c.push_back(col("session_id", kInt0, ""));
  for (const char* s : {"rule", "vendor", "api"}) c.push_back(col(s, kText, "String"));
  c.push_back(col("pids", "TEXT NOT NULL DEFAULT '[]'", "String", "JSON array"));
  c.push_back(col("window_start", kInt0, "Int64"));
  c.push_back(col("window_end", kInt0, "Int64"));
  return t;
}

TableDef stack_frames() {
  TableDef t{"stack_frames", {}, "PRIMARY KEY (stack_id, frame)", "WITHOUT ROWID", {}};
  t.columns = {
      col("stack_id", kInt, "Int64"),
      col("frame", kInt, "UInt32", "0 = innermost"),
      col("kind", "TEXT NOT NULL", "String", "native | python"),
      col("module", kText, "String", "native: the mapped file"),
      col("module_offset", "INTEGER", "Nullable(Int64)", "native: file offset of the instruction"),
      col("build_id", kText, "String"),
      col("function", kText, "String", "demangled; '' when unresolved"),
      col("file", kText, "String", "native: DWARF source file; python: co_filename"),
      col("line", "INTEGER", "Nullable(Int64)", "native: DWARF line; python: the current line")};
  return t;
}

TableDef device_counters() {
  TableDef t{"device_counters", {}, {}, {}, {}};
  t.columns = {
      col("id", "INTEGER PRIMARY KEY", ""),
      col("node", kText, "String"),
      col("session_id", kInt0, ""),
      col("timestamp", kInt, "UInt64", "unix epoch ns of the sample"),
      col("backend", "TEXT NOT NULL", "String", "the backend that polled it: rdma, ..."),
      col("device", "TEXT NOT NULL", "String", "mlx5_0"),
      col("port", kInt, "UInt32"),
      col("counter", "TEXT NOT NULL", "String", "port_rcv_errors, hw_counters/out_of_buffer, ..."),
      col("value", kInt, "Int64", "as read"),
      col("base_value", kInt, "Int64", "in `unit`: value times the backend's factor"),
      col("unit", "TEXT NOT NULL", "String", "bytes, packets, events"),
      col("is_error", kInt0, "UInt8"),
      col("attributes", "TEXT NOT NULL DEFAULT '{}'", "String",
          "the port's properties, JSON: {\"transport\": ...}")};
  t.indexes = {"CREATE INDEX IF NOT EXISTS idx_device_counters_ts ON device_counters(timestamp)"};
  return t;
}

// The device side channel's rows (hal/device_sampler.h; store/device_tables.h): an absent
// figure stays NULL, never 0.
TableDef device_samples() {
  TableDef t{"device_samples", {}, {}, {}, {}};
  auto& c = t.columns;
  c.push_back(col("id", "INTEGER PRIMARY KEY", ""));
  c.push_back(col("node", kText, "String"));
  c.push_back(col("session_id", kInt0, ""));
  c.push_back(
      col("timestamp", kInt, "UInt64", "unix epoch ns: the end of the period the figures cover"));
  c.push_back(col("period_ns", kInt0, "Int64",
                  "they cover (timestamp - period_ns, timestamp]; 0: an instant"));
  c.push_back(col("source", "TEXT NOT NULL", "String", "nvml | amdgpu"));
  c.push_back(col("device", kInt, "UInt32", "the device's index as the source numbers them"));
  c.push_back(col("uuid", kText, "String", "NVML UUID; amdgpu unique_id or PCI address"));
  c.push_back(col("pid", "INTEGER", "Nullable(UInt32)", "NULL: the whole device"));
  c.push_back(col("sm_util", "REAL", "Nullable(Float64)",
                  "percent; NULL: not given (never 0 for unknown)"));
  c.push_back(col("mem_util", "REAL", "Nullable(Float64)"));
  c.push_back(
      col("mem_used", "INTEGER", "Nullable(Int64)", "bytes (per process: its allocations)"));
  for (const char* s : {"mem_total", "sm_clock_mhz", "mem_clock_mhz", "power_mw", "temperature_c"})
    c.push_back(col(s, "INTEGER", "Nullable(Int64)"));
  c.push_back(
      col("throttle_reasons", "INTEGER", "Nullable(Int64)", "NVML clocks-event reason bits"));
  c.push_back(col("ecc_corrected", "INTEGER", "Nullable(Int64)", "volatile totals"));
  c.push_back(col("ecc_uncorrected", "INTEGER", "Nullable(Int64)"));
  t.indexes = {"CREATE INDEX IF NOT EXISTS idx_device_samples_ts ON device_samples(timestamp)"};
  return t;
}

TableDef device_events() {
  TableDef t{"device_events", {}, {}, {}, {}};
  auto& c = t.columns;
  c.push_back(col("id", "INTEGER PRIMARY KEY", ""));
  c.push_back(col("node", kText, "String"));
  c.push_back(col("session_id", kInt0, ""));
  c.push_back(col("timestamp", kInt, "UInt64", "unix epoch ns, when the tracer received it"));
  c.push_back(col("source", "TEXT NOT NULL", "String"));
  c.push_back(col("device", kInt, "UInt32"));
  c.push_back(col("uuid", kText, "String"));
  c.push_back(col("kind", "TEXT NOT NULL", "String",
                  "xid | ecc_uncorrected | ecc_corrected | gpu_lost | event_error | sampler_lost"));
  c.push_back(col("code", kInt0, "Int64", "the Xid; for ECC the count it rose by"));
  c.push_back(col("detail", kText, "String"));
  t.indexes = {"CREATE INDEX IF NOT EXISTS idx_device_events_ts ON device_events(timestamp)"};
  return t;
}

// The events columns; the ClickHouse `events` table renames the times and the return code and
// adds the names of the source and op (fleet/ch_schema.cc).
TableDef events() {
  TableDef t{"events", {}, {}, {}, {}};
  auto& c = t.columns;
  c.push_back(col("id", "INTEGER PRIMARY KEY", ""));
  c.push_back(col("node", kText, "String"));
  c.push_back(col("session_id", kInt0, ""));
  c.push_back(col("timestamp", kInt, "UInt64", "start, unix epoch ns", "ts_ns"));
  c.push_back(col("duration", kInt0, "UInt64", "ns", "dur_ns"));
  c.push_back(col("pid", kInt, "UInt32"));
  c.push_back(col("tid", kInt, "UInt32"));
  c.push_back(col("source", kInt, "", "sources.id"));
  c.push_back(col("op", kInt, "", "ops.op_id within source"));
  c.push_back(col("ret_code", "INTEGER", "Nullable(Int64)",
                  "NULL: host event or call never returned", "ret"));
  c.push_back(col("status", kInt0, "UInt8", "0 complete, 1 unfinished (thread exited)"));
  c.push_back(col("cgroup_id", kInt0, "Int64"));
  c.push_back(col("comm", kText, "String"));
  for (const char* s : {"off_cpu_ns", "preempts", "switches"})
    c.push_back(col(s, "INTEGER", "Nullable(Int64)"));
  for (const char* s : {"peer_comm", "detail", "saddr", "daddr"})
    c.push_back(col(s, "TEXT", "String"));
  c.push_back(col("stack_hash", kInt0, "Int64"));
  c.push_back(col("library_id", "INTEGER", "Nullable(Int64)", "libraries.id of the traced file"));
  c.push_back(col("stack_of_site", "INTEGER", "Nullable(Int64)",
                  "1: stack_hash is its call site's last stack"));
  c.push_back(col("nested_calls", "INTEGER", "Nullable(Int64)",
                  "traced calls made inside this one (folded)"));
  c.push_back(col("nested_source", "INTEGER", "", "sources.id / ops.op_id of the first of them"));
  c.push_back(col("nested_op", "INTEGER", ""));
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    c.push_back(col(std::string(hal::field_name(hal::Field(i))), "INTEGER", "Nullable(Int64)"));
  return t;
}

// Threads stuck now (capture/inflight_monitor.h): the latest observation of each.
TableDef inflight() {
  TableDef t{"inflight", {}, {}, {}, {}};
  auto& c = t.columns;
  c.push_back(col("id", "INTEGER PRIMARY KEY", ""));
  c.push_back(col("node", kText, "String"));
  c.push_back(col("session_id", kInt0, ""));
  c.push_back(col("what", "TEXT NOT NULL", "String",
                  "call: a traced call in flight; idle: a rank's thread outside any call"));
  c.push_back(col("status", "TEXT NOT NULL", "String",
                  "in_flight, returned, unfinished (its thread exited), stopped (the tracer did)"));
  c.push_back(col("pid", kInt, "UInt32"));
  c.push_back(col("tid", kInt, "UInt32"));
  c.push_back(col("comm", kText, "String"));
  for (const char* s : {"vendor", "api", "kind", "op"}) c.push_back(col(s, kText, "String"));
  c.push_back(col("entered_at", kInt, "UInt64",
                  "unix epoch ns: the call's entry (idle: the end of its last call)"));
  c.push_back(
      col("reported_at", kInt0, "UInt64", "unix epoch ns: when the tracer first reported it"));
  c.push_back(col("seen_at", kInt, "UInt64", "unix epoch ns: last seen so"));
  c.push_back(col("ended_at", kInt0, "UInt64", "unix epoch ns: when it stopped (0: it lasts)"));
  c.push_back(col("dur_ns", kInt0, "UInt64", "in flight so far (until seen_at or ended_at)"));
  c.push_back(col("thread_state", kText, "String", "on-CPU, runnable, sleeping, in I/O, exited"));
  c.push_back(col("thread_state_since", kInt0, "UInt64", "unix epoch ns; 0: unknown"));
  c.push_back(col("off_cpu_ns", kInt0, "Int64"));
  c.push_back(col("stack_hash", kInt0, "Int64", "stack_frames.stack_id; 0: none"));
  c.push_back(col("seq", "INTEGER", "Nullable(Int64)",
                  "a collective's sequence number on its communicator"));
  for (const char* s : {"others_running", "others_sleeping", "others_io"})
    c.push_back(col(s, kInt0, "UInt32"));
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    c.push_back(col(std::string(hal::field_name(hal::Field(i))), "INTEGER", "Nullable(Int64)"));
  // The writer replaces a call's row by (session, thread, entry); status reads a session's.
  t.indexes = {
      "CREATE INDEX IF NOT EXISTS idx_inflight_call ON inflight(session_id, tid, entered_at)"};
  return t;
}

}  // namespace

const ColumnDef* TableDef::column(std::string_view n) const {
  for (const auto& c : columns)
    if (c.name == n) return &c;
  return nullptr;
}

const std::vector<TableDef>& table_defs() {
  static const std::vector<TableDef> defs = {
      sessions(),        process_names(),  libraries(),    system_snapshots(), process_stats(),
      cgroup_metadata(), causal_chains(),  stack_frames(), device_counters(),  events(),
      inflight(),        device_samples(), device_events()};
  return defs;
}

const TableDef& table_def(std::string_view name) {
  for (const auto& t : table_defs())
    if (t.name == name) return t;
  std::cerr << "ingero: internal error: no table description named " << name << "\n";
  std::abort();
}

const TableDef& events_def() { return table_def("events"); }

std::string create_table_sql(const TableDef& t, const std::string& as) {
  std::string s = "CREATE TABLE IF NOT EXISTS " + (as.empty() ? t.name : as) + " (\n";
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const ColumnDef& c = t.columns[i];
    s += "  " + c.name + " " + c.decl;
    if (i + 1 < t.columns.size() || !t.constraints.empty()) s += ",";
    if (!c.comment.empty()) s += "  -- " + c.comment;
    s += "\n";
  }
  if (!t.constraints.empty()) s += "  " + t.constraints + "\n";
  s += ")";
  if (!t.options.empty()) s += " " + t.options;
  s += ";\n";
  for (const auto& i : t.indexes) s += i + ";\n";
  return s;
}

}  // namespace ingero::store

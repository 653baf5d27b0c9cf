#include "store/schema.h"

#include <ctime>
#include <functional>

#include "hal/event.h"
#include "store/call_store.h"
#include "store/call_summaries.h"
#include "store/cgroup_metadata.h"
#include "store/contract_views.h"
#include "store/kernel_names.h"
#include "store/legacy_views.h"

namespace ingero::store {

std::string events_ddl(const std::string& table) {
  std::string s =
      "CREATE TABLE IF NOT EXISTS " + table +
      " (\n"
      "  id INTEGER PRIMARY KEY,\n"
      "  node TEXT NOT NULL DEFAULT '',\n"
      "  session_id INTEGER NOT NULL DEFAULT 0,\n"
      "  timestamp INTEGER NOT NULL,          -- start, unix epoch ns\n"
      "  duration INTEGER NOT NULL DEFAULT 0, -- ns\n"
      "  pid INTEGER NOT NULL,\n"
      "  tid INTEGER NOT NULL,\n"
      "  source INTEGER NOT NULL,             -- sources.id\n"
      "  op INTEGER NOT NULL,                 -- ops.op_id within source\n"
      "  ret_code INTEGER,                    -- NULL: host event or call never returned\n"
      "  status INTEGER NOT NULL DEFAULT 0,   -- 0 complete, 1 unfinished (thread exited)\n"
      "  cgroup_id INTEGER NOT NULL DEFAULT 0,\n"
      "  comm TEXT NOT NULL DEFAULT '',\n"
      "  off_cpu_ns INTEGER,\n"
      "  preempts INTEGER,\n"
      "  switches INTEGER,\n"
      "  peer_comm TEXT,\n"
      "  detail TEXT,\n"
      "  saddr TEXT,\n"
      "  daddr TEXT,\n"
      "  stack_hash INTEGER NOT NULL DEFAULT 0,\n"
      "  library_id INTEGER,                  -- libraries.id of the traced file\n"
      "  stack_of_site INTEGER,               -- 1: stack_hash is its call site's last stack\n"
      "  nested_calls INTEGER,                -- traced calls made inside this one (folded)\n"
      "  nested_source INTEGER,               -- sources.id / ops.op_id of the first of them\n"
      "  nested_op INTEGER\n";
  for (const auto& c : field_columns()) s += ",\n  " + c + " INTEGER";
  // Columns the original implementation's users query by name.
  for (const auto& g : kEventGeneratedColumns)
    s += std::string(",\n  ") + g.name + " INTEGER GENERATED ALWAYS AS (" + g.expr + ") VIRTUAL";
  s += "\n);\n";
  return s;
}

namespace {

const char* kTablesV1 = R"SQL(
CREATE TABLE IF NOT EXISTS schema_version (
  version INTEGER NOT NULL,
  applied_at INTEGER NOT NULL,      -- unix epoch ns
  ingero_version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
  id INTEGER PRIMARY KEY,
  node TEXT NOT NULL DEFAULT '',
  host TEXT NOT NULL DEFAULT '',
  kernel TEXT NOT NULL DEFAULT '',
  os_release TEXT NOT NULL DEFAULT '',
  cpu_model TEXT NOT NULL DEFAULT '',
  cpu_cores INTEGER NOT NULL DEFAULT 0,
  mem_total INTEGER NOT NULL DEFAULT 0,  -- MiB
  started_at INTEGER NOT NULL,           -- unix epoch ns
  stopped_at INTEGER NOT NULL DEFAULT 0,
  mono_offset_ns INTEGER NOT NULL DEFAULT 0,  -- CLOCK_REALTIME - CLOCK_MONOTONIC at start
  ingero_ver TEXT NOT NULL DEFAULT '',
  pid_filter TEXT NOT NULL DEFAULT '',
  flags TEXT NOT NULL DEFAULT '',
  backends TEXT NOT NULL DEFAULT '',
  attached_probes INTEGER NOT NULL DEFAULT 0,
  events_stored INTEGER NOT NULL DEFAULT 0,
  ringbuf_drops INTEGER NOT NULL DEFAULT 0,   -- records the kernel could not queue (all kinds)
  lost_calls INTEGER NOT NULL DEFAULT 0,      -- not traced: thread table full, too deep
  store_errors INTEGER NOT NULL DEFAULT 0,    -- events decoded but not written
  unfinished_calls INTEGER NOT NULL DEFAULT 0,
  bpf_stats TEXT NOT NULL DEFAULT '{}',      -- every in-kernel counter, JSON
  exit_reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS sources (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  vendor TEXT NOT NULL DEFAULT '',
  api TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS ops (
  source_id INTEGER NOT NULL,
  op_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  kind TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (source_id, op_id)
);
CREATE TABLE IF NOT EXISTS process_names (
  node TEXT NOT NULL DEFAULT '',
  pid INTEGER NOT NULL,
  name TEXT NOT NULL,
  cmdline TEXT NOT NULL DEFAULT '',
  seen_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (node, pid)
);
CREATE TABLE IF NOT EXISTS libraries (
  id INTEGER PRIMARY KEY,
  session_id INTEGER NOT NULL,
  backend TEXT NOT NULL,
  vendor TEXT NOT NULL,
  api TEXT NOT NULL,
  path TEXT NOT NULL,
  soname TEXT NOT NULL DEFAULT '',
  version TEXT NOT NULL DEFAULT '',
  build_id TEXT NOT NULL DEFAULT '',
  embedded INTEGER NOT NULL DEFAULT 0,
  specs_total INTEGER NOT NULL DEFAULT 0,
  specs_resolved INTEGER NOT NULL DEFAULT 0,
  probes_attached INTEGER NOT NULL DEFAULT 0,
  missing TEXT NOT NULL DEFAULT '',
  errors TEXT NOT NULL DEFAULT ''
);
INSERT OR IGNORE INTO sources (id, name, description, vendor, api) VALUES
  (1, 'CUDA', 'CUDA Runtime API (libcudart) - uprobes', 'nvidia', 'cuda_runtime'),
  (2, 'NVIDIA', 'NVIDIA kernel driver - reserved, not traced', 'nvidia', 'nvidia_kernel'),
  (3, 'HOST', 'Host kernel events - tracepoints (scheduler, memory, process lifecycle)', 'host', 'kernel'),
  (4, 'DRIVER', 'CUDA Driver API (libcuda) - uprobes', 'nvidia', 'cuda_driver'),
  (5, 'IO', 'Block I/O - tracepoints (block_rq_issue/block_rq_complete)', 'host', 'kernel'),
  (6, 'TCP', 'TCP - tracepoints (tcp_retransmit_skb)', 'host', 'kernel'),
  (7, 'NET', 'Network socket events - reserved', 'host', 'kernel');
)SQL";

// Version 2: host context and causal chains.
const char* kTablesV2 = R"SQL(
CREATE TABLE IF NOT EXISTS system_snapshots (
  id INTEGER PRIMARY KEY,
  node TEXT NOT NULL DEFAULT '',
  timestamp INTEGER NOT NULL,      -- unix epoch ns
  cpu_pct REAL NOT NULL,           -- busy share of all CPUs over the last interval
  mem_pct REAL NOT NULL,           -- (total - available) / total
  mem_avail INTEGER NOT NULL,      -- MiB
  swap_mb INTEGER NOT NULL,        -- MiB in use
  load_avg REAL NOT NULL,          -- 1-minute
  procs_running INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_snapshots_ts ON system_snapshots(timestamp);
CREATE TABLE IF NOT EXISTS process_stats (
  id INTEGER PRIMARY KEY,
  node TEXT NOT NULL DEFAULT '',
  session_id INTEGER NOT NULL DEFAULT 0,
  timestamp INTEGER NOT NULL,      -- interval start, unix epoch ns
  duration INTEGER NOT NULL,       -- interval length, ns
  pid INTEGER NOT NULL,
  comm TEXT NOT NULL DEFAULT '',
  cgroup_id INTEGER NOT NULL DEFAULT 0,
  switches INTEGER NOT NULL DEFAULT 0,
  involuntary INTEGER NOT NULL DEFAULT 0,
  off_cpu_ns INTEGER NOT NULL DEFAULT 0,
  max_off_cpu_ns INTEGER NOT NULL DEFAULT 0,
  wakeups INTEGER NOT NULL DEFAULT 0,
  page_allocs INTEGER NOT NULL DEFAULT 0,
  page_bytes INTEGER NOT NULL DEFAULT 0,
  forks INTEGER NOT NULL DEFAULT 0,
  block_ios INTEGER NOT NULL DEFAULT 0,
  block_bytes INTEGER NOT NULL DEFAULT 0,
  block_ns INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_process_stats_ts ON process_stats(timestamp);
CREATE TABLE IF NOT EXISTS cgroup_metadata (
  cgroup_id INTEGER PRIMARY KEY,   -- bpf_get_current_cgroup_id(): the cgroup v2 inode
  container_id TEXT NOT NULL DEFAULT '',
  cgroup_path TEXT NOT NULL DEFAULT '',
  pod_name TEXT NOT NULL DEFAULT '',
  namespace TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS causal_chains (
  id TEXT PRIMARY KEY,             -- "{node}:{rule}:{op}:{pid}"
  detected_at INTEGER NOT NULL,    -- unix epoch ns
  severity TEXT NOT NULL,          -- HIGH, MEDIUM, LOW
  summary TEXT NOT NULL,
  root_cause TEXT NOT NULL,
  explanation TEXT NOT NULL,
  recommendations TEXT NOT NULL DEFAULT '[]',  -- JSON array of strings
  cuda_op TEXT NOT NULL DEFAULT '',            -- the affected op (any vendor)
  cuda_p99_us INTEGER NOT NULL DEFAULT 0,
  cuda_p50_us INTEGER NOT NULL DEFAULT 0,
  tail_ratio REAL NOT NULL DEFAULT 0,
  timeline TEXT NOT NULL DEFAULT '[]',         -- JSON array of {layer, op, detail, dur_us}
  node TEXT NOT NULL DEFAULT '',
  session_id INTEGER NOT NULL DEFAULT 0,
  rule TEXT NOT NULL DEFAULT '',
  vendor TEXT NOT NULL DEFAULT '',
  api TEXT NOT NULL DEFAULT '',
  pids TEXT NOT NULL DEFAULT '[]',             -- JSON array
  window_start INTEGER NOT NULL DEFAULT 0,
  window_end INTEGER NOT NULL DEFAULT 0
);
)SQL";

// Version 3 added rdma_counters, which version 6 replaces with device_counters (below).
// Call stacks, deduplicated: a stack's id is a hash of its frames (module + offset for native
// frames, file/function/line for Python ones), so the same code path in many processes is
// one stack. events.stack_hash references stack_id.
const char* kTablesV4 = R"SQL(
CREATE TABLE IF NOT EXISTS stack_frames (
  stack_id INTEGER NOT NULL,
  frame INTEGER NOT NULL,              -- 0 = innermost
  kind TEXT NOT NULL,                  -- native | python
  module TEXT NOT NULL DEFAULT '',     -- native: the mapped file
  module_offset INTEGER,               -- native: file offset of the instruction
  build_id TEXT NOT NULL DEFAULT '',
  function TEXT NOT NULL DEFAULT '',   -- demangled; '' when unresolved
  file TEXT NOT NULL DEFAULT '',       -- native: DWARF source file; python: co_filename
  line INTEGER,                        -- native: DWARF line; python: the current line
  PRIMARY KEY (stack_id, frame)
) WITHOUT ROWID;
)SQL";

// v5: one launch = one event (nested calls folded into their caller), calls that took their
// call site's stack, and losses counted per kind.
const char* kV5SessionColumns[] = {"call_drops", "stack_drops", "host_drops", "sample_drops",
                                   "calls_lost_at_exit",
                                   // v10: what retention deleted while the session ran
                                   "retention_calls", "retention_events",
                                   // the tracer's own pid (chains name it as the tracer)
                                   "tracer_pid"};
// Libraries found while a process already had them mapped (added without a version: readers
// check the columns).
const char* kLateLibraryColumns[] = {"late_pid", "late_ns"};

// v6: counters polled by any backend's side channel (hal/side_channel.h), one row per counter
// and sample. Schema 3-5 had an rdma_counters table instead; its rows move here, and the rdma
// backend's rdma_counters view gives them back with their old columns.
const char* kTablesV6 = R"SQL(
CREATE TABLE IF NOT EXISTS device_counters (
  id INTEGER PRIMARY KEY,
  node TEXT NOT NULL DEFAULT '',
  session_id INTEGER NOT NULL DEFAULT 0,
  timestamp INTEGER NOT NULL,       -- unix epoch ns of the sample
  backend TEXT NOT NULL,            -- the backend that polled it: rdma, ...
  device TEXT NOT NULL,             -- mlx5_0
  port INTEGER NOT NULL,
  counter TEXT NOT NULL,            -- port_rcv_errors, hw_counters/out_of_buffer, ...
  value INTEGER NOT NULL,           -- as read
  base_value INTEGER NOT NULL,      -- in `unit`: value times the backend's factor
  unit TEXT NOT NULL,               -- bytes, packets, events
  is_error INTEGER NOT NULL DEFAULT 0,
  attributes TEXT NOT NULL DEFAULT '{}'  -- the port's properties, JSON: {"transport": ...}
);
CREATE INDEX IF NOT EXISTS idx_device_counters_ts ON device_counters(timestamp);
)SQL";

// Tiered retention (store/tiers.h): per-second call summaries written as the trace grows, and
// the runs that launches older than the full-row window are folded into.
const char* kTablesV7 = R"SQL(
CREATE TABLE IF NOT EXISTS call_seconds (
  node TEXT NOT NULL DEFAULT '',
  session_id INTEGER NOT NULL DEFAULT 0,
  timestamp INTEGER NOT NULL,       -- unix epoch ns of the second's start
  pid INTEGER NOT NULL,
  tid INTEGER NOT NULL,
  source INTEGER NOT NULL,          -- sources.id
  op INTEGER NOT NULL,              -- ops.op_id within source
  calls INTEGER NOT NULL,
  errors INTEGER NOT NULL,          -- returned an error code
  unfinished INTEGER NOT NULL,      -- never returned
  sum_ns INTEGER NOT NULL,
  min_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL,
  off_cpu_ns INTEGER NOT NULL,
  preempts INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  sketch BLOB NOT NULL,             -- durations: sketch_quantile(sketch, q), sketch_merge(sketch)
  timed INTEGER NOT NULL DEFAULT 0  -- calls whose duration is known (sums, extremes, sketch)
);
CREATE INDEX IF NOT EXISTS idx_call_seconds_ts ON call_seconds(timestamp);
CREATE VIEW IF NOT EXISTS call_summaries AS
SELECT c.node, c.session_id, c.timestamp, c.timestamp / 1000000000 AS second, c.pid, c.tid,
       s.vendor, s.api, o.name AS op, o.kind, c.calls, c.timed, c.errors, c.unfinished, c.sum_ns,
       c.min_ns, c.max_ns, c.off_cpu_ns, c.preempts, c.bytes, c.sketch
  FROM call_seconds c JOIN sources s ON s.id = c.source
  JOIN ops o ON o.source_id = c.source AND o.op_id = c.op;
)SQL";

// The source sessions each session of a merged file holds (`ingero merge`): their identity,
// node + start + host, so that a later merge can tell a session it already has and refuse to
// count its calls twice (app/cmd_merge.cc).
std::string tables_merged_sessions() {
  // (A rowid table: SQLite 3.40's quick_check misreports NOT NULL columns of a WITHOUT ROWID
  // table whose key is not in declaration order.)
  return "CREATE TABLE IF NOT EXISTS merged_sessions (\n"
         "  session_id INTEGER NOT NULL,   -- sessions.id of this file\n"
         "  node TEXT NOT NULL,\n"
         "  started_at INTEGER NOT NULL,   -- Unix epoch ns\n"
         "  host TEXT NOT NULL,\n"
         "  PRIMARY KEY (session_id, node, started_at, host)\n"
         ");\n";
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

const std::vector<std::string>& field_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> v;
    for (size_t i = 0; i < hal::kFieldCount; ++i)
      v.emplace_back(hal::field_name(static_cast<hal::Field>(i)));
    return v;
  }();
  return cols;
}

ingero::Result<TraceFileInfo> inspect(Db& db) {
  TraceFileInfo info;
  auto app = db.query_int("PRAGMA application_id");
  if (!app) {
    // A read-only connection cannot roll back what an interrupted write (a killed compact)
    // left in the rollback journal; the file is intact once it is.
    if (sqlite3_extended_errcode(db.handle()) == SQLITE_READONLY_ROLLBACK)
      return ingero::make_error(db.path() + ": a write to it was interrupted and " + db.path() +
                                "-journal holds what it changed; `ingero compact " + db.path() +
                                "` rolls it back (as does any program that opens it for "
                                "writing) and nothing is lost");
    return ingero::make_error(db.path() + ": not a readable SQLite database (" +
                              app.error().message + ")");
  }
  auto uv = db.query_int("PRAGMA user_version");
  if (!uv) return uv.error();
  if (app->value_or(0) == kApplicationId) {
    info.format = TraceFormat::kIngero;
    info.schema_version = int(uv->value_or(0));
    if (info.schema_version > kSchemaVersion)
      return ingero::make_error(db.path() + ": written by a newer ingero (schema " +
                                std::to_string(info.schema_version) + "; this build reads up to " +
                                std::to_string(kSchemaVersion) + "). Upgrade ingero to read it.");
    return info;
  }
  auto tables = db.query_int("SELECT count(*) FROM sqlite_master");
  if (!tables) return ingero::make_error(db.path() + ": " + tables.error().message);
  if (**tables == 0) return info;  // empty: ours to create
  if (app->value_or(0) != 0)
    return ingero::make_error(db.path() + ": not an ingero trace (SQLite application_id " +
                              std::to_string(**app) + " belongs to another program)");
  if (auto legacy = detect_legacy(db)) return *legacy;
  return ingero::make_error(db.path() +
                            ": not an ingero trace (no ingero schema: expected an events table "
                            "with sources/ops, as written by `ingero trace`)");
}

ingero::Status check_schema_writable(const std::string& path, const TraceFileInfo& info) {
  int from = info.format == TraceFormat::kIngero ? info.schema_version : 0;
  if (from > 0 && from < kFirstCallStoreSchema)
    return ingero::make_error(
        path + ": a trace of schema " + std::to_string(from) +
        ", from an earlier ingero, which kept calls as rows; this build writes schema " +
        std::to_string(kSchemaVersion) +
        ", which keeps them in blocks, and reads the older file as it is. Write to a new file, "
        "or convert this one in place with `ingero compact " +
        path + "` (every call is kept)");
  return {};
}

ingero::Status migrate(Db& db, std::span<const hal::SqlView> views) {
  auto info = inspect(db);
  if (!info) return info.error();
  if (info->format == TraceFormat::kLegacyGo)
    return ingero::make_error(db.path() + ": a trace from the original Go implementation (schema " +
                              info->legacy_version +
                              "); it is read-only here. Use `ingero merge` to convert it.");
  if (auto st = check_schema_writable(db.path(), *info); !st) return st;
  int from = info->format == TraceFormat::kIngero ? info->schema_version : 0;
  if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st;
  auto fail = [&](const ingero::Error& e) {
    (void)db.exec("ROLLBACK");
    return ingero::make_error(db.path() + ": schema migration failed: " + e.message);
  };
  if (from < 1) {
    for (const std::string& ddl :
         {std::string(kTablesV1), std::string(kTablesV2), std::string(kTablesV4),
          std::string(kTablesV6), std::string(kTablesV7), call_store_ddl()})
      if (auto st = db.exec(ddl); !st) return fail(st.error());
  }
  for (const char* c : kV5SessionColumns)
    if (!db.column_exists("sessions", c))
      if (auto st = db.exec(std::string("ALTER TABLE sessions ADD COLUMN ") + c +
                            " INTEGER NOT NULL DEFAULT 0");
          !st)
        return fail(st.error());
  for (const char* c : kLateLibraryColumns)
    if (!db.column_exists("libraries", c))
      if (auto st = db.exec(std::string("ALTER TABLE libraries ADD COLUMN ") + c +
                            " INTEGER NOT NULL DEFAULT 0");
          !st)
        return fail(st.error());
  // Every decoded field has a column, whatever build created the file: fields added since
  // are appended (a no-op for files this build created).
  for (const auto& c : field_columns())
    if (!db.column_exists("host_rows", c))
      if (auto st = db.exec("ALTER TABLE host_rows ADD COLUMN " + c + " INTEGER"); !st)
        return fail(st.error());
  if (auto st = db.exec(tables_merged_sessions()); !st) return fail(st.error());
  if (auto st = add_cgroup_name_columns(db); !st) return fail(st.error());
  if (auto st = migrate_kernel_names(db); !st) return fail(st.error());
  if (from < kSchemaVersion) {
    auto ins = db.prepare(
        "INSERT INTO schema_version (version, applied_at, ingero_version) VALUES (?, ?, ?)");
    if (!ins) return fail(ins.error());
    ins->bind(1, int64_t(kSchemaVersion))
        .bind(2, now_ns())
        .bind(3, std::string_view(INGERO_VERSION));
    if (auto r = ins->step(); !r) return fail(r.error());
  }
  if (auto st = db.exec(call_store_views_sql()); !st) return fail(st.error());
  if (auto st = db.exec(contract_views_sql(false, true, db.table_exists("stack_traces"), {}, true));
      !st)
    return fail(st.error());
  if (auto st = install_vendor_views(db, false, views); !st) return fail(st.error());
  if (auto st = db.exec("PRAGMA application_id = " + std::to_string(kApplicationId)); !st)
    return fail(st.error());
  if (auto st = db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion)); !st)
    return fail(st.error());
  if (auto st = db.exec("COMMIT"); !st) return fail(st.error());
  return {};
}

}  // namespace ingero::store

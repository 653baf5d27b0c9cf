#include "store/schema.h"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string_view>

#include "hal/event.h"
#include "store/call_store.h"
#include "store/call_summaries.h"
#include "store/cgroup_metadata.h"
#include "store/contract_views.h"
#include "store/host_store.h"
#include "store/kernel_names.h"
#include "store/legacy_views.h"
#include "store/table_defs.h"

namespace ingero::store {

std::string events_ddl(const std::string& table, bool untimed_calls) {
  TableDef t = events_def();
  // A call seen at entry only has no duration: NULL, as the calls view shows it.
  if (untimed_calls)
    for (auto& c : t.columns)
      if (c.name == "duration") c.decl = "INTEGER";
  // Columns the original implementation's users query by name.
  for (const auto& g : kEventGeneratedColumns)
    t.columns.push_back(
        {g.name, std::string("INTEGER GENERATED ALWAYS AS (") + g.expr + ") VIRTUAL", "", "", ""});
  return create_table_sql(t, table);
}

namespace {

const char* kTablesV1 = R"SQL(
CREATE TABLE IF NOT EXISTS schema_version (
  version INTEGER NOT NULL,
  applied_at INTEGER NOT NULL,      -- unix epoch ns
  ingero_version TEXT NOT NULL
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
INSERT OR IGNORE INTO sources (id, name, description, vendor, api) VALUES
  (1, 'CUDA', 'CUDA Runtime API (libcudart) - uprobes', 'nvidia', 'cuda_runtime'),
  (2, 'NVIDIA', 'NVIDIA kernel driver - reserved, not traced', 'nvidia', 'nvidia_kernel'),
  (3, 'HOST', 'Host kernel events - tracepoints (scheduler, memory, process lifecycle)', 'host', 'kernel'),
  (4, 'DRIVER', 'CUDA Driver API (libcuda) - uprobes', 'nvidia', 'cuda_driver'),
  (5, 'IO', 'Block I/O - tracepoints (block_rq_issue/block_rq_complete)', 'host', 'kernel'),
  (6, 'TCP', 'TCP - tracepoints (tcp_retransmit_skb)', 'host', 'kernel'),
  (7, 'NET', 'Network socket events - reserved', 'host', 'kernel');
)SQL";

// The tables whose rows leave the file, as the store describes them (store/table_defs.h): the
// sessions and what they recorded beside the calls. (Version 2 added the host context and
// causal chains, version 4 the stacks, version 6 device_counters, which replaced version 3's
// rdma_counters: its rows move there, and the rdma backend's rdma_counters view gives them
// back with their old columns.)
std::string described_tables_ddl() {
  std::string s;
  for (const char* t :
       {"sessions", "process_names", "libraries", "system_snapshots", "process_stats",
        "cgroup_metadata", "causal_chains", "stack_frames", "device_counters"})
    s += create_table_sql(table_def(t));
  return s;
}

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

// Threads stuck now (capture/inflight_monitor.h; added to schema 10 without a version: readers
// check that the table exists).
std::string inflight_ddl() { return create_table_sql(table_def("inflight")); }

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

namespace {

// What a file SQLite cannot open holds, where it is not an SQLite database at all (a damaged
// one keeps SQLite's 16-byte header): the compressed fixture or the export given in its
// place was said to be a damaged trace, with a hint to check it page by page.
std::optional<std::string> not_sqlite(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[16] = {};
  in.read(head, sizeof head);
  std::string_view h(head, size_t(in.gcount()));
  // A file shorter than the header is not a database either ("hello" was called damaged),
  // unless it is the start of SQLite's own header (a database cut short).
  constexpr std::string_view kMagic("SQLite format 3\0", 16);
  if (h.empty() || kMagic.substr(0, h.size()) == h) return std::nullopt;
  std::string why = path + ": not a trace: not an SQLite database";
  auto starts = [&h](std::string_view magic) { return h.substr(0, magic.size()) == magic; };
  if (starts("\xfd"
             "7zXZ"))
    return why + "; it is xz-compressed (`xz -dk " + path + "` gives the file inside)";
  if (starts("\x1f\x8b"))
    return why +
           "; it is gzip-compressed (a pprof profile from `ingero export --format pprof`, "
           "or a file to `gunzip` first)";
  if (starts("\x28\xb5\x2f\xfd"))
    return why + "; it is zstd-compressed (`zstd -d " + path + "` gives the file inside)";
  size_t first = h.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (h[first] == '{' || h[first] == '['))
    return why +
           "; it holds JSON (a Perfetto trace written by `ingero export`? ingero reads the "
           "trace file it was exported from)";
  return why;
}

}  // namespace

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
    if (auto why = not_sqlite(db.path())) return ingero::make_error(*why);
    // SQLite's message names the file already: said once.
    std::string why = app.error().message;
    const char* file = sqlite3_db_filename(db.handle(), "main");
    for (const std::string& named : {db.path(), std::string(file ? file : "")})
      if (!named.empty() && why.rfind(named + ": ", 0) == 0) why.erase(0, named.size() + 2);
    return ingero::make_error(db.path() + ": not a readable SQLite database: " + why);
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
                              std::to_string(**app) + " belongs to another program)" +
                              stray_wal_hint(db.path()));
  if (auto legacy = detect_legacy(db)) return *legacy;
  return ingero::make_error(db.path() +
                            ": not an ingero trace (no ingero schema: expected an events table "
                            "with sources/ops, as written by `ingero trace`)" +
                            stray_wal_hint(db.path()));
}

ingero::Status roll_back_interrupted_write(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path + "-journal", ec)) return {};
  {
    auto ro = Db::open(path, Db::Mode::kReadOnly);
    if (!ro) return ro.error();
    if ((*ro)->query_int("PRAGMA application_id") ||
        sqlite3_extended_errcode((*ro)->handle()) != SQLITE_READONLY_ROLLBACK)
      return {};  // not hot: SQLite ignores it (or the file is refused for its own reasons)
  }
  auto rw = Db::open(path, Db::Mode::kReadWrite);
  if (!rw) return rw.error();
  // The first read of a read-write connection rolls a hot journal back.
  if (auto n = (*rw)->query_int("SELECT count(*) FROM sqlite_master"); !n)
    return ingero::make_error(path + ": rolling back the interrupted write in " + path +
                              "-journal failed: " + n.error().message);
  return {};
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

ingero::Status check_tables(Db& db, const TraceFileInfo& info) {
  if (info.format != TraceFormat::kIngero || info.schema_version < 1) return {};
  // An older schema's: the calls' table every reader of it needs (a schema 4 file without it
  // said "preparing SQL: no such table: main.events").
  std::vector<const char*> need = {"events"};
  if (info.schema_version == 10) need = {"sessions", "call_store", "host_rows"};
  if (info.schema_version == kSchemaVersion)
    need = {"schema_version", "sessions",   "sources",  "ops",         "call_seconds",
            "call_store",     "host_store", "inflight", "kernel_names"};
  // The schema's own text damaged (a flipped byte in a CREATE TABLE): SQLite refuses every
  // statement, "malformed database schema", and table_exists read that as a missing table.
  if (auto st = db.prepare("SELECT count(*) FROM main.sqlite_master"); !st) {
    std::string why = st.error().message;
    if (why.starts_with("preparing SQL: ")) why.erase(0, 15);
    return ingero::make_error(db.path() + ": damaged: " + why + "; run: sqlite3 -readonly " +
                              db.path() + " 'PRAGMA quick_check'");
  }
  for (const char* t : need)
    if (!db.table_exists(t))
      return ingero::make_error(db.path() + ": damaged: a trace of schema " +
                                std::to_string(info.schema_version) + " lacks its table " + t +
                                " (dropped, or a copy cut short); run: sqlite3 -readonly " +
                                db.path() + " 'PRAGMA quick_check'");
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
    // A file of this schema only has its views made again: no migration to speak of.
    const char* what = from < 1                ? ": creating the trace's tables failed: "
                       : from < kSchemaVersion ? ": schema migration failed: "
                                               : ": preparing it for writing failed: ";
    return ingero::make_error(db.path() + what + e.message);
  };
  if (from < 1) {
    for (const std::string& ddl : {std::string(kTablesV1), described_tables_ddl(),
                                   std::string(kTablesV7), call_store_ddl(), host_store_ddl()})
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
  // Schema 11: host events in blocks. A file of schema 10 has them as rows: converted here,
  // every stored column kept. The view `host_rows` is made again by every build, with the
  // decoded fields it knows.
  if (db.is_table("host_rows"))
    if (auto st = convert_host_rows(db); !st) return fail(st.error());
  if (auto st = db.exec(host_rows_view_sql()); !st) return fail(st.error());
  if (auto st = db.exec(tables_merged_sessions()); !st) return fail(st.error());
  if (auto st = db.exec(inflight_ddl()); !st) return fail(st.error());
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

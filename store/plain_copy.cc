#include "store/plain_copy.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "store/call_block.h"
#include "store/call_count_check.h"
#include "store/call_store.h"
#include "store/contract_views.h"
#include "store/file_access.h"
#include "store/host_store.h"
#include "store/schema.h"
#include "store/sqlite_db.h"
#include "store/table_defs.h"
#include "store/trace_reader.h"

namespace ingero::store {
namespace {

// `call_runs` as schema 7 to 9 had it, with the columns schema 10's runs add.
const char* kRunsTable = R"SQL(
CREATE TABLE call_runs_plain (
  id INTEGER PRIMARY KEY,
  node TEXT NOT NULL DEFAULT '',
  session_id INTEGER NOT NULL DEFAULT 0,
  timestamp INTEGER NOT NULL,
  span_ns INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  tid INTEGER NOT NULL,
  comm TEXT NOT NULL DEFAULT '',
  cgroup_id INTEGER NOT NULL DEFAULT 0,
  source INTEGER NOT NULL,
  op INTEGER NOT NULL,
  library_id INTEGER,
  stream INTEGER,
  device INTEGER,
  calls INTEGER NOT NULL,
  sum_ns INTEGER NOT NULL,
  min_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL,
  nested_calls INTEGER NOT NULL DEFAULT 0,
  stack_hash INTEGER NOT NULL DEFAULT 0,
  first_call_id INTEGER,
  timed_calls INTEGER,
  func INTEGER,
  funcs TEXT
);
)SQL";

// The stored columns of `table`, in order, comma-separated.
ingero::Result<std::string> stored_columns(Db& db, const char* table) {
  auto st = db.prepare(std::string("SELECT name FROM pragma_table_xinfo('") + table +
                       "') WHERE hidden = 0");
  if (!st) return st.error();
  std::string cols;
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    cols += (cols.empty() ? "" : ", ") + st->text(0);
  }
  return cols;
}

ingero::Status convert(Db& db, std::span<const hal::SqlView> views, PlainCopy& out) {
  // The stored columns of `events`: schema 10's table host_rows has them (as the build that
  // wrote the file knew them); schema 11's view of that name has the generated ones too.
  bool host_store = has_host_store(db);
  std::string cols;
  if (host_store) {
    for (const auto& c : events_def().columns) cols += (cols.empty() ? "" : ", ") + c.name;
  } else {
    auto stored = stored_columns(db, "host_rows");
    if (!stored) return stored.error();
    cols = *stored;
  }
  auto runs = stored_columns(db, "call_runs");
  if (!runs) return runs.error();
  std::string sql = "BEGIN;\n" + events_ddl("events_plain", true) + "INSERT INTO events_plain (" +
                    cols + ") SELECT " + cols + " FROM main.events ORDER BY timestamp, id;\n" +
                    kRunsTable + "INSERT INTO call_runs_plain (" + *runs + ") SELECT " + *runs +
                    " FROM main.call_runs ORDER BY timestamp, id;\n";
  // Every view first (they read what goes), then the call store.
  auto names = db.prepare("SELECT name FROM main.sqlite_master WHERE type = 'view'");
  if (!names) return names.error();
  while (true) {
    auto r = names->step();
    if (!r) return r.error();
    if (!*r) break;
    sql += "DROP VIEW main.\"" + names->text(0) + "\";\n";
  }
  sql += std::string("DROP TABLE call_store;\n") +
         (host_store ? "DROP TABLE host_store;\n" : "DROP TABLE host_rows;\n") +
         "ALTER TABLE events_plain RENAME TO events;\n"
         "ALTER TABLE call_runs_plain RENAME TO call_runs;\n"
         "CREATE INDEX idx_events_timestamp ON events(timestamp);\n"
         "CREATE INDEX idx_call_runs_ts ON call_runs(timestamp);\n";
  if (auto st = db.exec(sql); !st) return st;
  if (auto st = db.exec(contract_views_sql(false, db.table_exists("stack_frames"),
                                           db.table_exists("stack_traces"), {}, false,
                                           db.table_exists("kernel_names")));
      !st)
    return st;
  // call_summaries: the view over call_seconds, which stays.
  if (auto st = db.exec(
          "CREATE VIEW call_summaries AS SELECT c.node, c.session_id, c.timestamp, "
          "c.timestamp / 1000000000 AS second, c.pid, c.tid, s.vendor, s.api, o.name AS op, "
          "o.kind, c.calls, c.timed, c.errors, c.unfinished, c.sum_ns, c.min_ns, c.max_ns, "
          "c.off_cpu_ns, c.preempts, c.bytes, c.sketch FROM call_seconds c JOIN sources s ON "
          "s.id = c.source JOIN ops o ON o.source_id = c.source AND o.op_id = c.op");
      !st)
    return st;
  if (auto st = install_vendor_views(db, false, views); !st) return st;
  auto st = db.prepare(
      "INSERT INTO schema_version (version, applied_at, ingero_version) VALUES (7, ?, "
      "'export --format sqlite')");
  if (!st) return st.error();
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  st->bind(1, int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec);
  if (auto r = st->step(); !r) return r.error();
  if (auto s = db.exec("PRAGMA user_version = 7;\nCOMMIT;"); !s) return s;
  auto n = db.query_int("SELECT count(*) FROM calls");
  if (!n) return n.error();
  out.calls = uint64_t(n->value_or(0));
  n = db.query_int("SELECT count(*) FROM call_runs");
  if (!n) return n.error();
  out.runs = uint64_t(n->value_or(0));
  n = db.query_int("SELECT count(*) FROM host_events");
  if (!n) return n.error();
  out.host_events = uint64_t(n->value_or(0));
  return db.exec("VACUUM");
}

}  // namespace

ingero::Result<PlainCopy> write_plain_copy(const std::string& in, const std::string& out,
                                           std::span<const hal::SqlView> views) {
  PlainCopy result;
  {
    auto src = Db::open(in, Db::Mode::kReadOnly);
    if (!src) return src.error();
    auto info = inspect(**src);
    if (!info) return info.error();
    // An empty file says why as every reader does (a tracer killed while it made it, or one
    // making it now); the original implementation's file has its events as rows already.
    if (info->format == TraceFormat::kEmpty) {
      src->reset();
      auto r = TraceReader::open(in);
      return r ? ingero::make_error(in + ": empty database, not an ingero trace") : r.error();
    }
    if (info->format == TraceFormat::kLegacyGo)
      return ingero::make_error(in +
                                ": a trace of the original Go implementation: its events are rows "
                                "already, and the sqlite3 shell reads it as it is");
    if (!has_call_store(**src))
      return ingero::make_error(in + ": its calls are rows already (schema " +
                                std::to_string(info->schema_version) +
                                "): the sqlite3 shell reads it as it is");
    // The copy holds what the readers read: a block whose entry was lost would be 4,096 calls
    // short of the summaries without a word (every other reader refuses such a file).
    if (auto st = verify_every_call(**src); !st) {
      std::string m = st.error().message;  // said as the copy's reading of `in` already
      if (m.rfind(in + ": ", 0) == 0) m.erase(0, in.size() + 2);
      return ingero::make_error(m);
    }
    if (auto st = (*src)->exec("VACUUM INTO " + sql_quote(out)); !st) {
      remove_database_files(out);  // what it wrote before the disk filled
      return st.error();
    }
  }
  auto fail = [&](const ingero::Error& e) {
    remove_database_files(out);
    return e;
  };
  auto db = Db::open(out, Db::Mode::kReadWrite);
  if (!db) return fail(db.error());
  if (auto st = convert(**db, views, result); !st)
    return fail(ingero::make_error(out + ": " + st.error().message));
  return result;
}

}  // namespace ingero::store

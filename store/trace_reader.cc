#include "store/trace_reader.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "store/call_archive.h"
#include "store/call_store.h"
#include "store/contract_views.h"
#include "store/error_sql.h"
#include "store/file_access.h"
#include "store/legacy_views.h"
#include "store/lock_wait.h"
#include "store/query_note.h"
#include "store/sql_printf.h"

namespace ingero::store {
namespace {

// Pragmas that only read. Anything else is denied, and these too when given a value.
const std::set<std::string, std::less<>> kReadPragmas = {
    "table_info",      "table_xinfo",      "table_list",      "index_list",    "index_info",
    "index_xinfo",     "foreign_key_list", "collation_list",  "function_list", "pragma_list",
    "user_version",    "application_id",   "schema_version",  "page_count",    "page_size",
    "freelist_count",  "encoding",         "compile_options", "data_version",  "database_list",
    "integrity_check", "quick_check"};

// `rows_read`, where given: set when the statement reads the rows of events (the table, or the
// archive of its call rows), for the note on folded calls (store/query_note.h).
int authorizer(void* rows_read, int action, const char* a1, const char* a2, const char*,
               const char*) {
  switch (action) {
    case SQLITE_READ:
      if (rows_read && a1 &&
          (strcmp(a1, "events") == 0 || strcmp(a1, "archived_calls") == 0 ||
           strcmp(a1, "ingero_calls") == 0))
        *static_cast<bool*>(rows_read) = true;
      return SQLITE_OK;
    case SQLITE_SELECT:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_UPDATE:
      // Table-valued pragma functions (pragma_table_info('x')) make SQLite report an UPDATE
      // of sqlite_master while it loads the schema. A real write to it is still refused
      // three times over: read-only connection, query_only, and no writable_schema.
      if (a1 && (strcmp(a1, "sqlite_master") == 0 || strcmp(a1, "sqlite_temp_master") == 0))
        return SQLITE_OK;
      return SQLITE_DENY;
    case SQLITE_FUNCTION:
      // a2 is the function name.
      if (a2 && (strcasecmp(a2, "load_extension") == 0 || strcasecmp(a2, "readfile") == 0 ||
                 strcasecmp(a2, "writefile") == 0 || strcasecmp(a2, "edit") == 0 ||
                 strcasecmp(a2, "fts3_tokenizer") == 0))
        return SQLITE_DENY;
      return SQLITE_OK;
    case SQLITE_PRAGMA:
      // a1 is the pragma name, a2 its argument (NULL when only read).
      if (a1 && kReadPragmas.count(a1) &&
          (a2 == nullptr || (strcmp(a1, "user_version") != 0 && strcmp(a1, "application_id") != 0 &&
                             strcmp(a1, "schema_version") != 0)))
        return SQLITE_OK;
      return SQLITE_DENY;
    default:
      return SQLITE_DENY;
  }
}

struct Deadline {
  std::chrono::steady_clock::time_point until;
  const std::atomic<bool>* cancel = nullptr;
  bool expired = false, cancelled = false;
  // Whether the statement is to stop now (past its time limit, or cancelled), noting which.
  bool stop_now() {
    if (cancel && cancel->load(std::memory_order_relaxed)) return cancelled = true;
    if (std::chrono::steady_clock::now() > until) return expired = true;
    return false;
  }
  // What stopped the statement, if this did.
  std::optional<std::string> stopped(int64_t timeout_ms) const {
    if (cancelled) return "SQL aborted: the request was cancelled";
    if (expired) return "SQL aborted: time limit of " + std::to_string(timeout_ms) + " ms exceeded";
    return std::nullopt;
  }
};

// Why a prepared statement may not run as a query: a second statement after it (anything but
// whitespace and comments in `tail`), or a write. "" where it may.
std::string not_one_read(sqlite3* h, sqlite3_stmt* stmt, const char* tail) {
  if (tail && *tail) {
    sqlite3_stmt* next = nullptr;
    const char* rest = nullptr;
    int rc = sqlite3_prepare_v2(h, tail, -1, &next, &rest);
    sqlite3_finalize(next);
    if (rc != SQLITE_OK || next != nullptr)
      return "SQL rejected: only one statement is allowed per query";
  }
  if (!sqlite3_stmt_readonly(stmt)) return "SQL rejected: the statement would modify the database";
  return "";
}

int progress(void* p) { return static_cast<Deadline*>(p)->stop_now() ? 1 : 0; }

// A string's cost as a JSON string: its bytes, quotes and escapes.
size_t json_text_cost(std::string_view t) {
  size_t cost = t.size() + 2;
  for (unsigned char c : t)
    if (c < 0x20)
      cost += 5;  // \u00XX
    else if (c == '"' || c == '\\')
      cost += 1;
  return cost;
}

// What a value costs in a result rendered as JSON: its text, quotes and escapes, and one
// separator. Every type counts, so 2 million small integers are as limited as 2 MB of text.
size_t json_cost(sqlite3_stmt* s, int col) {
  switch (sqlite3_column_type(s, col)) {
    case SQLITE_NULL:
      return 5;  // null,
    case SQLITE_INTEGER: {
      char b[24];
      return size_t(std::snprintf(b, sizeof b, "%lld", sqlite3_column_int64(s, col))) + 1;
    }
    case SQLITE_FLOAT:
      return 25;  // the longest a double prints
    case SQLITE_BLOB:
      return size_t(sqlite3_column_bytes(s, col)) * 2 + 6;  // "x'...'",
    default: {
      const auto* t = sqlite3_column_text(s, col);
      size_t n = size_t(sqlite3_column_bytes(s, col));
      return json_text_cost(t ? std::string_view(reinterpret_cast<const char*>(t), n) : "") + 1;
    }
  }
}

// Reads the current row into `row`, adding its cost (and `keys_cost`) to `bytes`; false (and `row`
// left incomplete) when the row would take `bytes` past `max_bytes`: nothing of it is kept.
bool read_row(sqlite3_stmt* raw, int ncol, size_t max_bytes, size_t& bytes, std::vector<Value>& row,
              size_t keys_cost) {
  size_t cost = keys_cost;
  for (int i = 0; i < ncol; ++i) cost += json_cost(raw, i);
  if (bytes + cost > max_bytes) return false;
  bytes += cost;
  row.reserve(size_t(ncol));
  for (int i = 0; i < ncol; ++i) {
    switch (sqlite3_column_type(raw, i)) {
      case SQLITE_NULL:
        row.emplace_back(std::monostate{});
        break;
      case SQLITE_INTEGER:
        row.emplace_back(int64_t(sqlite3_column_int64(raw, i)));
        break;
      case SQLITE_FLOAT:
        row.emplace_back(sqlite3_column_double(raw, i));
        break;
      case SQLITE_BLOB: {
        int n = sqlite3_column_bytes(raw, i);
        static const char* hex = "0123456789abcdef";
        const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(raw, i));
        std::string s = "x'";
        s.reserve(size_t(n) * 2 + 3);
        for (int k = 0; k < n; ++k) {
          s.push_back(hex[p[k] >> 4]);
          s.push_back(hex[p[k] & 15]);
        }
        s.push_back('\'');
        row.emplace_back(std::move(s));
        break;
      }
      default: {
        const char* t = reinterpret_cast<const char*>(sqlite3_column_text(raw, i));
        int n = sqlite3_column_bytes(raw, i);
        row.emplace_back(std::string(t ? t : "", size_t(n)));
      }
    }
  }
  return true;
}

}  // namespace

std::string TraceReader::format_name() const {
  switch (info_.format) {
    case TraceFormat::kIngero:
      return "ingero schema " + std::to_string(info_.schema_version);
    case TraceFormat::kLegacyGo: {
      // A version this build was not written for is read as the one its columns look like,
      // and said: what it changed (a column, a unit) would otherwise be misread without a word.
      const std::string as = info_.legacy_has_node ? "0.9" : "0.8";
      if (info_.legacy_version != "0.8" && info_.legacy_version != "0.9")
        return "ingero-go schema " + info_.legacy_version +
               " (read-only; not a version this build knows, 0.8 or 0.9: read as " + as +
               ", and what it changed is not read)";
      return "ingero-go schema " + info_.legacy_version + " (read-only)";
    }
    case TraceFormat::kEmpty:
      return "empty";
  }
  return "";
}

ingero::Result<std::unique_ptr<TraceReader>> TraceReader::open(const std::string& path,
                                                               std::span<const hal::SqlView> views,
                                                               hal::ErrorCodeFn error_codes) {
  return open_with(path, views, std::move(error_codes), nullptr);
}

ingero::Result<std::unique_ptr<TraceReader>> TraceReader::open_with(
    const std::string& path, std::span<const hal::SqlView> views, hal::ErrorCodeFn error_codes,
    std::shared_ptr<const LegacyFold> fold) {
  // Looked for before the open: SQLite deletes a journal beside a file of no pages (not hot).
  std::string beside;
  std::error_code ec;
  for (const char* side : {"-journal", "-wal"})
    if (beside.empty() && std::filesystem::exists(path + side, ec)) beside = path + side;
  auto db = Db::open(path, Db::Mode::kReadOnly);
  if (!db) return db.error();
  auto info = inspect(**db);
  if (!info) return info.error();
  // A tracer that is making the file's tables holds its lock (from the file's first instant):
  // not a killed one, whose advice to start it anew would be refused.
  if (info->format == TraceFormat::kEmpty && locked_by_another_process(path))
    return ingero::make_error(path +
                              ": holds no trace yet: a running `ingero trace` is creating "
                              "it; read it again in a moment");
  // A tracer killed while it created the file left it without tables, its journal or log
  // beside it: no trace was ever committed there.
  if (info->format == TraceFormat::kEmpty && !beside.empty())
    return ingero::make_error(path + ": holds no trace: a tracer was killed while it created it (" +
                              beside + " was beside it); `ingero trace --db " + path +
                              "` starts it anew");
  if (info->format == TraceFormat::kEmpty)
    return ingero::make_error(path + ": empty database, not an ingero trace");
  if (auto st = check_tables(**db, *info); !st) return st.error();
  std::unique_ptr<TraceReader> r(new TraceReader());
  r->db_ = std::move(*db);
  r->info_ = *info;
  r->views_.assign(views.begin(), views.end());
  r->error_codes_ = std::move(error_codes);
  register_error_functions(r->db_->handle(), &r->error_codes_);
  // Files of schema 10 on read their calls through their own views (store/call_store.h), the
  // same on every connection. Older files' archived calls first: the contract views then read
  // them through the TEMP `events`.
  bool store = has_call_store(*r->db_);
  ingero::Status st = info->format == TraceFormat::kLegacyGo || store
                          ? ingero::Status()
                          : install_call_archive(*r->db_);
  r->archive_installed_ = {r->db_->table_exists("archived_calls", "temp"),
                           r->db_->table_exists("archived_runs", "temp")};
  // A legacy file's driver calls inside runtime calls, found once per file. A file where they
  // cannot be found (a table without rowids) is read as it is, nothing folded.
  if (st && info->format == TraceFormat::kLegacyGo && !fold) {
    auto found = find_nested_calls(*r->db_, *info);
    fold = std::make_shared<const LegacyFold>(found ? std::move(*found) : LegacyFold{});
  }
  r->legacy_fold_ = fold;
  if (st && !store)
    st = info->format == TraceFormat::kLegacyGo
             ? install_legacy_views(*r->db_, *info, *fold)
             : r->db_->exec(contract_views_sql(
                   true, r->db_->table_exists("stack_frames"), r->db_->table_exists("stack_traces"),
                   [&](const std::string& c) { return r->db_->column_exists("events", c); }, false,
                   r->db_->table_exists("kernel_names")));
  if (st) st = install_device_counters_compat(*r->db_);
  if (st) st = install_vendor_views(*r->db_, true, views);
  if (!st) return ingero::make_error(path + ": " + st.error().message);
  return r;
}

ingero::Result<std::unique_ptr<TraceReader>> TraceReader::reopen() const {
  return open_with(db_->path(), views_, error_codes_, legacy_fold_);
}

int64_t TraceReader::legacy_nested_calls() const {
  return legacy_fold_ ? int64_t(legacy_fold_->nested.size()) : 0;
}

int64_t TraceReader::legacy_nested_calls(const std::optional<std::string>& node, int64_t from_ns,
                                         int64_t to_ns) {
  if (!legacy_nested_calls()) return 0;
  return store::legacy_nested_calls(*db_, node, from_ns, to_ns);
}

bool TraceReader::archive_current() {
  if (is_legacy() || has_call_store(*db_)) return true;
  return archive_installed_ == call_archive_views(*db_);
}

ingero::Status confine(Db& db, int max_value_bytes) {
  if (auto st = db.exec("PRAGMA query_only = 1"); !st) return st;
  sqlite3_limit(db.handle(), SQLITE_LIMIT_LENGTH, max_value_bytes);
  sqlite3_limit(db.handle(), SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_db_config(db.handle(), SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(db.handle(), SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_set_authorizer(db.handle(), authorizer, nullptr);
  if (int rc = guard_printf(db.handle()); rc != SQLITE_OK)
    return ingero::make_error(std::string("confining the connection: ") + sqlite3_errstr(rc));
  return {};
}

ingero::Status TraceReader::confine(int max_value_bytes) {
  if (confined_) {
    sqlite3_limit(db_->handle(), SQLITE_LIMIT_LENGTH, max_value_bytes);
    return {};
  }
  if (auto st = store::confine(*db_, max_value_bytes); !st) return st;
  confined_ = true;
  return {};
}

ingero::Result<QueryResult> run_query(TraceReader& reader, std::string_view sql,
                                      const QueryLimits& limits) {
  Db& db = reader.db();
  // SQLite reads a statement up to its first NUL: "select 1\0; drop table x" ran `select 1`
  // and dropped the rest without a word.
  if (sql.find('\0') != std::string_view::npos)
    return ingero::make_error("SQL rejected: it holds a NUL character (byte " +
                              std::to_string(sql.find('\0')) + ")");
  if (auto st = reader.confine(limits.max_value_bytes); !st) return st.error();
  Deadline deadline{std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.timeout_ms),
                    limits.cancel};
  sqlite3_progress_handler(db.handle(), 1000, progress, &deadline);
  struct Restore {
    sqlite3* h;
    ~Restore() { sqlite3_progress_handler(h, 0, nullptr, nullptr); }
  } restore{db.handle()};
  // A lock another process holds on the file (compact, a tracer ending its session) is waited
  // for as every connection waits (kBusyTimeoutMs), but never past the statement's time limit
  // or its cancellation: `query --timeout 1` waited 5 s for it, and said "database is locked".
  LockWait lock_wait(db.handle(), std::chrono::milliseconds(kBusyTimeoutMs),
                     std::chrono::milliseconds::max(), nullptr,
                     [&] { return deadline.stop_now(); });
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  bool rows_read = false;
  sqlite3_set_authorizer(db.handle(), authorizer, &rows_read);
  int rc = sqlite3_prepare_v2(db.handle(), sql.data(), int(sql.size()), &raw, &tail);
  sqlite3_set_authorizer(db.handle(), authorizer, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) {
    if (auto why = deadline.stopped(limits.timeout_ms)) return ingero::make_error(*why);
    std::string msg = sqlite3_errmsg(db.handle());
    if (rc == SQLITE_AUTH || msg.find("not authorized") != std::string::npos)
      msg += " (the trace is read-only: only SELECT and read-only pragmas are allowed)";
    return ingero::make_error("SQL rejected: " + msg);
  }
  if (!raw) return ingero::make_error("SQL rejected: empty statement");
  if (std::string why = not_one_read(db.handle(), raw, tail); !why.empty())
    return ingero::make_error(why);

  QueryResult out;
  if (rows_read) out.note = folded_calls_note(db, sql);
  int ncol = sqlite3_column_count(raw);
  size_t keys_cost = 0;  // "name": per value, and a row's braces
  for (int i = 0; i < ncol; ++i) {
    out.columns.emplace_back(sqlite3_column_name(raw, i));
    if (limits.keyed_rows) keys_cost += json_text_cost(out.columns.back()) + 1;
  }
  if (limits.keyed_rows) keys_cost += 2;
  size_t bytes = 0;
  while (true) {
    rc = sqlite3_step(raw);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (auto why = deadline.stopped(limits.timeout_ms))
        return ingero::make_error(
            *why + (deadline.expired && !out.note.empty() ? ". Note: " + out.note : ""));
      return ingero::make_error(std::string("SQL failed: ") + sqlite3_errmsg(db.handle()));
    }
    if (out.rows.size() >= limits.max_rows) {
      out.truncated = true;
      out.truncated_reason = "row limit " + std::to_string(limits.max_rows);
      break;
    }
    std::vector<Value> row;
    if (!read_row(raw, ncol, limits.max_bytes, bytes, row, keys_cost)) {
      out.truncated = true;
      out.truncated_reason = "result size limit of " + std::to_string(limits.max_bytes) + " bytes";
      break;
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace ingero::store

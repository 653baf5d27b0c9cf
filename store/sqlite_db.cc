#include "store/sqlite_db.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "store/call_store.h"
#include "store/file_access.h"
#include "store/lock_wait.h"
#include "store/owned_vfs.h"
#include "store/sketch_sql.h"

namespace ingero::store {

std::string sql_quote(std::string_view s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

std::string stray_wal_hint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path + "-wal", ec)) return "";
  return ". Or " + path +
         "-wal beside it is not its own (a write-ahead log copied from another file): move it "
         "aside and read the file again";
}

namespace {

// What lies beneath an I/O error SQLite names only as such: a write past the process's
// file-size limit read "disk I/O error", which sent the user to the disk. SQLite's saved errno
// may be a later call's: the limit is also compared with the file's and its log's sizes.
std::string limit_hint(sqlite3* db) {
  if ((sqlite3_extended_errcode(db) & 0xff) != SQLITE_IOERR) return "";
  rlimit lim{};
  if (getrlimit(RLIMIT_FSIZE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return "";
  bool at_limit = sqlite3_system_errno(db) == EFBIG;
  const char* file = sqlite3_db_filename(db, "main");
  for (std::string f : {std::string(file ? file : ""), std::string(file ? file : "") + "-wal"}) {
    struct stat st {};
    // Within 64 KiB (a page and its frame header, at most) of the limit: no write fits.
    if (!at_limit && file && *file && ::stat(f.c_str(), &st) == 0 &&
        uint64_t(st.st_size) + 65536 >= uint64_t(lim.rlim_cur))
      at_limit = true;
  }
  return at_limit ? " (the file reached this process's file-size limit, `ulimit -f`)" : "";
}

}  // namespace

ingero::Result<bool> Stmt::step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3* db = sqlite3_db_handle(s_);
  const char* file = sqlite3_db_filename(db, "main");
  std::string where = file && *file ? std::string(file) + ": " : "";
  std::string detail = sqlite3_errmsg(db), kind = sqlite3_errstr(rc);
  // ingero's own tables (store/archive_table.h) say what went wrong, the file first.
  bool own = !where.empty() && detail.starts_with(where);
  std::string msg = own ? detail : where + detail + (detail == kind ? "" : " (" + kind + ")");
  msg += busy_hint(rc) + limit_hint(db);
  if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) {
    // Read-only: a shell that opens it for writing would also write a stray log into it.
    msg +=
        "; the file is damaged: `sqlite3 -readonly FILE 'PRAGMA quick_check'` lists the damage, "
        "and no answer read from it is complete";
    if (file && *file) msg += stray_wal_hint(file);
  }
  return ingero::make_error(msg);
}

std::string Stmt::text(int col) const {
  const unsigned char* t = sqlite3_column_text(s_, col);
  return t ? std::string(reinterpret_cast<const char*>(t), size_t(sqlite3_column_bytes(s_, col)))
           : std::string();
}

namespace {

// SQLite's count of the memory it holds takes one process-wide mutex on every allocation: the
// reads of two connections on two threads (explain's split read) queued on it. Set before
// SQLite initializes (the first open); later it is refused, harmlessly.
const int kNoMemoryCount = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);

// `path` as an SQLite URI that says the file cannot change (immutable=1): no locks, no -shm.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20) {
      static const char* hex = "0123456789ABCDEF";
      uri += '%';
      uri += hex[c >> 4];
      uri += hex[c & 15];
    } else {
      uri += char(c);
    }
  }
  return uri + "?immutable=1";
}

// On a read-only file system nothing can change the file. A WAL-mode file there (every
// ingero-go trace) could not be read at all: SQLite needs a -shm beside it, and could not make
// one ("unable to open database file"); opened as immutable it needs none.
bool on_read_only_fs(const std::string& path) {
  struct statvfs fs {};
  return statvfs(path.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY);
}

// The size of the file beside `path` with `side` ("-wal"); 0 when there is none.
off_t side_size(const std::string& path, const char* side) {
  struct stat st {};
  return stat((path + side).c_str(), &st) == 0 ? st.st_size : 0;
}

// How a file on a read-only file system is opened: as immutable where no -wal holds part of it
// (an immutable file's -wal would be ignored: a trace whose tracer was killed, half its calls in
// the -wal, read as half without a word); with its -shm, as a plain read (SQLite reads the two
// together on read-only media where the -shm exists); else refused, naming the -wal.
ingero::Result<bool> read_only_fs_immutable(const std::string& path) {
  const off_t wal = side_size(path, "-wal");
  if (!wal) return true;
  struct stat st {};
  if (stat((path + "-shm").c_str(), &st) == 0) return false;
  return ingero::make_error(path + ": its -wal holds part of the trace (" + std::to_string(wal) +
                            " bytes), and on this read-only file system, without its -shm, "
                            "SQLite cannot read the two together: copy " +
                            path + " and " + path + "-wal to a writable folder and read the copy");
}

// A file alone in a folder this reader may not write: a copy of a trace that was being written
// (WAL mode) cannot be read there, SQLite needing its -shm beside it ("attempt to write a
// readonly database"). With no -wal, -shm or -journal beside it the file holds the whole trace,
// and no writer has it open (one in WAL mode keeps its -wal there): it is read as it is.
bool alone_in_a_folder_not_ours(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (access(dir.c_str(), W_OK) == 0) return false;
  struct stat st {};
  for (const char* side : {"-wal", "-shm", "-journal"})
    if (stat((path + side).c_str(), &st) == 0 || errno != ENOENT) return false;
  return true;
}

}  // namespace

ingero::Result<std::unique_ptr<Db>> Db::open(const std::string& path, Mode mode) {
  (void)kNoMemoryCount;
  // A directory, a missing file or a permission SQLite would report as "disk I/O error" or
  // "unable to open database file" is an Error naming the path and the cause.
  if (auto st = mode == Mode::kReadOnly ? check_readable(path)
                                        : prepare_writable(path, mode == Mode::kCreate);
      !st)
    return st.error();
  int flags = SQLITE_OPEN_NOMUTEX;
  switch (mode) {
    case Mode::kReadOnly:
      flags |= SQLITE_OPEN_READONLY;
      break;
    case Mode::kReadWrite:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case Mode::kCreate:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
  }
  std::string name = path;
  bool immutable = false;
  if (mode == Mode::kReadOnly && on_read_only_fs(path)) {
    auto how = read_only_fs_immutable(path);
    if (!how) return how.error();
    immutable = *how;
  } else if (mode == Mode::kReadOnly) {
    immutable = alone_in_a_folder_not_ours(path);
  }
  if (immutable) {
    name = immutable_uri(path);
    flags |= SQLITE_OPEN_URI;
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(name.c_str(), &db, flags,
                           mode == Mode::kReadOnly ? nullptr : owned_vfs_name());
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return ingero::make_error(path + ": " + msg);
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  register_sketch_functions(db);
  // The call store's tables (schema 10), which the file's own views read.
  if (rc = register_call_store_tables(db); rc != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db);
    sqlite3_close(db);
    return ingero::make_error(path + ": registering the call store's tables: " + msg);
  }
  return std::unique_ptr<Db>(new Db(db, path));
}

Db::~Db() {
  cached_.clear();  // finalized before the connection closes
  if (sqlite3_close(db_) != SQLITE_OK) sqlite3_close_v2(db_);
}

ingero::Error Db::last_error(std::string_view what) const {
  return ingero::make_error(std::string(what) + ": " + sqlite3_errmsg(db_) +
                            busy_hint(sqlite3_extended_errcode(db_)) + limit_hint(db_));
}

ingero::Status Db::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return ingero::make_error(msg + busy_hint(sqlite3_extended_errcode(db_)) + limit_hint(db_));
  }
  return {};
}

ingero::Result<Stmt> Db::prepare(std::string_view sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), int(sql.size()), &s, nullptr) != SQLITE_OK)
    return last_error("preparing SQL");
  return Stmt(s);
}

ingero::Result<Stmt*> Db::cached(const std::string& sql) {
  auto it = cached_.find(sql);
  if (it == cached_.end()) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql.data(), int(sql.size()), SQLITE_PREPARE_PERSISTENT, &s,
                           nullptr) != SQLITE_OK)
      return last_error("preparing SQL");
    it = cached_.emplace(sql, Stmt(s)).first;
  } else {
    sqlite3_reset(it->second.get());
    sqlite3_clear_bindings(it->second.get());
  }
  return &it->second;
}

ingero::Result<std::optional<int64_t>> Db::query_int(std::string_view sql) {
  auto st = prepare(sql);
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  if (!*row || st->is_null(0)) return std::optional<int64_t>();
  return std::optional<int64_t>(st->int64(0));
}

ingero::Result<std::optional<int64_t>> Db::kept_int(const std::string& sql) {
  auto version = query_int("PRAGMA data_version");
  if (!version) return version.error();
  Kept now{version->value_or(0), sqlite3_total_changes64(db_), std::nullopt};
  if (auto it = kept_.find(sql); it != kept_.end() && it->second.data_version == now.data_version &&
                                 it->second.changes == now.changes)
    return it->second.value;
  auto value = query_int(sql);
  if (!value) return value.error();
  now.value = *value;
  kept_[sql] = now;
  return *value;
}

ingero::Result<std::optional<std::string>> Db::query_text(std::string_view sql) {
  auto st = prepare(sql);
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  if (!*row || st->is_null(0)) return std::optional<std::string>();
  return std::optional<std::string>(st->text(0));
}

bool Db::table_exists(std::string_view name, std::string_view schema) {
  auto st = prepare("SELECT 1 FROM " + std::string(schema) +
                    ".sqlite_master WHERE type IN ('table','view') AND name = ?");
  if (!st) return false;
  st->bind(1, name);
  auto r = st->step();
  return r && *r;
}

bool Db::is_table(std::string_view name) {
  auto st = prepare("SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?");
  if (!st) return false;
  st->bind(1, name);
  auto r = st->step();
  return r && *r;
}

bool Db::column_exists(std::string_view table, std::string_view column, std::string_view schema) {
  auto st = prepare(schema.empty() ? "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2"
                                   : "SELECT 1 FROM pragma_table_info(?1, ?3) WHERE name = ?2");
  if (!st) return false;
  st->bind(1, table).bind(2, column);
  if (!schema.empty()) st->bind(3, schema);
  auto r = st->step();
  return r && *r;
}

}  // namespace ingero::store

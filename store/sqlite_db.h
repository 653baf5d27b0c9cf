// Thin RAII over the SQLite C API: a connection, prepared statements, and errors as values.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "hal/result.h"

namespace ingero::store {

class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3_stmt* s) : s_(s) {}  // NOLINT
  Stmt(Stmt&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~Stmt() { sqlite3_finalize(s_); }
  sqlite3_stmt* get() const { return s_; }
  explicit operator bool() const { return s_ != nullptr; }

  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind_null(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  // SQLITE_ROW -> true, SQLITE_DONE -> false, else Error.
  ingero::Result<bool> step();
  void reset() { sqlite3_reset(s_); }
  int64_t int64(int col) const { return sqlite3_column_int64(s_, col); }
  double real(int col) const { return sqlite3_column_double(s_, col); }
  std::string text(int col) const;
  // The column's text without a copy: valid until the next step or column call on this row.
  std::string_view text_view(int col) const {
    const unsigned char* t = sqlite3_column_text(s_, col);
    return t ? std::string_view(reinterpret_cast<const char*>(t),
                                size_t(sqlite3_column_bytes(s_, col)))
             : std::string_view();
  }
  bool is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }

 private:
  sqlite3_stmt* s_ = nullptr;
};

// `s` as an SQL string literal: 'it''s'.
std::string sql_quote(std::string_view s);
// Where PATH-wal lies beside a file that reads as damaged or as another program's: ". Or
// PATH-wal beside it is not its own ...", the likelier cause and the way out; "" where none.
// SQLite takes a write-ahead log copied from another database for the file's own pages.
std::string stray_wal_hint(const std::string& path);

class Db {
 public:
  enum class Mode { kReadOnly, kReadWrite, kCreate };
  // Checks the path first (store/file_access.h): a directory, a missing file (but for
  // kCreate, which creates it with mode 0600) or a permission problem is an Error naming the
  // path and the cause.
  static ingero::Result<std::unique_ptr<Db>> open(const std::string& path, Mode mode);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  ingero::Status exec(const std::string& sql);
  ingero::Result<Stmt> prepare(std::string_view sql);
  // The statement of `sql`, prepared at its first use on this connection and kept until the Db
  // closes: reset, its parameters all NULL. For the writer's inserts that run every commit (a
  // statement prepared afresh each time was 3% of the tracer's CPU). Not for a statement whose
  // rows are still being read when the same SQL is asked for again.
  ingero::Result<Stmt*> cached(const std::string& sql);
  // First column of the first row, if any.
  ingero::Result<std::optional<int64_t>> query_int(std::string_view sql);
  ingero::Result<std::optional<std::string>> query_text(std::string_view sql);
  // query_int, its answer kept until the file changes (a commit of another connection, or a
  // change made on this one): for a figure about the whole file that every cursor of a read
  // asks for, and that costs a scan.
  ingero::Result<std::optional<int64_t>> kept_int(const std::string& sql);
  // A table or a view of that name.
  bool table_exists(std::string_view name, std::string_view schema = "main");
  // A table of main of that name (not a view).
  bool is_table(std::string_view name);
  // Whether `table` has `column`: in `schema` ("main", "temp", an attached one), or in the one
  // an unqualified name finds (temp first) when it is empty.
  bool column_exists(std::string_view table, std::string_view column, std::string_view schema = {});
  ingero::Error last_error(std::string_view what) const;

 private:
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
  struct Kept {
    int64_t data_version = 0, changes = 0;
    std::optional<int64_t> value;
  };
  std::map<std::string, Kept> kept_;
  std::unordered_map<std::string, Stmt> cached_;
};

}  // namespace ingero::store

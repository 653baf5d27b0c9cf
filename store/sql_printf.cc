#include "store/sql_printf.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace ingero::store {
namespace {

// The private connection that computes what passed the check, and its statements by number of
// arguments.
struct Printer {
  sqlite3* aux = nullptr;
  std::map<int, sqlite3_stmt*> by_args;
  ~Printer() {
    for (auto& [n, st] : by_args) sqlite3_finalize(st);
    sqlite3_close(aux);
  }
};

void destroy(void* p) { delete static_cast<Printer*>(p); }

// Whether every width and precision of `fmt`, written out or taken from an argument (`*`), is
// at most `limit`; `why` says which is not. The conversions are SQLite's: %[flags][width]
// [.precision][l|ll]type, every type but %% taking one argument.
bool within(const char* fmt, int argc, sqlite3_value** argv, int64_t limit, std::string& why) {
  int next = 1;  // the argument the next conversion takes
  auto star = [&](const char* what) {
    if (next >= argc) return true;  // SQLite takes a missing argument as 0
    int64_t v = sqlite3_value_int64(argv[next++]);
    if (v > limit || v < -limit) {
      why = std::string(what) + " " + std::to_string(v);
      return false;
    }
    return true;
  };
  auto number = [&](const char*& p, const char* what) {
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') {
      if (v <= limit) v = v * 10 + (*p - '0');
      ++p;
    }
    if (v > limit) {
      why = std::string(what) + " " + std::to_string(v) + (v > limit * 10 ? "+" : "");
      return false;
    }
    return true;
  };
  for (const char* p = fmt; *p; ++p) {
    if (*p != '%') continue;
    ++p;
    while (*p && std::strchr("-+ 0#!,", *p)) ++p;
    if (*p == '*') {
      if (!star("width")) return false;
      ++p;
    } else if (!number(p, "width")) {
      return false;
    }
    if (*p == '.') {
      ++p;
      if (*p == '*') {
        if (!star("precision")) return false;
        ++p;
      } else if (!number(p, "precision")) {
        return false;
      }
    }
    while (*p == 'l') ++p;
    if (!*p) break;
    if (*p != '%') ++next;
  }
  return true;
}

void guarded(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  auto* pr = static_cast<Printer*>(sqlite3_user_data(ctx));
  if (argc < 1 || sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const char* fmt = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const int64_t limit = sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1);
  std::string why;
  if (fmt && !within(fmt, argc, argv, limit, why)) {
    std::string msg = "printf: a " + why + " passes the value length limit of " +
                      std::to_string(limit) + " bytes";
    sqlite3_result_error(ctx, msg.c_str(), -1);
    return;
  }
  sqlite3_limit(pr->aux, SQLITE_LIMIT_LENGTH, int(limit));
  sqlite3_stmt*& st = pr->by_args[argc];
  if (!st) {
    std::string sql = "SELECT printf(?1";
    for (int i = 2; i <= argc; ++i) sql += ", ?" + std::to_string(i);
    sql += ")";
    if (sqlite3_prepare_v2(pr->aux, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      sqlite3_result_error(ctx, sqlite3_errmsg(pr->aux), -1);
      return;
    }
  }
  for (int i = 0; i < argc; ++i) sqlite3_bind_value(st, i + 1, argv[i]);
  if (sqlite3_step(st) == SQLITE_ROW)
    sqlite3_result_value(ctx, sqlite3_column_value(st, 0));
  else
    sqlite3_result_error(ctx, sqlite3_errmsg(pr->aux), -1);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
}

}  // namespace

int guard_printf(sqlite3* db) {
  auto* pr = new Printer;
  int rc =
      sqlite3_open_v2(":memory:", &pr->aux, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    delete pr;
    return rc;
  }
  const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
  rc = sqlite3_create_function_v2(db, "printf", -1, flags, pr, guarded, nullptr, nullptr, destroy);
  if (rc != SQLITE_OK) return rc;  // destroy() ran
  return sqlite3_create_function_v2(db, "format", -1, flags, pr, guarded, nullptr, nullptr,
                                    nullptr);
}

}  // namespace ingero::store

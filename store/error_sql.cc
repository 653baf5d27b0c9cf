#include "store/error_sql.h"

#include <string_view>

namespace ingero::store {
namespace {

// The code of the call in argv (api, ret); nullopt where ret is NULL or 0 (no failure).
std::optional<int64_t> failed_ret(sqlite3_value** argv) {
  if (sqlite3_value_type(argv[1]) != SQLITE_INTEGER) return std::nullopt;  // NULL, text, real
  int64_t ret = sqlite3_value_int64(argv[1]);
  if (ret == 0) return std::nullopt;
  return ret;
}

std::optional<hal::ErrorCode> lookup(sqlite3_context* ctx, sqlite3_value** argv, int64_t ret) {
  const auto* codes = static_cast<const hal::ErrorCodeFn*>(sqlite3_user_data(ctx));
  const unsigned char* api = sqlite3_value_text(argv[0]);
  if (!api || !*codes) return std::nullopt;
  return (*codes)(
      std::string_view(reinterpret_cast<const char*>(api), size_t(sqlite3_value_bytes(argv[0]))),
      ret);
}

void result_text(sqlite3_context* ctx, std::string_view s) {
  sqlite3_result_text(ctx, s.data(), int(s.size()), SQLITE_STATIC);  // static storage
}

void error_name(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto ret = failed_ret(argv);
  auto code = ret ? lookup(ctx, argv, *ret) : std::nullopt;
  if (!code) return sqlite3_result_null(ctx);
  result_text(ctx, code->name);
}

void error_class(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto ret = failed_ret(argv);
  if (!ret) return sqlite3_result_null(ctx);
  auto code = lookup(ctx, argv, *ret);
  result_text(ctx, hal::error_class_name(code ? code->cls : hal::ErrorClass::kOther));
}

}  // namespace

void register_error_functions(sqlite3* db, const hal::ErrorCodeFn* codes) {
  constexpr int kFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
  void* data = const_cast<hal::ErrorCodeFn*>(codes);
  sqlite3_create_function_v2(db, "error_name", 2, kFlags, data, error_name, nullptr, nullptr,
                             nullptr);
  sqlite3_create_function_v2(db, "error_class", 2, kFlags, data, error_class, nullptr, nullptr,
                             nullptr);
}

}  // namespace ingero::store

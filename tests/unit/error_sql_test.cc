// error_name() and error_class() (store/error_sql.h): what SQL users read of a failed call's code.
#include "store/error_sql.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "backends/cuda/cuda_errors.h"

namespace ingero::store {
namespace {

// The one value of `sql` on a fresh connection with the functions, as text ("NULL" for NULL).
std::string value(const hal::ErrorCodeFn& codes, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  register_error_functions(db, &codes);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::string out = "no row";
  if (sqlite3_step(st) == SQLITE_ROW)
    out = sqlite3_column_type(st, 0) == SQLITE_NULL
              ? "NULL"
              : reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

TEST(ErrorSql, NamesAndClassesACodeByItsApi) {
  hal::ErrorCodeFn cuda = backends::cuda::error_code;
  EXPECT_EQ(value(cuda, "SELECT error_name('cuda_runtime', 700)"), "cudaErrorIllegalAddress");
  EXPECT_EQ(value(cuda, "SELECT error_class('cuda_runtime', 700)"), "device_fault");
  EXPECT_EQ(value(cuda, "SELECT error_name('cuda_driver', 34)"), "CUDA_ERROR_STUB_LIBRARY");
  EXPECT_EQ(value(cuda, "SELECT error_class('cuda_driver', 34)"), "no_device");
  EXPECT_EQ(value(cuda, "SELECT error_class('cuda_runtime', 600)"), "not_ready");
  // No failure: NULL for both.
  EXPECT_EQ(value(cuda, "SELECT error_name('cuda_runtime', 0)"), "NULL");
  EXPECT_EQ(value(cuda, "SELECT error_class('cuda_runtime', NULL)"), "NULL");
  // A code or an API no backend knows: no name, class "other".
  EXPECT_EQ(value(cuda, "SELECT error_name('cuda_runtime', 4242)"), "NULL");
  EXPECT_EQ(value(cuda, "SELECT error_class('ibverbs', 12)"), "other");
  EXPECT_EQ(value(cuda, "SELECT error_name(NULL, 700)"), "NULL");
}

TEST(ErrorSql, AReaderGivenNoNamesKnowsNone) {
  hal::ErrorCodeFn none;
  EXPECT_EQ(value(none, "SELECT error_name('cuda_runtime', 700)"), "NULL");
  EXPECT_EQ(value(none, "SELECT error_class('cuda_runtime', 700)"), "other");
}

}  // namespace
}  // namespace ingero::store

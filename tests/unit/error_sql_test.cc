// error_name() and error_class() (store/error_sql.h): what SQL users read of a failed call's code.
#include "store/error_sql.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <string>

#include "app/builtin_backends.h"
#include "app/demo_scenarios.h"
#include "backends/cuda/cuda_errors.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

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

// Through a trace's reader and the confinement users' SQL runs in (`ingero query`, MCP's
// query): the device-fault demo's failed calls by name and class.
TEST(ErrorSql, AReadersQueriesNameTheCodesOfItsCalls) {
  std::string path = test::temp_path("error-sql.db");
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE(app::write_demo("device-fault", **w));
    ASSERT_TRUE((*w)->finish({}));
  }
  auto reader = TraceReader::open(path, {}, app::builtin_error_codes());
  ASSERT_TRUE(reader) << reader.error().message;
  auto r = run_query(**reader,
                     "SELECT error_name(api, ret), error_class(api, ret), count(*) FROM calls "
                     "WHERE status = 'error' GROUP BY 1, 2");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(r->rows[0][0]), "cudaErrorIllegalAddress");
  EXPECT_EQ(std::get<std::string>(r->rows[0][1]), "device_fault");
  EXPECT_EQ(std::get<int64_t>(r->rows[0][2]), 44);
  // A reader given no names: the functions exist, and know nothing.
  auto bare = TraceReader::open(path);
  ASSERT_TRUE(bare);
  auto n = run_query(**bare, "SELECT error_name('cuda_runtime', 700), error_name('x', 7.5)");
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_TRUE(std::holds_alternative<std::monostate>(n->rows[0][0]));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(n->rows[0][1]));
}

// The per-second summaries count errors as explain does: a call still in progress (class not
// ready) is an answer, a failure is one.
TEST(ErrorSql, TheSummariesCountNoCallInProgressAsAnError) {
  std::string path = test::temp_path("not-ready.db");
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w);
  SessionInfo si;
  si.node = "t";
  si.started_at_ns = 1'775'000'000'000'000'000;
  si.mono_offset_ns = si.started_at_ns - 1'000'000'000'000;
  ASSERT_TRUE((*w)->begin_session(si));
  auto call = [&](int64_t ret, hal::ErrorClass cls) {
    hal::Event e;
    e.ts_ns = 1'000'000'000'000;
    e.dur_ns = 1000;
    e.pid = e.tid = 7;
    e.vendor = "nvidia";
    e.api = "nccl";
    e.op = "ncclAllReduce";
    e.kind = hal::EventKind::kCollective;
    e.has_ret = true;
    e.ret = ret;
    if (ret) e.set(hal::Field::kErrClass, uint64_t(cls));
    ASSERT_TRUE((*w)->add(e));
  };
  call(0, hal::ErrorClass::kNone);
  call(7, hal::ErrorClass::kNotReady);  // ncclInProgress
  call(7, hal::ErrorClass::kNotReady);
  call(2, hal::ErrorClass::kOther);  // ncclSystemError
  ASSERT_TRUE((*w)->finish({}));
  EXPECT_EQ(test::query_int(path, "SELECT sum(calls) FROM call_summaries"), 4);
  EXPECT_EQ(test::query_int(path, "SELECT sum(errors) FROM call_summaries"), 1);
  // The rows say so too, and the report counts what the summaries do.
  auto rows = test::query_rows(path, "SELECT status, count(*) FROM calls GROUP BY 1 ORDER BY 1");
  EXPECT_EQ(rows, (std::vector<std::vector<std::string>>{
                      {"error", "1"}, {"not_ready", "2"}, {"ok", "1"}}));
  std::string out, err;
  ASSERT_EQ(
      test::run_command({INGERO_BIN, "report", "--db", path, "--json", "-o", "-"}, &out, &err), 0)
      << err;
  auto report = nlohmann::json::parse(out);
  EXPECT_EQ(report["header"]["errors"], 1);
  EXPECT_EQ(report["ops"][0]["errors"], 1);
  // Its one failure was the last call: nothing after it, said so rather than "0 of 0".
  ASSERT_EQ(report["chains"].size(), 1u);
  std::string why = report["chains"][0]["explanation"];
  EXPECT_NE(why.find("that returned success; no call returned after it."), std::string::npos)
      << why;
}

}  // namespace
}  // namespace ingero::store

// Issue 37, item 10: `query` spilled ~170 MB/s of SQLite temporary files (5 GB in one 30 s
// statement) beside the tracer's disk. --max-temp bounds them: a statement that needs more
// stops and says so; one within the bound answers as before.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// A sort of every row that no index serves, with each row's whole width: SQLite's sorter
// keeps ~2 MB in memory and writes the rest to temporary files.
const char* kSort = "SELECT *, random() AS r FROM events ORDER BY r";

TEST(QueryTempFiles, AStatementPastTheBoundStopsNamingIt) {
  std::string db = write_free_calls(temp_path("t.db"), 200'000);
  std::string out, err;
  int rc = run_command({INGERO_BIN, "query", db, kSort, "--limit", "3", "--max-temp", "512KiB"},
                       &out, &err);
  EXPECT_EQ(rc, 1) << err;
  EXPECT_EQ(err,
            "ingero query: the statement needs more than 512KiB of temporary files (its sorts, "
            "GROUP BY or DISTINCT over many rows); --max-temp raises the limit, a WHERE or "
            "LIMIT narrows the statement\n");
  EXPECT_EQ(out, "");
  // Within the bound (and the default's): the same statement answers.
  for (std::vector<std::string> bound :
       {std::vector<std::string>{"--max-temp", "256MiB"}, std::vector<std::string>{}}) {
    std::vector<std::string> argv = {INGERO_BIN, "query", db, kSort, "--limit", "3", "--json"};
    argv.insert(argv.end(), bound.begin(), bound.end());
    out.clear();
    err.clear();
    ASSERT_EQ(run_command(argv, &out, &err), 0) << err;
    EXPECT_EQ(nlohmann::json::parse(out).size(), 3u);
  }
  // A malformed bound is a usage error.
  EXPECT_EQ(run_command({INGERO_BIN, "query", db, "SELECT 1", "--max-temp", "lots"}, &out, &err),
            2);
}

}  // namespace
}  // namespace ingero::test

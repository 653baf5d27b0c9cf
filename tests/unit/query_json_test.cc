// `query --json` and MCP run_sql render SQL values as JSON: NULL is null, and a REAL JSON
// cannot hold (infinite, not a number) is named, never null (it read as SQL NULL).
#include "store/query_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

TEST(QueryJson, NonFiniteRealsAreNamedNotNull) {
  QueryResult r;
  r.columns = {"a", "b", "c", "d", "e"};
  r.rows.push_back({Value{std::numeric_limits<double>::infinity()},
                    Value{-std::numeric_limits<double>::infinity()}, Value{std::nan("")},
                    Value{std::monostate{}}, Value{0.5}});
  EXPECT_EQ(to_json(r).dump(), R"([{"a":"inf","b":"-inf","c":"nan","d":null,"e":0.5}])");
}

// A hostile tester's findings: --json sorted each row's keys and kept only the last of columns
// named alike (a join's two `id`s). Keys now keep the statement's order, and a repeated name is
// keyed NAME_2, NAME_3 (passing over a name a later column has), said once on stderr.
TEST(QueryJson, KeysKeepTheirOrderAndColumnsNamedAlikeAreAllKept) {
  std::string path =
      tiers_fixture::write_trace("query-keys.db", tiers_fixture::training_loop(1).calls);
  std::string out, err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "query", "--json", "--db", path,
                               "SELECT 2 AS z, 1 AS a, 3 AS a, 4 AS a_2, 5 AS a"},
                              &out, &err),
            0)
      << err;
  EXPECT_EQ(out, R"([{"z":2,"a":1,"a_3":3,"a_2":4,"a_4":5}])"
                 "\n");
  EXPECT_EQ(err,
            "ingero query: note: columns named as one before them are keyed a_3, a_4 in "
            "the JSON\n");
  ASSERT_EQ(
      test::run_command({INGERO_BIN, "query", "--json", "--db", path, "SELECT 1 AS b"}, &out, &err),
      0);
  EXPECT_EQ(err, "");
}

// The table keeps a row on its line: a newline, tab or carriage return inside a value is shown
// as \n, \t, \r (they were spaces: "a\nb" read as "a b"); --json keeps them.
TEST(QueryJson, TheTableShowsNewlinesAndTabsInsideValues) {
  std::string path =
      tiers_fixture::write_trace("query-table.db", tiers_fixture::training_loop(1).calls);
  std::string out, err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "query", "--db", path,
                               "SELECT 'a' || char(10) || 'b' || char(9) || 'c' AS v, 'a b' AS w"},
                              &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "v        w  \n-------  ---\na\\nb\\tc  a b\n(1 row)\n");
}

// `query --json` writes its array row by row (the whole result as one JSON document beside its
// values took 3.3 GB for 300,000 calls): byte for byte what the document's dump() wrote, and
// the table likewise from two passes over the values, without a copy of every cell.
TEST(QueryJson, TheCommandWritesRowByRowWhatOneDocumentWould) {
  std::string path =
      tiers_fixture::write_trace("query-rows.db", tiers_fixture::training_loop(3).calls);
  const std::string sql =
      "SELECT 1 AS n, 'a \"quoted\" and a\nnewline' AS t, NULL AS z, 2.5 AS r "
      "UNION ALL SELECT 2, 'two', 'x', 1e300 UNION ALL SELECT 3, '', NULL, -0.25";
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader);
  auto res = run_query(**reader, sql);
  ASSERT_TRUE(res) << res.error().message;
  ASSERT_EQ(res->rows.size(), 3u);
  std::string out, err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "query", "--db", path, "--json", sql}, &out, &err), 0)
      << err;
  EXPECT_EQ(out,
            to_json(*res).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  ASSERT_EQ(test::run_command({INGERO_BIN, "query", "--db", path, sql}, &out, &err), 0) << err;
  EXPECT_EQ(out,
            "n  t                          z     r     \n"
            "-  -------------------------  ----  ------\n"
            "1  a \"quoted\" and a\\nnewline  NULL     2.5\n"
            "2  two                        x     1e+300\n"
            "3                             NULL   -0.25\n"
            "(3 rows)\n");
}

// --limit takes a count of rows: "-1" was read as the largest size_t, an unlimited answer
// (and for --source a limit + 1 of 0). It is a usage error now; 0 and N cut where they say.
TEST(QueryLimit, OnlyACountOfRowsIsALimit) {
  std::string path =
      tiers_fixture::write_trace("query-limit.db", tiers_fixture::training_loop(3).calls);
  const std::string sql = "SELECT id FROM calls ORDER BY id LIMIT 3";
  std::string out, err;
  for (const char* bad : {"-1", "1e3", "2.5", "", "1000000000000000"}) {
    EXPECT_EQ(
        test::run_command({INGERO_BIN, "query", "--db", path, "--limit", bad, sql}, &out, &err), 2)
        << bad;
    EXPECT_NE(err.find("--limit: expected a number of rows, 0 to 999999999999999"),
              std::string::npos)
        << bad << ": " << err;
    EXPECT_EQ(out, "") << bad;
  }
  ASSERT_EQ(test::run_command({INGERO_BIN, "query", "--db", path, "--limit", "2", sql}, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "id\n--\n 1\n 2\n(2 rows; truncated at row limit 2)\n");
  EXPECT_EQ(err, "ingero query: truncated at row limit 2\n");
}

}  // namespace
}  // namespace ingero::store

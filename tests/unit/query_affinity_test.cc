// The columns of calls, runs and host events read from blocks have their types, as the tables
// of rows had them: a hostile tester found `pid = '4242'` matching nothing in a trace of today's
// schema (the virtual tables declared no types, so no affinity), where an older file compared
// it as the number. Agents quote numbers in their SQL.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

TEST(QueryAffinity, AQuotedNumberMatchesAsItDoesInAFileOfRows) {
  std::string path =
      tiers_fixture::write_trace("affinity.db", tiers_fixture::training_loop(3).calls);
  const std::string pid = test::query_rows(path, "SELECT min(pid) FROM calls")[0][0];
  const int64_t calls = test::query_int(path, "SELECT count(*) FROM calls WHERE pid = " + pid);
  ASSERT_GT(calls, 0);
  for (const char* view : {"calls", "events", "host_events"})
    EXPECT_EQ(
        test::query_int(path,
                        std::string("SELECT count(*) FROM ") + view + " WHERE pid = '" + pid + "'"),
        test::query_int(path, std::string("SELECT count(*) FROM ") + view + " WHERE pid = " + pid))
        << view;
  EXPECT_GT(test::query_int(path, "SELECT count(*) FROM host_events WHERE pid = '" + pid + "'"), 0);
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM calls WHERE pid = '" + pid + "'"), calls);
  EXPECT_EQ(test::query_rows(path,
                             "SELECT typeof(pid), typeof(comm), typeof(stack_hash), "
                             "typeof(node) FROM calls LIMIT 1")[0],
            (std::vector<std::string>{"integer", "text", "integer", "text"}));
  EXPECT_EQ(test::query_rows(path,
                             "SELECT type FROM pragma_table_xinfo('ingero_calls') WHERE "
                             "name IN ('pid', 'comm') ORDER BY name"),
            (std::vector<std::vector<std::string>>{{"TEXT"}, {"INTEGER"}}));
}

}  // namespace
}  // namespace ingero::store

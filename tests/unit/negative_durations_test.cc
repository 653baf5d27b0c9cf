// A call whose duration is below 0 (a damaged or foreign file) has no duration: it counts as a
// call, untimed. It read as 18,446,744,073.7 s in every p95, p99 and max ("584 years"), made
// tail chains of them, and gave --json a max_ns past int64.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/h100_fixture.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST(NegativeDurations, AreUntimedCallsNotCenturies) {
  const std::string path = h100_fixture("starve", "negative", true);
  const int64_t calls = query_int(path, "SELECT count(*) FROM calls");
  const int64_t flipped =
      query_int(path, "SELECT count(*) FROM events WHERE source IN (1, 4) AND id % 7 = 0");
  ASSERT_GT(flipped, 0);
  exec_sql(path, "UPDATE events SET duration = -duration WHERE source IN (1, 4) AND id % 7 = 0");
  auto r = run_ingero({"explain", "--db", path, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  int64_t counted = 0;
  for (const auto& s : j["stats"]) {
    counted += s["calls"].get<int64_t>();
    for (const char* q : {"p50_ns", "p95_ns", "p99_ns", "max_ns"}) {
      if (s[q].is_number()) {
        EXPECT_LT(s[q].get<double>(), 60e9) << s["op"] << " " << q;
      }
    }
  }
  EXPECT_EQ(counted, calls);
  auto text = run_ingero({"explain", "--db", path});
  EXPECT_EQ(text.out.find("18446744073"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace ingero::test

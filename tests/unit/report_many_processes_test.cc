// A trace of many GPU processes (a node whose health checks and scripts each touch CUDA): the
// report keeps the step series it draws and counts the rest, counts each process once, and
// explain's text prints the processes with the most steps. A hostile tester's trace of 92,000
// processes made a 129 MB page in 48 s; "Showing 300 of 1700 processes" for 1,000.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/h100_fixture.h"
#include "tests/support/run_ingero.h"
#include "tests/unit/report_model_support.h"

namespace ingero::serve::report {
namespace {

using nlohmann::json;
using test_support::model_of;

// resnet-contended with its GPU calls spread over `n` processes by call id.
std::string spread_over(int n) {
  std::string path = test::h100_fixture("resnet-contended", "many-" + std::to_string(n), true);
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string sql = "UPDATE events SET pid = 100000 + id % " + std::to_string(n) +
                    ", tid = 100000 + id % " + std::to_string(n) +
                    " WHERE source IN (SELECT id FROM sources WHERE vendor <> 'host')";
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  return path;
}

TEST(ReportModel, ManyProcessesKeepTheEightWithMostStepsAndCountTheRest) {
  const std::string path = spread_over(40);
  ReportOptions all;
  all.max_step_processes = 1000;
  all.max_processes = 1000;
  const json every = model_of(path, all);
  const size_t stepped = every["steps"].size();
  ASSERT_GT(stepped, 8u);
  EXPECT_EQ(every["steps_total"], stepped);

  ReportOptions capped;
  capped.max_processes = 5;
  const json m = model_of(path);
  const json few = model_of(path, capped);
  ASSERT_EQ(m["steps"].size(), 8u);
  EXPECT_EQ(m["steps_total"], stepped);
  // The eight with the most steps: none left out has more than the least kept.
  uint64_t least = UINT64_MAX;
  std::set<uint64_t> kept;
  for (const auto& s : m["steps"]) {
    least = std::min(least, s["steps"].get<uint64_t>());
    kept.insert(s["pid"].get<uint64_t>());
  }
  for (const auto& s : every["steps"]) {
    if (!kept.count(s["pid"].get<uint64_t>())) {
      EXPECT_LE(s["steps"].get<uint64_t>(), least);
    }
  }
  // Each process counted once, whatever the table's cap.
  EXPECT_EQ(few["processes"].size(), 5u);
  EXPECT_EQ(few["processes_total"], every["processes_total"]);
  EXPECT_EQ(m["processes_total"], every["processes_total"]);
  EXPECT_EQ(every["processes"].size(), every["processes_total"].get<size_t>());
}

TEST(ExplainText, ManyProcessesWithStepsPrintTheTwentyWithTheMost) {
  const std::string path = spread_over(40);
  auto r = test::run_ingero({"explain", "--db", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line) && line != "Training steps") {
  }
  ASSERT_EQ(line, "Training steps") << r.out;
  size_t shown = 0;
  std::string more;
  while (std::getline(in, line) && !line.empty()) {
    if (line.rfind("  pid ", 0) == 0 || line.rfind("  python3 (pid ", 0) == 0) ++shown;
    if (line.find("more processes with fewer steps") != std::string::npos) more = line;
  }
  EXPECT_EQ(shown, 20u) << r.out.substr(0, 4000);
  auto m = model_of(path);
  const size_t total = m["steps_total"].get<size_t>();
  EXPECT_EQ(more, "  " + std::to_string(total - 20) +
                      " more processes with fewer steps: explain --pid PID for one, --json for "
                      "all");
}

}  // namespace
}  // namespace ingero::serve::report

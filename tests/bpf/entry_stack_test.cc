// A stack taken at a function's entry (a launch seen untimed) starts at its call site, as one
// taken at its return does, whatever the function's first instructions (bpf/stacks.bpf.c:
// walk_and_ship).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// The fake runtime's cudaLaunchKernel begins with `push %r12` (no `push %rbp`, no `endbr64`), so
// the kernel does not put the return address at its stack pointer into an entry's stack, and
// the test program is built without frame pointers: the walk's own chain starts with garbage.
// Every launch's stack still starts in main() at the line that made it, the same line whether
// the launch was seen at its entry (default) or at its return (--launch-timing 1).
TEST(Stacks, AnEntryWalkStartsAtTheCallSiteWhateverTheFunctionsPrologue) {
  REQUIRE_BPF();
  std::vector<std::vector<std::vector<std::string>>> sites;
  for (const char* timing : {"32", "1"}) {
    std::string db = temp_path(std::string("entry-stack-") + timing + ".db");
    auto run = trace_command(db, {INGERO_FAKE_CALLS, "launches", INGERO_FAKE_CUDART, "200", "7"},
                             {"--launch-timing", timing}, kFakeEnv);
    ASSERT_EQ(run.rc, 0) << run.err;
    sites.push_back(query_rows(
        db,
        "SELECT c.op, coalesce(s.function, '-'), coalesce(substr(s.file, -12), '-'), "
        "coalesce(s.line, '-'), count(*) FROM calls c LEFT JOIN stacks s ON s.stack_id = "
        "c.stack_hash AND s.frame = 0 GROUP BY 1, 2, 3, 4 ORDER BY 1"));
    auto sj = nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
    EXPECT_EQ(sj["stack_unknown_refs"], 0) << timing << ": " << sj.dump();
    EXPECT_EQ(sj["stack_records_empty"], 0) << timing << ": " << sj.dump();
    // By default almost every launch is seen at its entry only, and walks there.
    if (std::string(timing) == "32") {
      EXPECT_GT(sj["untimed"].get<int64_t>(), 200) << sj.dump();
    }
  }
  ASSERT_EQ(sites[0].size(), 2u) << testing::PrintToString(sites[0]);
  for (const auto& r : sites[0]) {
    EXPECT_EQ(r[1], "main") << testing::PrintToString(r);
    EXPECT_EQ(r[2], "fake_calls.c") << testing::PrintToString(r);
  }
  EXPECT_EQ(sites[0][0][0], "cuLaunchKernel");
  EXPECT_EQ(sites[0][0][4], "7");
  EXPECT_EQ(sites[0][1][0], "cudaLaunchKernel");
  EXPECT_EQ(sites[0][1][4], "200");
  EXPECT_NE(sites[0][0][3], sites[0][1][3]);  // two call sites
  EXPECT_EQ(sites[0], sites[1]);
}

}  // namespace
}  // namespace ingero::test

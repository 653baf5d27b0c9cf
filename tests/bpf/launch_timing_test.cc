// With uprobe sessions one launch in --launch-timing N is timed (bpf/call_paths.h), counted by
// the launches a program makes, not by the launch probes' entries: the driver launch that a
// runtime launch sent untimed makes is the same launch, and its entry is not counted again.
// Counting both layers' entries landed every timed entry on a driver launch, whose timing was
// lost in the fold into its untimed runtime launch: 187 of 3,000 launches came out timed at
// --launch-timing 4, not 750, and a run of fewer than 2,000 launches (before the runtime's
// probes go) had almost none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(LaunchTiming, WithSessionsOneLaunchInNIsTimedWhicheverLayersProbeSeesIt) {
  REQUIRE_BPF();
  // Kept: every launch enters both layers' probes. Detached: after the 2,000 launches that
  // prove the runtime's launches nest, the driver's probe alone sees the last 1,000.
  for (bool keep : {true, false}) {
    std::string db = temp_path(std::string("timing-") + (keep ? "kept" : "detached") + ".db");
    std::vector<std::string> flags = {"--launch-timing", "4"};
    if (keep) flags.push_back("--keep-runtime-probes");
    auto run = trace_command(db, {INGERO_FAKE_CALLS, "launches", INGERO_FAKE_CUDART, "3000", "0"},
                             flags, kFakeEnv);
    ASSERT_EQ(run.rc, 0) << run.err;
    ASSERT_EQ(run.err.find("without uprobe sessions"), std::string::npos)
        << "this test needs uprobe sessions (Linux 6.12+): " << run.err;
    EXPECT_EQ(run.err.find("launch probes are detached") != std::string::npos, !keep) << run.err;
    EXPECT_EQ(query_rows(db,
                         "SELECT op, count(*), sum(nested_calls), "
                         "sum(status <> 'untimed') FROM calls GROUP BY op ORDER BY op"),
              (std::vector<std::vector<std::string>>{{"cudaLaunchKernel", "3000", "3000", "750"}}))
        << (keep ? "kept" : "detached");
    // A timed launch is timed whole, its driver call folded into it in BPF.
    EXPECT_EQ(query_int(db,
                        "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel' AND "
                        "status <> 'untimed' AND (dur_ns IS NULL OR dur_ns <= 0)"),
              0);
  }
}

}  // namespace
}  // namespace ingero::test

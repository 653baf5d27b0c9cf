// Launch timing windows without uprobe sessions (probe/launch_windows.h): a launch's return
// probe is attached in its file's windows alone, so a launch outside them costs one trap, and
// every launch is still stored once.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// 1,500 runtime launches 1 ms apart (each nesting the driver's), then 7 direct driver launches,
// under windows of 100 ms every 800 ms (--launch-timing 8).
TEST(LaunchWindows, WithoutSessionsLaunchesOutsideWindowsAreUntimedAndEachIsStoredOnce) {
  REQUIRE_BPF();
  for (const char* mode : {"multi", "perf"}) {
    std::string db = temp_path(std::string("windows-") + mode + ".db");
    auto env = kFakeEnv;
    env.push_back(std::string("INGERO_CALL_ATTACH=") + mode);
    env.push_back("INGERO_LAUNCH_WINDOW_MS=100");
    auto run =
        trace_command(db, {INGERO_FAKE_CALLS, "launches", INGERO_FAKE_CUDART, "1500", "7", "1000"},
                      {"--launch-timing", "8"}, env);
    ASSERT_EQ(run.rc, 0) << mode << ": " << run.err;
    EXPECT_NE(run.err.find("ingero: without uprobe sessions (Linux 6.12+) a return probe traps at "
                           "every call: launches are timed in windows of 100ms in every 800ms and "
                           "until a window after a library's first launch, at one trap outside "
                           "them\n"),
              std::string::npos)
        << run.err;
    // Every launch once, the driver's folded into the runtime's that made it, in BPF (timed)
    // or by the pipeline (untimed).
    EXPECT_EQ(query_rows(db,
                         "SELECT op, count(*), sum(nested_calls), coalesce(max(nested_op), '-'), "
                         "min(grid_x), max(grid_x) FROM calls GROUP BY op ORDER BY op"),
              (std::vector<std::vector<std::string>>{
                  {"cuLaunchKernel", "7", "0", "-", "2", "2"},
                  {"cudaLaunchKernel", "1500", "1500", "cuLaunchKernel", "8", "8"}}))
        << mode;
    auto sj = nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
    EXPECT_EQ(sj["nested"].get<int64_t>() + sj["launches_folded"].get<int64_t>(), 1500)
        << mode << ": " << sj.dump();
    EXPECT_EQ(sj["unpaired_return"], 0) << mode << ": " << sj.dump();
    EXPECT_EQ(sj["frames_discarded"], 0) << mode << ": " << sj.dump();
    // Each file's first window lasts from its attach to 100 ms after its first launch was read;
    // the next opens 700 ms later, within the 1.5 s or more the launches take.
    EXPECT_GE(sj["launch_windows_opened"].get<int64_t>(), 2 * 2) << mode << ": " << sj.dump();
    int64_t timed = query_int(
        db, "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel' AND status <> 'untimed'");
    int64_t untimed = query_int(
        db, "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel' AND status = 'untimed'");
    EXPECT_EQ(timed + untimed, 1500) << mode;
    EXPECT_GE(timed, 50) << mode;  // a window holds 100 ms of launches 1 ms apart
    // Outside both files' windows (the runtime's and the driver's, 100 ms in each 800 after
    // their first): untimed. A runtime launch entered outside its own window whose driver
    // launch was timed in the driver's is timed to the driver call's return
    // (launches_timed_by_driver), so the windows of either file time launches.
    EXPECT_GE(untimed, 750) << mode << ": timed " << timed << ", " << sj.dump();
    // Outside a window and the 100 ms its return probes stay, a launch's return did not trap:
    // some 300 ms of the run's first 800, then 200 of each 800. Were they attached throughout,
    // every entry shipped untimed would have its return trap.
    EXPECT_LT(sj["untimed_returns"].get<int64_t>() * 2, sj["untimed"].get<int64_t>())
        << mode << ": " << sj.dump();
  }
}

}  // namespace
}  // namespace ingero::test

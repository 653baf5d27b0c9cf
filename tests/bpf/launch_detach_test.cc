// By default, once 2,000 launches of a runtime in a row reached the driver's launch, its launch
// probes go (capture/launch_nesting.h, ProbeManager::detach_launches). What was in flight at
// that moment must be stored once, and the thread's later calls must be their own, not folded
// into it as nested calls.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const std::vector<std::string> kFakeEnv = {"VIRTUAL_ENV=" INGERO_FAKE_VENV,
                                           "CUDA_HOME=" INGERO_FAKE_CUDA_HOME};

// Launches stored by op and api: how many, and the driver calls counted in them.
std::vector<std::vector<std::string>> launches_by_op(const std::string& db) {
  return query_rows(db,
                    "SELECT op, api, count(*), sum(nested_calls) FROM calls WHERE kind = 'launch' "
                    "GROUP BY op, api ORDER BY op");
}

struct DetachRun {
  bool ok = false;
  std::string db;
  nlohmann::json stats;
  std::string err;  // the tracer's
};

// Traces `fake_calls MODE` (3,000 launches: the proof takes 2,000 in a row,
// capture/launch_nesting.h) and releases its held call once the tracer said it detached the
// runtime's launch probes. Checks what every run must hold: nothing lost.
DetachRun detach_run(const std::string& mode, const std::vector<std::string>& flags) {
  DetachRun out;
  out.db = temp_path(mode + ".db");
  std::string gate = temp_path(mode + "-gate");
  std::filesystem::remove(gate + ".1");
  std::vector<std::string> argv = {INGERO_BIN, "trace", "--no-live", "--db", out.db};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (std::string a : {"--", INGERO_FAKE_CALLS, mode.c_str(), INGERO_FAKE_CUDART, "3000"})
    argv.push_back(a);
  argv.push_back(gate);
  auto tracer = Subprocess::spawn(argv, kFakeEnv);
  bool detached = tracer.wait_stderr_line("launch probes are detached", std::chrono::seconds(60));
  EXPECT_TRUE(detached) << tracer.err();
  // The call entered before the detach goes on only now.
  std::ofstream(gate + ".1") << "go\n";
  int rc = tracer.wait(std::chrono::seconds(60));
  EXPECT_EQ(rc, 0) << tracer.err();
  out.err = tracer.err();
  if (!detached || rc != 0) return out;
  out.stats = nlohmann::json::parse(query_rows(out.db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(out.stats["ringbuf_drops"], 0) << out.stats.dump();
  EXPECT_EQ(query_int(out.db, "SELECT lost_calls + call_drops + calls_lost_at_exit FROM sessions"),
            0);
  out.ok = true;
  return out;
}

// A sync in flight while the runtime's launch probes go keeps its return (they are in links
// of their own), and the thread's later calls are their own.
TEST(LaunchDetach, ACallInFlightAcrossTheDetachKeepsItsReturnAndSwallowsNothing) {
  REQUIRE_BPF();
  auto run = detach_run("detach", {});
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(
      query_rows(run.db,
                 "SELECT op, count(*), min(status), max(status), sum(nested_calls) FROM "
                 "calls WHERE op IN ('cudaStreamSynchronize', 'cudaMalloc') GROUP BY op "
                 "ORDER BY op"),
      (std::vector<std::vector<std::string>>{{"cudaMalloc", "5", "ok", "ok", "0"},
                                             {"cudaStreamSynchronize", "1", "ok", "ok", "0"}}));
  // Every launch, before the detach and after it (named from the driver's), is one call.
  EXPECT_EQ(query_int(run.db, "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel'"), 3010);
  EXPECT_EQ(query_int(run.db, "SELECT count(*) FROM calls WHERE api = 'cuda_driver'"), 0);
  EXPECT_EQ(run.stats["returns_detached"], 0) << run.stats.dump();
  EXPECT_EQ(run.stats["runtimes_detached"], 1) << run.stats.dump();
}

// A timed runtime launch in flight (blocked before it reaches the driver) while its probe goes
// never sees its return: BPF counts the driver launch it then makes in it, ships it untimed,
// and the thread's later calls are their own. One launch, one call.
TEST(LaunchDetach, ALaunchWhoseReturnWentWithItsProbeIsOneCallAndSwallowsNothing) {
  REQUIRE_BPF();
  // The thread's first launch: timed (one in --launch-timing per thread, the first included).
  auto run = detach_run("detach-launch", {});
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(query_rows(run.db,
                       "SELECT count(*), min(status), sum(nested_calls), max(nested_op) FROM calls "
                       "WHERE op = 'cudaLaunchKernel' AND grid_x = 1"),
            (std::vector<std::vector<std::string>>{{"1", "untimed", "1", "cuLaunchKernel"}}));
  EXPECT_EQ(query_rows(run.db,
                       "SELECT count(*), min(status), max(status), sum(nested_calls) FROM calls "
                       "WHERE op = 'cudaMalloc'"),
            (std::vector<std::vector<std::string>>{{"5", "ok", "ok", "0"}}));
  EXPECT_EQ(query_int(run.db, "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel'"), 3011);
  EXPECT_EQ(query_int(run.db, "SELECT count(*) FROM calls WHERE api = 'cuda_driver'"), 0);
  EXPECT_EQ(run.stats["returns_detached"], 1) << run.stats.dump();
}

// A launch the program makes straight into the driver (cuDNN's private runtime, cublasLt) makes
// no driver launch of its own. Released at the end of a read cycle (its thread asleep for two),
// it does not take the thread's next launch, a runtime launch after the detach, for the driver
// launch it made: on an H200, ResNet-18 lost 40 of 264 runtime launches a step so.
TEST(LaunchDetach, ARuntimeLaunchAfterADirectDriverLaunchAcrossReadCyclesIsItsOwn) {
  REQUIRE_BPF();
  auto run = detach_run("after-direct", {});
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(launches_by_op(run.db), (std::vector<std::vector<std::string>>{
                                        {"cuLaunchKernel", "cuda_driver", "4", "0"},
                                        {"cudaLaunchKernel", "cuda_runtime", "3004", "3004"}}));
  EXPECT_EQ(run.stats["runtimes_detached"], 1) << run.stats.dump();
  // The tracer's last line counts the driver calls in the launches named from the driver's
  // probe too (it left them out: 2,253 of 3,000 in a run like this).
  EXPECT_NE(run.err.find(" calls (3004 nested calls folded into them) and "), std::string::npos)
      << run.err;
}

// The same within a read cycle: a direct driver launch still held when the runtime's launches
// after it are read (driver launches from the runtime's text, its probes gone). Each is its
// own: the stand-in's ResNet-18 mix lost the first runtime launch after each step's direct
// launches (2,899 of 792,000), and the tracer said nothing of it.
TEST(LaunchDetach, RuntimeLaunchesRightAfterADirectDriverLaunchAreEachTheirOwn) {
  REQUIRE_BPF();
  auto run = detach_run("between-direct", {});
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(launches_by_op(run.db), (std::vector<std::vector<std::string>>{
                                        {"cuLaunchKernel", "cuda_driver", "1000", "0"},
                                        {"cudaLaunchKernel", "cuda_runtime", "5000", "5000"}}));
  EXPECT_EQ(run.stats["runtimes_detached"], 1) << run.stats.dump();
}

}  // namespace
}  // namespace ingero::test

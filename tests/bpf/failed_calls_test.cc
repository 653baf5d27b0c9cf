// explain on calls that failed, traced from the real CUDA libraries (engine/rules_failed_calls.cc).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// Without a GPU every call of the real runtime fails: explain says so in one HIGH chain that
// names each code as the runtime and the driver stub spell it, with the exact counts.
TEST(TraceCuda, FailedCallsOfTheRealRuntimeAreExplainedByName) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_CALLS);
  REQUIRE_FILE(kStub);
  std::string db = temp_path("failed.db");
  auto run = trace_command(db, {INGERO_CUDA_CALLS, kStub}, {"--launch-timing", "1"});
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = 0;
  auto lines = parse_workload(run.out, &pid);
  ASSERT_EQ(lines.size(), 47u) << run.out;
  std::map<int, int> by_ret;
  for (const auto& l : lines) by_ret[l.ret]++;
  // The runtime's calls fail with cudaErrorInsufficientDriver, the stub driver's with
  // CUDA_ERROR_STUB_LIBRARY: nothing else, nothing succeeds.
  ASSERT_EQ(by_ret.size(), 2u) << run.out;
  ASSERT_EQ(by_ret[35] + by_ret[34], 47);
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  std::vector<nlohmann::json> failed;
  for (const auto& c : j["chains"])
    if (c["rule"] == "failed_calls") failed.push_back(c);
  ASSERT_EQ(failed.size(), 1u) << out;
  const auto& c = failed[0];
  EXPECT_EQ(c["severity"], "HIGH");
  EXPECT_EQ(c["pids"], nlohmann::json::array({pid}));
  std::string summary = c["summary"];
  std::string who = "cuda_calls (pid " + std::to_string(pid) + ")";
  EXPECT_EQ(summary.rfind(who + " could not use a GPU: 47 of 47 GPU calls failed, the first ", 0),
            0u)
      << summary;
  std::string expl = c["explanation"];
  auto runtime = std::to_string(by_ret[35]), driver = std::to_string(by_ret[34]);
  EXPECT_NE(expl.find("cudaErrorInsufficientDriver (35) from " + runtime + " calls of "),
            std::string::npos)
      << expl;
  EXPECT_NE(expl.find("CUDA_ERROR_STUB_LIBRARY (34) from " + driver + " calls of "),
            std::string::npos)
      << expl;
  EXPECT_NE(expl.find("after 0 calls that returned success"), std::string::npos) << expl;
  // SQL users name the codes the same way (store/error_sql.h).
  std::string rows;
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--db", db, "--json",
                         "SELECT error_name(api, ret) AS error, error_class(api, ret) AS class, "
                         "count(*) AS n FROM calls GROUP BY 1, 2 ORDER BY 1"},
                        &rows, &err),
            0)
      << err;
  EXPECT_EQ(nlohmann::json::parse(rows),
            nlohmann::json::parse(R"([{"error": "CUDA_ERROR_STUB_LIBRARY", "class": "no_device",
                                       "n": )" +
                                  driver + R"(},
                                      {"error": "cudaErrorInsufficientDriver",
                                       "class": "no_device", "n": )" +
                                  runtime + "}]"));
  // The text report leads with it.
  std::string text;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &text, &err), 0) << err;
  EXPECT_NE(text.find("[HIGH] " + summary), std::string::npos) << text;
}

// A sticky device fault (the stand-in runtime's INGERO_FAKE_FAULT_AFTER): the sync of step 21
// fails with cudaErrorIllegalAddress, and every call after it. explain names it, the 16
// launches in flight since the last sync that succeeded, and what failed after it.
TEST(TraceCuda, AStickyFaultNamesTheLaunchesInFlight) {
  REQUIRE_BPF();
  std::string db = temp_path("fault.db");
  std::vector<std::string> env = kFakeEnv;
  env.push_back("INGERO_FAKE_FAULT_AFTER=20");
  auto run = trace_command(db, {INGERO_FAKE_CALLS, "steps", INGERO_FAKE_CUDART, "40"},
                           {"--launch-timing", "1"}, env);
  ASSERT_EQ(run.rc, 0) << run.err;
  // Steps 1-20 succeed; step 21's launches too, then its sync fails; steps 22-40 fail whole.
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE ret = 700"), 1 + 19 * 17);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE ret = 0"), 20 * 17 + 16);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE err_class = 5"), 1 + 19 * 17);
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  ASSERT_FALSE(j["chains"].empty()) << out;
  const auto& c = j["chains"][0];
  EXPECT_EQ(c["rule"], "failed_calls") << c.dump(2);
  EXPECT_EQ(c["severity"], "HIGH");
  std::string summary = c["summary"];
  EXPECT_NE(summary.find("'s GPU context failed: cudaStreamSynchronize returned "
                         "cudaErrorIllegalAddress (700), and 323 of the 323 calls that returned "
                         "after it failed"),
            std::string::npos)
      << summary;
  ASSERT_EQ(c["timeline"].size(), 3u) << c.dump(2);
  std::string in_flight = c["timeline"][1]["detail"];
  EXPECT_EQ(in_flight.rfind("in flight: 16 launches since the last cudaStreamSynchronize that "
                            "returned success (",
                            0),
            0u)
      << in_flight;
  std::string last8 = "; the last 8: function 0x1234 \u00d7 8";
  ASSERT_GT(in_flight.size(), last8.size()) << in_flight;
  EXPECT_EQ(in_flight.substr(in_flight.size() - last8.size()), last8) << in_flight;
  EXPECT_EQ(c["fixes"][0],
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so that the launch that faults is "
            "the call that fails");
}

}  // namespace
}  // namespace ingero::test

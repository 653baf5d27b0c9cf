// Each kernel's launches carry their own call site's stack. A call site is keyed cheaply by its
// return address (bpf/stacks.bpf.c); nvcc's default host code (no -O) launches every kernel of a
// file from the one call in its out-of-line __cudaLaunchKernel_helper, so all of them had one
// return address, and each kernel's launches took the stack of whichever was walked last:
// "1,200 alpha from beta" in MCP get_kernels, the per-stack counts of get_stacks wrong. A
// launch's kernel is now part of its site's key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/bpf/kernels_app_harness.h"
#include "tests/support/mcp_stdio.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Rows = std::vector<std::vector<std::string>>;

// kernels_app built without -O, 20 steps of 50 scale<float> and 50 plain_add launches in turn
// from one loop: two kernels, one helper, one return address.
TEST(LaunchSites, KernelsLaunchedThroughOneHelperKeepTheirOwnStacks) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP_O0);
  int pid = 0;
  std::string db = trace_workload({INGERO_KERNELS_APP_O0, "steps", "20"}, 2000, {}, &pid);
  const std::string launches =
      "FROM calls WHERE op = 'cudaLaunchKernel' AND pid = " + std::to_string(pid);
  // Every launch has a stack, each kernel one of its own, and no stack is shared.
  EXPECT_EQ(query_rows(db,
                       "SELECT kernel, count(*), count(DISTINCT stack_hash), "
                       "sum(stack_hash = 0) " +
                           launches + " GROUP BY kernel ORDER BY kernel"),
            (Rows{{"plain_add(float*, int)", "1000", "1", "0"},
                  {"void scale<float>(float*, float, int)", "1000", "1", "0"}}));
  EXPECT_EQ(query_int(db, "SELECT count(DISTINCT stack_hash) " + launches), 2);
  // And each kernel's stack passes through its own host stub.
  EXPECT_EQ(
      query_rows(db,
                 "SELECT DISTINCT c.kernel, s.function LIKE '%plain_add%' FROM calls c "
                 "JOIN stacks s ON s.stack_id = c.stack_hash WHERE c.op = "
                 "'cudaLaunchKernel' AND c.pid = " +
                     std::to_string(pid) + " AND s.function LIKE '%__device_stub__%' ORDER BY 1"),
      (Rows{{"plain_add(float*, int)", "1"}, {"void scale<float>(float*, float, int)", "0"}}));
}

// MCP get_stacks over the same trace, where one launch in 32 per thread is timed (the default
// --launch-timing): a stack's average is its timed launches' mean, and its total that mean for
// each launch. The untimed ones counted 0 ns: "avg 68ns" for launches whose timed ones took
// 2.2 us, and launch stacks ranked low by total_time. The kernels alternate, so every timed
// launch is one kernel's: the other's stack has none, and takes the op's mean.
TEST(McpStacks, UntimedLaunchesTakeTheirTimedMean) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP_O0);
  int pid = 0;
  std::string db = trace_workload({INGERO_KERNELS_APP_O0, "steps", "20"}, 2000, {}, &pid);
  const std::string op = "op = 'cudaLaunchKernel'";
  const double op_mean = std::stod(
      query_rows(db, "SELECT total(dur_ns) / count(dur_ns) FROM calls WHERE " + op)[0][0]);
  auto want = query_rows(db,
                         "SELECT printf('%016x', stack_hash), count(*), count(dur_ns), "
                         "total(dur_ns) / count(dur_ns) FROM calls WHERE " +
                             op + " GROUP BY stack_hash ORDER BY 2 DESC, stack_hash");
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(std::stoll(want[0][2]) + std::stoll(want[1][2]),
            query_int(db, "SELECT count(dur_ns) FROM calls WHERE " + op));
  ASSERT_TRUE(want[0][2] == "0" || want[1][2] == "0") << "both kernels' launches were timed";
  auto r = mcp_tool_over_stdio(db, "get_stacks", {{"op", "cudaLaunchKernel"}});
  ASSERT_EQ(r["result"]["isError"], false) << r.dump();
  const auto& stacks = r["result"]["structuredContent"]["stacks"];
  ASSERT_EQ(stacks.size(), 2u) << r.dump();
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(want[i][0]);
    const int64_t n = std::stoll(want[i][1]), timed = std::stoll(want[i][2]);
    const double mean = timed ? std::stod(want[i][3]) : op_mean;
    EXPECT_EQ(stacks[i]["hash"], want[i][0]);
    EXPECT_EQ(stacks[i]["calls"].get<int64_t>(), n);
    EXPECT_EQ(stacks[i]["timed_calls"].get<int64_t>(), timed);
    EXPECT_NEAR(double(stacks[i]["avg_ns"].get<int64_t>()), mean, 1.0);
    EXPECT_NEAR(double(stacks[i]["total_ns"].get<int64_t>()), mean * double(n), 1.0);
  }
  const std::string text = r["result"]["content"][0]["text"];
  EXPECT_NE(text.find("(of its timed calls)"), std::string::npos) << text;
  EXPECT_NE(text.find("(the op's)"), std::string::npos) << text;
}

}  // namespace
}  // namespace ingero::test

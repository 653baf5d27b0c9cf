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

}  // namespace
}  // namespace ingero::test

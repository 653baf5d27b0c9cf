// MCP's latency figures of an op none of whose calls was timed: launches are timed one in
// --launch-timing per thread, among all its launches, so a thread's 7 driver launches after its
// 40 runtime ones may all be untimed. Their durations are unknown: null and "none timed", not 0.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/mcp/server.h"
#include "tests/support/builtin_tool_host.h"
#include "tests/support/mcp_calls.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::serve::mcp {
namespace {

namespace tf = store::tiers_fixture;

TEST(McpUntimed, AnOpWithNoTimedCallHasNoDuration) {
  std::vector<hal::Event> calls;
  for (int i = 0; i < 47; ++i) {
    hal::Event e = i < 40 ? tf::launch(uint64_t(i) * 20 * tf::kUs, 12 * tf::kUs)
                          : tf::call(uint64_t(i) * 20 * tf::kUs, 0, "cuda_driver", "cuLaunchKernel",
                                     hal::EventKind::kLaunch, 10, 10);
    e.timed = i == 0;
    e.has_ret = e.timed;
    if (!e.timed) e.dur_ns = 0;
    calls.push_back(e);
  }
  ToolContext ctx(tf::write_trace("untimed-op.db", calls), test::builtin_tool_host());
  ASSERT_TRUE(ctx.validate());
  Server server(ctx);
  Session session;
  Json r = test::call_tool(server, session, "get_trace_stats", Json::object(), 1);
  ASSERT_EQ(r["isError"], false) << r.dump();
  const Json* drv = nullptr;
  for (const Json& o : r["structuredContent"]["ops"])
    if (o["op"] == "cuLaunchKernel") drv = &o;
  ASSERT_NE(drv, nullptr) << r.dump();
  EXPECT_EQ((*drv)["calls"], 7);
  for (const char* k : {"total_ns", "avg_ns", "min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns"})
    EXPECT_TRUE((*drv)[k].is_null()) << k << ": " << drv->dump();
  const std::string text = r["content"][0]["text"];
  EXPECT_NE(text.find("7 cuLaunchKernel [nvidia/cuda_driver] none timed (launches seen at entry "
                      "only)"),
            std::string::npos)
      << text;
  Json p = test::call_tool(server, session, "get_process_breakdown", Json::object(), 2);
  ASSERT_EQ(p["isError"], false) << p.dump();
  bool found = false;
  for (const Json& o : p["structuredContent"]["processes"][0]["top_ops"])
    if (o["op"] == "cuLaunchKernel") {
      found = true;
      EXPECT_TRUE(o["p99_ns"].is_null()) << o.dump();
    }
  EXPECT_TRUE(found) << p.dump();
  EXPECT_NE(p["content"][0]["text"].get<std::string>().find("7 cuLaunchKernel none timed"),
            std::string::npos)
      << p["content"][0]["text"];
}

}  // namespace
}  // namespace ingero::serve::mcp

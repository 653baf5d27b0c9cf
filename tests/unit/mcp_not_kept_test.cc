// get_causal_chains over a trace whose GPU threads went off-CPU more often than the engine keeps
// intervals of (engine/host_context.h, kMaxOffCpuIntervals): the agent is told, in the text and
// the result, which were kept and how many were not, as explain tells a person.
#include <gtest/gtest.h>

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "engine/chain.h"
#include "engine/host_context.h"
#include "serve/mcp/server.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::serve::mcp {
namespace {

using namespace store::tiers_fixture;

Json call_tool(Server& server, Session& session, const std::string& name, int id) {
  auto send = [&](const Json& msg) {
    return server.handle(msg.dump(), session, [](const Json&) {});
  };
  if (id == 1) {
    auto init = send({{"jsonrpc", "2.0"},
                      {"id", 1000},
                      {"method", "initialize"},
                      {"params",
                       {{"protocolVersion", kLatestVersion},
                        {"capabilities", Json::object()},
                        {"clientInfo", {{"name", "gtest"}, {"version", "1"}}}}}});
    EXPECT_TRUE(init.has_value());
    send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }
  auto r = send({{"jsonrpc", "2.0"},
                 {"id", id},
                 {"method", "tools/call"},
                 {"params", {{"name", name}, {"arguments", Json::object()}}}});
  EXPECT_TRUE(r && r->contains("result"));
  return r ? (*r)["result"] : Json();
}

TEST(McpNotKept, CausalChainsSayWhichOffCpuIntervalsWereNotKept) {
  constexpr uint64_t kExtra = 2'500;
  std::vector<Event> events;
  events.reserve(engine::kMaxOffCpuIntervals + kExtra + 2);
  uint64_t t = 1000;
  events.push_back(launch(t, 5 * kUs));
  for (uint64_t i = 0; i < engine::kMaxOffCpuIntervals + kExtra; ++i) {
    events.push_back(switch_out(t + 10 * kUs, 2 * kUs, i % 2 == 0));
    t += 20 * kUs;
  }
  events.push_back(launch(t, 5 * kUs));
  std::string path = write_trace("mcp-not-kept.db", events);

  static hal::BackendRegistry registry = [] {
    hal::BackendRegistry r;
    app::register_builtin_backends(r);
    return r;
  }();
  ToolContext ctx(path, app::mcp_tool_host(registry));
  ASSERT_TRUE(ctx.validate());
  Server server(ctx);
  Session session;
  Json r = call_tool(server, session, "get_causal_chains", 1);
  ASSERT_EQ(r["isError"], false) << r.dump();
  // The first million were kept, until the first that was not.
  int64_t last_kept = kOffset + int64_t(1000 + 10 * kUs + 20 * kUs * engine::kMaxOffCpuIntervals);
  EXPECT_EQ(r["structuredContent"]["offcpu_intervals_not_kept"],
            Json({{"count", kExtra}, {"kept_until_ns", last_kept}}));
  std::string text = r["content"][0]["text"];
  std::string want = "\noff-CPU intervals of GPU threads kept until " +
                     engine::format_wall(last_kept) +
                     " only (the first 1,000,000): 2,500 later ones are counted among the host "
                     "events but not attributed to steps, tails or contention (explain --from "
                     "covers them)\n";
  EXPECT_NE(text.find(want), std::string::npos) << text;
}

}  // namespace
}  // namespace ingero::serve::mcp

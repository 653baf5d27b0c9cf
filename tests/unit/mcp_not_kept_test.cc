// get_causal_chains over a trace whose GPU threads went off-CPU more often than the engine keeps
// intervals of (engine/host_context.h, kMaxOffCpuIntervals): the agent is told, in the text and
// the result, which were kept and how many were not, as explain tells a person.
#include <gtest/gtest.h>

#include <map>

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "engine/chain.h"
#include "engine/host_context.h"
#include "serve/mcp/server.h"
#include "tests/support/builtin_tool_host.h"
#include "tests/support/mcp_calls.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::serve::mcp {
namespace {

using namespace store::tiers_fixture;

// One launch, `switches` off-CPU intervals of its thread 20 us apart, one launch.
std::vector<Event> switching(uint64_t switches) {
  std::vector<Event> events;
  events.reserve(switches + 2);
  uint64_t t = 1000;
  events.push_back(launch(t, 5 * kUs));
  for (uint64_t i = 0; i < switches; ++i) {
    events.push_back(switch_out(t + 10 * kUs, 2 * kUs, i % 2 == 0));
    t += 20 * kUs;
  }
  events.push_back(launch(t, 5 * kUs));
  return events;
}

// explain's line for `count` intervals not kept, the last kept at `last_kept`.
std::string not_kept_line(int64_t last_kept, const std::string& count) {
  return "off-CPU intervals of GPU threads kept until " + engine::format_wall(last_kept) +
         " only (the first 1,000,000): " + count +
         " later ones are counted among the host events but not attributed to steps, tails or "
         "contention (explain --from covers them)\n";
}

TEST(McpNotKept, CausalChainsSayWhichOffCpuIntervalsWereNotKept) {
  constexpr uint64_t kExtra = 2'500;
  std::vector<Event> events = switching(engine::kMaxOffCpuIntervals + kExtra);
  std::string path = write_trace("mcp-not-kept.db", events);

  ToolContext ctx(path, test::builtin_tool_host());
  ASSERT_TRUE(ctx.validate());
  Server server(ctx);
  Session session;
  Json r = test::call_tool(server, session, "get_causal_chains", Json::object(), 1);
  ASSERT_EQ(r["isError"], false) << r.dump();
  // The first million were kept, until the first that was not.
  int64_t last_kept = kOffset + int64_t(1000 + 10 * kUs + 20 * kUs * engine::kMaxOffCpuIntervals);
  EXPECT_EQ(r["structuredContent"]["offcpu_intervals_not_kept"],
            Json({{"count", kExtra}, {"kept_until_ns", last_kept}}));
  std::string text = r["content"][0]["text"];
  std::string want = "\n" + not_kept_line(last_kept, "2,500");
  EXPECT_NE(text.find(want), std::string::npos) << text;
}

// A fleet database read node by node, in memory: each node's events, its times as they are.
class MemoryFleet final : public FleetSource, engine::TraceSource {
 public:
  explicit MemoryFleet(std::map<std::string, std::vector<Event>> events)
      : events_(std::move(events)) {}
  engine::TraceSource& source() override { return *this; }
  std::vector<std::string> nodes() override {
    std::vector<std::string> v;
    for (const auto& [n, e] : events_) v.push_back(n);
    return v;
  }
  void set_scope(const std::optional<std::string>& node) override { scope_ = node; }
  void set_clock_offsets(const std::map<std::string, int64_t>&) override {}
  std::string error() const override { return ""; }
  std::string title() const override { return "memory"; }
  ingero::Result<store::QueryResult> query(const std::string&, const store::QueryLimits&) override {
    return ingero::make_error("no SQL here");
  }
  void calls(const engine::Window& w, const engine::EventFn& fn) override { each(w, false, fn); }
  void host_events(const engine::Window& w, const engine::EventFn& fn) override {
    each(w, true, fn);
  }
  std::vector<engine::SnapshotRow> snapshots(const engine::Window&) override { return {}; }
  std::map<uint32_t, engine::ProcessActivity> process_activity(const engine::Window&) override {
    return {};
  }
  std::map<uint32_t, engine::ProcessInfo> processes() override { return {}; }
  std::pair<int64_t, int64_t> time_span() override {
    int64_t lo = INT64_MAX, hi = 0;
    for (const auto& [n, v] : events_)
      for (const Event& e : v) {
        lo = std::min(lo, int64_t(e.ts_ns));
        hi = std::max(hi, int64_t(e.ts_ns + e.dur_ns));
      }
    return {lo, hi};
  }
  uint64_t event_count(const engine::Window& w) override {
    uint64_t n = 0;
    each(w, false, [&](const Event&) { ++n; });
    each(w, true, [&](const Event&) { ++n; });
    return n;
  }

 private:
  void each(const engine::Window& w, bool host, const engine::EventFn& fn) {
    for (const auto& [node, v] : events_) {
      if ((w.node && *w.node != node) || (scope_ && *scope_ != node)) continue;
      for (const Event& e : v)
        if (hal::is_host_kind(e.kind) == host && w.contains(int64_t(e.ts_ns)) &&
            (!w.pid || *w.pid == e.pid))
          fn(e);
    }
  }
  std::map<std::string, std::vector<Event>> events_;
  std::optional<std::string> scope_;
};

// Over a fleet, the line names its node and the result is an object by node: only the node
// whose intervals were not all kept is in it.
TEST(McpNotKept, OverAFleetTheNodeIsNamed) {
  constexpr uint64_t kExtra = 1'200;
  std::map<std::string, std::vector<Event>> events = {
      {"gpu-a", switching(engine::kMaxOffCpuIntervals + kExtra)}, {"gpu-b", switching(40)}};
  auto host = test::builtin_tool_host();
  host.fleet = [&events]() -> ingero::Result<std::unique_ptr<FleetSource>> {
    return std::unique_ptr<FleetSource>(std::make_unique<MemoryFleet>(events));
  };
  ToolContext ctx("", host);
  Server server(ctx);
  Session session;
  Json r = test::call_tool(server, session, "get_causal_chains", Json::object(), 1);
  ASSERT_EQ(r["isError"], false) << r.dump();
  int64_t last_kept = int64_t(1000 + 10 * kUs + 20 * kUs * engine::kMaxOffCpuIntervals);
  EXPECT_EQ(r["structuredContent"]["offcpu_intervals_not_kept"],
            Json({{"gpu-a", {{"count", kExtra}, {"kept_until_ns", last_kept}}}}));
  std::string text = r["content"][0]["text"];
  std::string want = "\nnode gpu-a: " + not_kept_line(last_kept, "1,200");
  EXPECT_NE(text.find(want), std::string::npos) << text;
  EXPECT_EQ(text.find("node gpu-b:"), std::string::npos) << text;
}

}  // namespace
}  // namespace ingero::serve::mcp

// An MCP tool call on a trace being written: its reads (the calls' statistics, the host events,
// the event count) see one state of the file, however many they are and whatever the writer
// commits meanwhile, so its figures add up; the next call sees the commit.
#include <gtest/gtest.h>

#include "serve/mcp/server.h"
#include "store/trace_writer.h"
#include "tests/support/live_commit.h"
#include "tests/support/mcp_calls.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// The calls, host events and event count get_trace_stats gives.
struct Figures {
  int64_t calls = 0, host = 0, events = 0;
};
Figures figures(const Json& result) {
  const Json& s = result["structuredContent"];
  Figures f;
  for (const auto& o : s["ops"]) f.calls += o["calls"].get<int64_t>();
  for (const auto& h : s["host"]) f.host += h["count"].get<int64_t>();
  f.events = s["events"].get<int64_t>();
  return f;
}

TEST(McpLive, AToolCallsFiguresAddUpWhileTheTraceIsWritten) {
  std::string path = temp_path("live_mcp.db");
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  si.node = "node-m";
  si.started_at_ns = 1'775'000'000'000'000'000;
  si.mono_offset_ns = si.started_at_ns;
  ASSERT_TRUE((*w)->begin_session(si));
  add_interleaved_events(**w, 0, 30);
  ASSERT_TRUE((*w)->commit_all());
  serve::mcp::ToolContext ctx(path, {});
  serve::mcp::Server server(ctx);
  serve::mcp::Session session;
  auto reader = ctx.engine_reader();
  ASSERT_TRUE(reader) << reader.error().message;
  Figures first;
  {
    // The second commit lands as the host events' blocks are loaded: after the calls were read,
    // before the event count.
    CommitAt at((*reader)->db().handle(), "SELECT data FROM main.host_store WHERE id", [&] {
      add_interleaved_events(**w, 30, 60);
      ASSERT_TRUE((*w)->commit_all());
    });
    first = figures(call_tool(server, session, "get_trace_stats", Json::object(), 1));
    EXPECT_EQ(at.starts(), 1);
  }
  EXPECT_EQ(first.calls, 20);
  EXPECT_EQ(first.host, 10);
  EXPECT_EQ(first.events, 30);
  Figures next = figures(call_tool(server, session, "get_trace_stats", Json::object(), 2));
  EXPECT_EQ(next.calls, 40);
  EXPECT_EQ(next.host, 20);
  EXPECT_EQ(next.events, 60);
  ASSERT_TRUE((*w)->finish({}));
}

}  // namespace
}  // namespace ingero::test

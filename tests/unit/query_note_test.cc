// A query over a trace with tiered retention says what its answer leaves out: the launches
// folded into call_runs have no row in events or the views of calls (store/query_note.h), in
// `ingero query`'s note and MCP run_sql's.
#include "store/query_note.h"

#include <gtest/gtest.h>

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "engine/chain.h"
#include "serve/mcp/server.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

TEST(QueryNote, NamesAreWholeIdentifiersInAnyCase) {
  EXPECT_TRUE(names_identifier("SELECT * FROM Calls", "calls"));
  EXPECT_TRUE(names_identifier("select count(*) from \"calls\" where pid=1", "calls"));
  EXPECT_TRUE(names_identifier("SELECT 1 FROM main.events", "events"));
  EXPECT_FALSE(names_identifier("SELECT * FROM call_runs", "calls"));
  EXPECT_FALSE(names_identifier("SELECT * FROM host_events", "events"));
  EXPECT_FALSE(names_identifier("SELECT * FROM call_summaries", "calls"));
  EXPECT_FALSE(names_identifier("", "calls"));
}

struct FoldedFile {
  std::string full, folded;
  int64_t written = 0;  // launches written
};

// Launches every 30 µs for a second, on two threads, with durations spread so that most fold.
FoldedFile folded_file() {
  std::vector<Event> calls;
  for (uint64_t t = 1000; t < 1000000000; t += 30 * kUs) {
    calls.push_back(launch(t, 2 * kUs + (t / kUs) % 7 * kUs));
    calls.push_back(launch(t + 11 * kUs, 2 * kUs + (t / kUs) % 5 * kUs, 11));
  }
  FoldedFile f;
  f.written = int64_t(calls.size());
  f.full = write_trace("query-note-full.db", calls);
  f.folded = copy_of(f.full, "query-note.db");
  FoldCount c = fold_everything(f.folded);
  EXPECT_GT(c.runs, 100u);
  return f;
}

int64_t one_int(TraceReader& r, const std::string& sql) {
  auto q = run_query(r, sql);
  EXPECT_TRUE(q) << (q ? "" : q.error().message);
  return q && !q->rows.empty() ? std::get<int64_t>(q->rows[0][0]) : -1;
}

TEST(QueryNote, AQueryOfCallRowsOnAFoldedFileSaysHowManyLaunchesHaveNoRow) {
  FoldedFile f = folded_file();
  auto reader = TraceReader::open(f.folded, app::builtin_views());
  ASSERT_TRUE(reader);
  // The blocks folded for good (store/call_store.h): their folded calls have no row.
  int64_t folded = one_int(**reader, "SELECT sum(folded) FROM call_store WHERE full IS NULL");
  int64_t runs = one_int(**reader, "SELECT sum(runs) FROM call_store WHERE full IS NULL");
  int64_t before = one_int(**reader, "SELECT max(end_ts) FROM call_store WHERE full IS NULL");
  int64_t rows = one_int(**reader, "SELECT count(*) FROM calls");
  ASSERT_GT(folded, 0);
  // What the note warns about: the rows miss exactly the folded launches.
  EXPECT_EQ(rows + folded, f.written);
  EXPECT_EQ(one_int(**reader, "SELECT sum(calls) FROM call_summaries"), f.written);
  std::string want = engine::format_count(uint64_t(folded)) + " launches before " +
                     engine::format_wall(before) + " were folded into " +
                     engine::format_count(uint64_t(runs)) +
                     " runs (call_runs) by tiered retention: they have no row in events or the "
                     "views of calls. call_summaries counts every call, per second.";
  for (const char* sql : {"SELECT count(*) FROM calls", "SELECT count(*) FROM Events",
                          "SELECT count(*) FROM cuda_events"}) {
    auto q = run_query(**reader, sql);
    ASSERT_TRUE(q) << sql;
    EXPECT_EQ(q->note, want) << sql;
  }
  // A statement stopped at its time limit says it too: it was probably counting calls.
  QueryLimits none;
  none.timeout_ms = 0;
  auto late = run_query(**reader, "SELECT count(*) FROM calls", none);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().message, "SQL aborted: time limit of 0 ms exceeded. Note: " + want);
  // Tables of what was folded, and host events, lose nothing.
  for (const char* sql : {"SELECT count(*) FROM call_runs", "SELECT count(*) FROM host_events",
                          "SELECT sum(calls) FROM call_summaries"}) {
    auto q = run_query(**reader, sql);
    ASSERT_TRUE(q) << sql;
    EXPECT_EQ(q->note, "") << sql;
  }
  // The file before folding: nothing left out.
  auto full = TraceReader::open(f.full, app::builtin_views());
  ASSERT_TRUE(full);
  auto q = run_query(**full, "SELECT count(*) FROM calls");
  ASSERT_TRUE(q);
  EXPECT_EQ(std::get<int64_t>(q->rows[0][0]), f.written);
  EXPECT_EQ(q->note, "");

  // MCP run_sql gives the same note, structured and in its text.
  hal::BackendRegistry registry;
  app::register_builtin_backends(registry);
  serve::mcp::ToolContext ctx(f.folded, app::mcp_tool_host(registry));
  ASSERT_TRUE(ctx.validate());
  serve::mcp::Server server(ctx);
  serve::mcp::Session s;
  auto init = server.handle(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}})",
      s, nullptr);
  ASSERT_TRUE(init);
  (void)server.handle(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", s, nullptr);
  auto r = server.handle(
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_sql","arguments":{"sql":"SELECT count(*) AS n FROM calls"}}})",
      s, nullptr);
  ASSERT_TRUE(r);
  const auto& result = (*r)["result"];
  EXPECT_EQ(result["structuredContent"]["rows"][0][0], rows);
  EXPECT_EQ(result["structuredContent"]["note"], want);
  EXPECT_NE(result["content"][0]["text"].get<std::string>().find("Note: " + want),
            std::string::npos);
}

}  // namespace
}  // namespace ingero::store

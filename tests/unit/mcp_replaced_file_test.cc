// The MCP server over a trace file that is replaced (a new trace renamed over it) or removed
// while it serves: each worker thread kept the reader it had opened, so that 20 identical
// queries answered 9 times from the old file and 11 times from the new one, and a removed
// file went on answering with isError false.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "serve/mcp/server.h"
#include "tests/support/builtin_tool_host.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/mcp_calls.h"
#include "tests/support/trace_db.h"

namespace ingero::serve::mcp {
namespace {

Json run_sql(Server& server, Session& session, const std::string& sql, int id) {
  return test::call_tool(server, session, "run_sql", {{"sql", sql}}, id);
}

TEST(McpReplacedFile, AnswersComeFromTheFileThePathNamesNow) {
  std::string path = test::write_free_calls(test::temp_path("served.db"), 100);
  std::string next = test::write_free_calls(test::temp_path("next.db"), 10);
  ToolContext ctx(path, test::builtin_tool_host());
  ASSERT_TRUE(ctx.validate());
  Server server(ctx);
  Session session;
  const std::string sql = "SELECT count(*) AS n FROM calls";
  Json r = run_sql(server, session, sql, 1);
  ASSERT_EQ(r["isError"], false) << r.dump();
  EXPECT_EQ(r["structuredContent"]["rows"], Json::parse("[[100]]"));
  std::filesystem::rename(next, path);
  r = run_sql(server, session, sql, 2);
  ASSERT_EQ(r["isError"], false) << r.dump();
  EXPECT_EQ(r["structuredContent"]["rows"], Json::parse("[[10]]"));
  std::filesystem::remove(path);
  r = run_sql(server, session, sql, 3);
  EXPECT_EQ(r["isError"], true) << r.dump();
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find(path + ": the trace file is gone"),
            std::string::npos)
      << r.dump();
}

// Found by a hostile-testing helper (helper-69): a cached tool's answer was kept for the file
// the path named before when another of the same size and modification time was renamed over
// it (`cp -p`, `rsync -a` keep times; sizes are whole pages), while run_sql read the new one.
// The file's stamp says which file it is.
TEST(McpReplacedFile, AnotherFileOfTheSameSizeAndTimeIsComputedAnew) {
  std::string path = test::write_free_calls(test::temp_path("same-served.db"), 100);
  std::string next = test::temp_path("same-next.db");
  std::filesystem::copy_file(path, next, std::filesystem::copy_options::overwrite_existing);
  test::alter_trace(next, "UPDATE sessions SET node = 'gpu-node-02'");
  struct stat was {};
  ASSERT_EQ(::stat(path.c_str(), &was), 0);
  const timespec times[2] = {was.st_atim, was.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, next.c_str(), times, 0), 0);
  ASSERT_EQ(std::filesystem::file_size(next), std::filesystem::file_size(path));
  ToolContext ctx(path, test::builtin_tool_host());
  ASSERT_TRUE(ctx.validate());
  Server server(ctx);
  Session session;
  Json r = test::call_tool(server, session, "get_trace_stats", Json::object(), 1);
  ASSERT_EQ(r["isError"], false) << r.dump();
  EXPECT_EQ(ctx.cache_computations(), 1u);
  test::call_tool(server, session, "get_trace_stats", Json::object(), 2);
  EXPECT_EQ(ctx.cache_computations(), 1u);  // the same file: the cached answer
  std::filesystem::rename(next, path);
  r = test::call_tool(server, session, "get_trace_stats", Json::object(), 3);
  ASSERT_EQ(r["isError"], false) << r.dump();
  EXPECT_EQ(ctx.cache_computations(), 2u);
}

}  // namespace
}  // namespace ingero::serve::mcp

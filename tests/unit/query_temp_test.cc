// Issue 37, item 10: `query` spilled ~170 MB/s of SQLite temporary files (5 GB in one 30 s
// statement) beside the tracer's disk. --max-temp bounds them: a statement that needs more
// stops and says so; one within the bound answers as before.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// A sort of every row that no index serves, with each row's whole width: SQLite's sorter
// keeps ~2 MB in memory and writes the rest to temporary files.
const char* kSort = "SELECT *, random() AS r FROM events ORDER BY r";

TEST(QueryTempFiles, AStatementPastTheBoundStopsNamingIt) {
  std::string db = write_free_calls(temp_path("t.db"), 200'000);
  std::string out, err;
  int rc = run_command({INGERO_BIN, "query", db, kSort, "--limit", "3", "--max-temp", "512KiB"},
                       &out, &err);
  EXPECT_EQ(rc, 1) << err;
  EXPECT_EQ(err,
            "ingero query: the statement needs more than 512KiB of temporary files (its sorts, "
            "GROUP BY or DISTINCT over many rows); --max-temp raises the limit, a WHERE or "
            "LIMIT narrows the statement\n");
  EXPECT_EQ(out, "");
  // Within the bound (and the default's): the same statement answers.
  for (std::vector<std::string> bound :
       {std::vector<std::string>{"--max-temp", "256MiB"}, std::vector<std::string>{}}) {
    std::vector<std::string> argv = {INGERO_BIN, "query", db, kSort, "--limit", "3", "--json"};
    argv.insert(argv.end(), bound.begin(), bound.end());
    out.clear();
    err.clear();
    ASSERT_EQ(run_command(argv, &out, &err), 0) << err;
    EXPECT_EQ(nlohmann::json::parse(out).size(), 3u);
  }
  // A malformed bound is a usage error.
  EXPECT_EQ(run_command({INGERO_BIN, "query", db, "SELECT 1", "--max-temp", "lots"}, &out, &err),
            2);
}

// MCP's run_sql had no bound at all (four such statements at once held 589 MB of temporary
// files): `mcp --max-temp` bounds what every request holds at once (1GiB by default).
TEST(QueryTempFiles, McpRunSqlPastTheServersBoundFailsSayingSo) {
  std::string db = write_free_calls(temp_path("mcp-temp.db"), 200'000);
  for (const char* bound : {"512KiB", "1GiB"}) {
    SCOPED_TRACE(bound);
    auto p = Subprocess::spawn({INGERO_BIN, "mcp", "--db", db, "--max-temp", bound});
    p.write_stdin(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":)"
                  R"("2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
                  "\n"
                  R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
                  "\n");
    ASSERT_TRUE(p.wait_stdout_line("\"id\":0", std::chrono::seconds(10))) << p.err();
    nlohmann::json call = {
        {"jsonrpc", "2.0"},
        {"id", 1},
        {"method", "tools/call"},
        {"params", {{"name", "run_sql"}, {"arguments", {{"sql", kSort}, {"limit", 3}}}}}};
    p.write_stdin(call.dump() + "\n");
    ASSERT_TRUE(p.wait_stdout_line("\"id\":1,", std::chrono::seconds(30))) << p.err();
    p.close_stdin();
    EXPECT_EQ(p.wait(std::chrono::seconds(10)), 0) << p.err();
    nlohmann::json answer;
    std::istringstream lines(p.out());
    for (std::string line; std::getline(lines, line);)
      if (line.find("\"id\":1,") != std::string::npos) answer = nlohmann::json::parse(line);
    const bool cut = std::string(bound) == "512KiB";
    EXPECT_EQ(answer["result"]["isError"], cut) << answer.dump();
    const std::string text = answer["result"]["content"][0]["text"];
    EXPECT_EQ(text.find("than the server lets every request hold at once (ingero mcp "
                        "--max-temp)") != std::string::npos,
              cut)
        << text;
  }
}

}  // namespace
}  // namespace ingero::test

// `ingero query --help` is where a user learns what to query: every view and table it names is
// in a trace the binary writes, and every SQL function it names answers there.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

nlohmann::json query(const std::string& db, const std::string& sql) {
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "query", "--db", db, "--json", sql}, &out, &err), 0)
      << sql << ": " << err;
  return out.empty() ? nlohmann::json::array() : nlohmann::json::parse(out);
}

// `ingero query run.db` (the statement forgotten) read the file's name as the statement, against
// the default trace: "~/.ingero/ingero.db: No such file or directory", exit 1. It is a usage
// error saying what is missing.
TEST(QueryHelp, AFileGivenAsTheStatementIsAUsageError) {
  std::string db = write_free_calls(temp_path("forgot.db"), 10);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "query", db}, &out, &err), 2);
  EXPECT_EQ(err, "ingero query: " + db +
                     " is a file, not a statement: give the SQL after it "
                     "(ingero query " +
                     db + " \"SELECT ...\")\n");
  EXPECT_EQ(out, "");
}

// `ingero query "SELECT 1" run.db` (the two the wrong way round) opened the statement as the
// trace: "SELECT 1: No such file or directory", exit 1 (helper-77). A usage error saying the order.
TEST(QueryHelp, AStatementBeforeTheTraceIsAUsageError) {
  std::string db = write_free_calls(temp_path("swapped.db"), 10);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "query", "SELECT 1", db}, &out, &err), 2);
  EXPECT_EQ(err, "ingero query: " + db +
                     " is a file and the statement comes first: give the trace first (ingero "
                     "query " +
                     db + " \"SQL\")\n");
  EXPECT_EQ(out, "");
}

TEST(QueryHelp, EveryViewTableAndFunctionItNamesIsInATrace) {
  std::string db = temp_path("query-help.db");
  ASSERT_EQ(run_command({INGERO_BIN, "demo", "device-fault", "--db", db}), 0);
  {  // the device tables come with the first device row: a session that sampled a GPU
    auto w = store::TraceWriter::open(db);
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE((*w)->begin_session({}));
    hal::DeviceSample d;
    d.source = "nvml";
    d.sm_util = 9;
    ASSERT_TRUE((*w)->add_device_samples({d}));
    ASSERT_TRUE((*w)->add_device_events({{1, "nvml", 0, "", "xid", 79, ""}}));
    ASSERT_TRUE((*w)->commit());
  }
  std::string help, err;
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--help"}, &help, &err), 0) << err;
  size_t from = help.find("Views:"), to = help.find("(docs/schema.md)");
  ASSERT_NE(from, std::string::npos) << help;
  ASSERT_NE(to, std::string::npos) << help;
  std::set<std::string> names;
  std::string word;
  int depth = 0;  // words in parentheses are prose
  for (char c : help.substr(from, to - from) + " ") {
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (depth == 0 && (std::islower(static_cast<unsigned char>(c)) || c == '_')) {
      word += c;
    } else {
      if (!word.empty() && word != "tables" && c != ':') names.insert(word);
      word.clear();
    }
  }
  for (const char* must : {"calls", "call_runs", "events", "host_events", "device_samples",
                           "device_events", "kernel_names", "causal_chains"})
    EXPECT_TRUE(names.count(must)) << must << " is not named: " << help;
  for (const std::string& n : names)
    EXPECT_EQ(query(db, "SELECT count(*) AS n FROM " + n).size(), 1u) << n;

  for (const char* f :
       {"error_name(api, ret)", "error_class(api, ret)", "sketch_quantile(sketch, q)",
        "sketch_count(sketch)", "sketch_merge(sketch)"})
    EXPECT_NE(help.find(f), std::string::npos) << f << " is not named: " << help;
  auto e = query(db,
                 "SELECT error_name('cuda_runtime', 2) AS name, error_class('cuda_runtime', 2) AS "
                 "class");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["name"], "cudaErrorMemoryAllocation");
  EXPECT_EQ(e[0]["class"], "out_of_memory");
  auto s = query(db,
                 "SELECT sketch_count(sketch_merge(sketch)) AS merged, sum(sketch_count(sketch)) "
                 "AS summed, sketch_quantile(sketch_merge(sketch), 0.5) > 0 AS median FROM "
                 "call_seconds");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_GT(s[0]["merged"].get<int64_t>(), 0);
  EXPECT_EQ(s[0]["merged"], s[0]["summed"]);
  EXPECT_EQ(s[0]["median"], 1);
}

}  // namespace
}  // namespace ingero::test

// The chains a session stores in causal_chains (store/trace_writer_rows.cc): one row each, in
// every session of a file, whatever ids earlier sessions stored.
#include <gtest/gtest.h>

#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

void session_with_chains(const std::string& path, const std::vector<std::string>& ids,
                         const std::string& summary, int64_t started_at_ns = 0) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  si.node = "n1";
  si.started_at_ns = started_at_ns;
  ASSERT_TRUE((*w)->begin_session(si));
  std::vector<store::ChainRow> rows;
  for (const auto& id : ids) {
    store::ChainRow c;
    c.id = id;
    c.severity = "HIGH";
    c.summary = summary;
    c.root_cause = c.explanation = "because";
    rows.push_back(c);
  }
  ASSERT_TRUE((*w)->replace_chains(rows));
  ASSERT_TRUE((*w)->replace_chains(rows));  // the session's chains written again: replaced
  ASSERT_TRUE((*w)->finish({}));
}

// The default trace gathers every session. A later session of the same process and op gave the
// same id, and its row replaced the earlier session's: that session's chain was gone.
TEST(ChainRows, EverySessionKeepsItsChainsUnderOneId) {
  std::string db = temp_path("chains.db");
  session_with_chains(db, {"n1:cpu_contention:7:cudaStreamSynchronize", "n1:oom_kill:7:1"},
                      "first");
  session_with_chains(db, {"n1:cpu_contention:7:cudaStreamSynchronize"}, "second");
  session_with_chains(db, {"n1:cpu_contention:7:cudaStreamSynchronize"}, "third");
  EXPECT_EQ(query_rows(db, "SELECT id, session_id, summary FROM causal_chains ORDER BY rowid"),
            (std::vector<std::vector<std::string>>{
                {"n1:cpu_contention:7:cudaStreamSynchronize", "1", "first"},
                {"n1:oom_kill:7:1", "1", "first"},
                {"n1:cpu_contention:7:cudaStreamSynchronize@2", "2", "second"},
                {"n1:cpu_contention:7:cudaStreamSynchronize@3", "3", "third"}}));
}

// Two files of one node merged: the second file's chain under the same id was dropped (INSERT
// OR IGNORE); it is kept as ID@SESSION too.
TEST(ChainRows, AMergeKeepsEveryFilesChains) {
  std::string a = temp_path("day1.db"), b = temp_path("day2.db"), m = temp_path("both.db");
  session_with_chains(a, {"n1:oom_kill:7:1"}, "day one", 1'700'000'000'000'000'000);
  session_with_chains(b, {"n1:oom_kill:7:1"}, "day two", 1'700'086'400'000'000'000);
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "merge", a, b, "-o", m}, &out, &err), 0) << err;
  EXPECT_EQ(query_rows(m, "SELECT id, summary FROM causal_chains ORDER BY session_id"),
            (std::vector<std::vector<std::string>>{{"n1:oom_kill:7:1", "day one"},
                                                   {"n1:oom_kill:7:1@2", "day two"}}));
}

}  // namespace
}  // namespace ingero::test

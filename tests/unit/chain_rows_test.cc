// The chains a session stores in causal_chains (store/trace_writer_rows.cc): one row each, in
// every session of a file, whatever ids earlier sessions stored.
#include <gtest/gtest.h>

#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

void session_with_chains(const std::string& path, const std::vector<std::string>& ids,
                         const std::string& summary) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  si.node = "n1";
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

}  // namespace
}  // namespace ingero::test

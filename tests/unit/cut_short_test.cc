// A trace whose tracer was killed (SIGKILL, an OOM kill, a host that went down) ends at its
// last commit, its loss counters as last saved: explain read it as a whole trace, losses 0,
// and never said the tracer had died (`status` did). It says so now, in text and JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const char* const kNote =
    "its session's tracer ended without stopping (killed, or its host went down): the trace "
    "ends at its last commit, and its loss counts are those last saved";

TEST(CutShort, ExplainSaysTheTracerEndedWithoutStopping) {
  const std::string db = temp_path("killed.db");
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "demo", "incident", "--db", db}, &out, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &out, &err), 0) << err;
  EXPECT_EQ(out.find("ended without stopping"), std::string::npos) << out;  // it stopped
  alter_trace(db, "UPDATE sessions SET stopped_at = 0, exit_reason = ''");
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &out, &err), 0) << err;
  EXPECT_NE(out.find("INGERO INCIDENT REPORT \u2014 " + db + "\n" + kNote + "\n"),
            std::string::npos)
      << out.substr(0, 600);
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  ASSERT_TRUE(nlohmann::json::accept(out)) << out.substr(0, 300);
  EXPECT_EQ(nlohmann::json::parse(out).value("note", ""), kNote);
}

}  // namespace
}  // namespace ingero::test

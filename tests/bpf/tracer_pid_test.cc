// The sessions row names the tracer's own pid (sessions.tracer_pid), so that explain can say
// "the tracer itself" where the tracer is among the preemptors (docs/engine.md).
#include <gtest/gtest.h>

#include <string>

#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// The traced command is ingero's child: its parent pid is the tracer's.
TEST(TracerPid, TheSessionRowNamesTheTracersOwnPid) {
  REQUIRE_BPF();
  std::string db = temp_path("tracer-pid.db");
  auto run = trace_command(db, {"/bin/sh", "-c", "echo $PPID"}, {"-q"});
  ASSERT_EQ(run.rc, 0) << run.err;
  ASSERT_FALSE(run.out.empty()) << run.err;
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM sessions"), 1);
  EXPECT_EQ(query_int(db, "SELECT tracer_pid FROM sessions"), std::stoll(run.out)) << run.out;
}

}  // namespace
}  // namespace ingero::test

// The notifications that make the tracer re-scan a process for new libraries: an exec, and the
// dynamic loader's link-map hook, reported once a change is done (not also before it), through
// real uprobes on this host's glibc loader. Every assertion is an exact outcome.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

int64_t libwatch_records(const std::string& db) {
  auto stats = nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(stats["libwatch_drops"].get<int64_t>(), 0);
  return stats["libwatch_records"].get<int64_t>();
}

// The loader calls its hook with the link map about to change and again once it is consistent:
// only the second is reported. A dynamically linked program: its exec and its initial load.
TEST(LibraryWatch, ALinkMapChangeIsReportedOnceItIsDone) {
  REQUIRE_BPF();
  std::string db = temp_path("libwatch-true.db");
  auto run = trace_command(db, {"/bin/true"});
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(libwatch_records(db), 2);
  // A shell that execs it: two programs, each its exec and its initial load.
  std::string db2 = temp_path("libwatch-sh.db");
  auto run2 = trace_command(db2, {"/bin/sh", "-c", "exec /bin/true"});
  ASSERT_EQ(run2.rc, 0) << run2.err;
  EXPECT_EQ(libwatch_records(db2), 4);
}

}  // namespace
}  // namespace ingero::test

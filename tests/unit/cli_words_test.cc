// The first words a new user types: a command misspelled is named as unknown, with the list of
// commands (it read "A subcommand is required", as if none was given), and `--version` answers
// as `ingero version` does.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/run_ingero.h"

namespace ingero::test {
namespace {

TEST(CliWords, AMisspelledCommandIsNamedAsUnknown) {
  auto r = run_ingero({"chek"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "ingero: unknown command 'chek' (commands: check, trace, explain, status, query, "
            "report, dashboard, demo, merge, compact, export, mcp, ship, version; "
            "ingero --help)\n");
}

TEST(CliWords, VersionFlagsAnswerAsTheVersionCommand) {
  auto v = run_ingero({"version"});
  ASSERT_EQ(v.rc, 0);
  ASSERT_EQ(v.out.rfind("ingero ", 0), 0u) << v.out;
  for (const char* flag : {"--version", "-V"}) {
    auto r = run_ingero({flag});
    EXPECT_EQ(r.rc, 0) << flag << ": " << r.err;
    EXPECT_EQ(r.out, v.out) << flag;
  }
}

}  // namespace
}  // namespace ingero::test

// Flags of `ingero trace` given together that cannot both hold, or one that does nothing
// without another, are usage errors said before anything starts (app/trace_flags.h, conflict).
// Found by a hostile-testing helper: `--all --pid P -- COMMAND` traced neither every process nor
// the command, 0 calls, exit 0; the others were accepted without a word and did nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(TraceFlagConflicts, EachIsAUsageErrorSaidBeforeAnythingStarts) {
  const std::string db = temp_path("never.db");
  const std::string web = temp_path("web.yml");
  { std::ofstream(web) << "basic_auth_users: {}\n"; }
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--all", "--pid", "1", "--", "/bin/true"},
       "--all traces every process and --pid only those it names: give one of them"},
      {{"--otlp-spans", "--", "/bin/true"},
       "--otlp-spans sends spans to the --otlp endpoint: give --otlp URL"},
      {{"--keep-all", "--full-rows", "1s", "--", "/bin/true"},
       "--keep-all keeps every call's row for the whole trace, --full-rows for a time: give one "
       "of them"},
      {{"--no-stack", "--stack-samples", "5", "--", "/bin/true"},
       "--stack-samples sets how calls walk their stacks, and --no-stack walks none: give one of "
       "them"},
      {{"--no-stack", "--cpu-sample-hz", "99", "--", "/bin/true"},
       "--cpu-sample-hz samples stacks, and --no-stack captures none: give one of them "
       "(--cpu-sample-hz 0 turns sampling off)"},
      {{"--prometheus-web-config", web, "--", "/bin/true"},
       "--prometheus-web-config configures the --prometheus endpoint: give --prometheus ADDR"},
  };
  for (const auto& [flags, said] : cases) {
    SCOPED_TRACE(flags.front());
    std::vector<std::string> argv = {"trace", "--db", db};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto r = run_ingero(argv);
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "ingero trace: " + said + "\n");
    EXPECT_FALSE(std::filesystem::exists(db));
  }
}

}  // namespace
}  // namespace ingero::test

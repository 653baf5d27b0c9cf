// --pid names a process of the trace: a mistyped pid was answered with the whole trace's event
// count and "nothing in this window needs explaining", exit 0, a false all-clear. It is a usage
// error naming the processes the trace holds, as an unknown --node is.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_paths.h"
#include "tests/support/h100_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(ProcessSelection, APidTheTraceDoesNotNameIsAUsageErrorListingItsProcesses) {
  std::string db = h100_fixture("starve", "pid");
  const std::string named =
      "no process 999999 in this trace (processes: 11 kworker/0:1-events, 12 "
      "kworker/u64:0-ext4-rsv-conversion, 31 migration/3, 91 migration/15, 153 "
      "kworker/3:1-events, 155 kworker/15:1H-kblockd, 157 kworker/15:1-events, 416 ingero, 418 "
      "python3, 618 python3)\n";
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--pid", "999999"}, &out, &err), 2);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "ingero explain: " + named);
  EXPECT_EQ(
      run_command({INGERO_BIN, "export", "--db", db, "--pid", "999999", "-o", "-"}, &out, &err), 2);
  EXPECT_EQ(err, "ingero export: " + named);
  // pprof alike: it wrote an empty profile and exited 0.
  std::string pb = temp_path("pid.pb.gz");
  EXPECT_EQ(run_command({INGERO_BIN, "export", "--format", "pprof", "--db", db, "--pid", "999999",
                         "-o", pb},
                        &out, &err),
            2);
  EXPECT_EQ(err, "ingero export: " + named);
  EXPECT_FALSE(std::filesystem::exists(pb));
  // 0 is no process: it was taken as no --pid at all.
  for (const char* cmd : {"explain", "export", "status"}) {
    EXPECT_EQ(run_command({INGERO_BIN, cmd, "--db", db, "--pid", "0"}, &out, &err), 2) << cmd;
    EXPECT_EQ(err,
              "--pid: Value 0 not in range 1 to 4194304\n"
              "Run with --help or --help-all for more information.\n")
        << cmd;
  }
  // The training process itself is explained.
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--pid", "618"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("[HIGH] Data-loader starvation: the GPU is idle"), std::string::npos) << out;
}

}  // namespace
}  // namespace ingero::test

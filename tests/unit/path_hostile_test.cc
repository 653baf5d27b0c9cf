// Paths that cannot be looked up, given to commands that create a file: a link loop, a name past
// 255 bytes. Said with the cause, never an uncaught std::filesystem error (abort, exit 134).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_paths.h"
#include "tests/support/h100_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(HostilePaths, ALinkLoopOrAnOverlongNameIsSaidNotThrown) {
  std::string dir = temp_path("paths");
  std::filesystem::create_directories(dir);
  const std::string loop = dir + "/loop-a";
  std::filesystem::create_symlink(dir + "/loop-b", loop);
  std::filesystem::create_symlink(loop, dir + "/loop-b");
  const std::string longname = dir + "/" + std::string(256, 'b');
  std::string input = h100_fixture("starve", "paths");
  std::string out, err;
  // A link loop is a name that exists: refused as any existing name.
  EXPECT_EQ(run_command({INGERO_BIN, "demo", "--db", loop}, &out, &err), 2) << err;
  EXPECT_EQ(err, "ingero demo: " + loop + " exists; give a new path\n");
  EXPECT_EQ(run_command({INGERO_BIN, "merge", input, "-o", loop}, &out, &err), 2) << err;
  EXPECT_EQ(err, "ingero merge: " + loop + " exists; merge into a new file\n");
  // A name past 255 bytes cannot be looked up: exit 1 with the cause.
  EXPECT_EQ(run_command({INGERO_BIN, "demo", "--db", longname}, &out, &err), 1) << err;
  EXPECT_EQ(err, "ingero demo: " + longname + ": File name too long\n");
  EXPECT_EQ(run_command({INGERO_BIN, "merge", input, "-o", longname}, &out, &err), 1) << err;
  EXPECT_EQ(err, "ingero merge: " + longname + ": File name too long\n");
  // A name that is not there is free: both make their file.
  EXPECT_EQ(run_command({INGERO_BIN, "demo", "--db", dir + "/new-demo.db"}, &out, &err), 0) << err;
  EXPECT_EQ(run_command({INGERO_BIN, "merge", input, "-o", dir + "/new-merge.db"}, &out, &err), 0)
      << err;
}

}  // namespace
}  // namespace ingero::test

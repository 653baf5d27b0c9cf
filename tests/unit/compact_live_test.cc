// Issue 37, item 10: `compact` on a file a tracer was writing made the tracer lose 24,547
// calls to a full ring. `ingero trace` holds a lock on its file (store::TraceLock) for as long
// as it writes it; `compact` refuses a locked file, unchanged, and takes the lock itself.
// (tests/bpf checks the same against a running `ingero trace`.)
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "store/file_access.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(CompactLive, AFileBeingWrittenIsRefusedUnchanged) {
  std::string db = write_free_calls(temp_path("t.db"), 1000);
  std::string before = sha256_file(db);
  std::string out, err;
  {
    auto held = store::TraceLock::acquire(db);  // what a running tracer holds
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_EQ(run_command({INGERO_BIN, "compact", db}, &out, &err), 1);
    EXPECT_EQ(err, "ingero compact: " + db +
                       " is being written by another ingero process (a running `ingero trace`, "
                       "or `ingero compact`); compact it once that has stopped (while tracing, "
                       "--full-rows and the archive keep the file compact)\n");
    EXPECT_EQ(sha256_file(db), before);
    // A second holder is refused too (a tracer while another writes, or a compact runs).
    auto second = store::TraceLock::acquire(db);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error().message,
              db + " is being written by another ingero process (a running `ingero trace`, or "
                   "`ingero compact`)");
  }
  // Released: compact runs.
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db}, &out, &err), 0) << err;
}

// A trace file the tracer creates is locked before it has its name (TraceLock::create): a
// compact or a second tracer that finds the name is refused, however early it looks.
TEST(TraceLockCreate, ANewFileIsLockedFromItsFirstMomentAndNeverMadeTwice) {
  std::string db = temp_path("new.db");
  auto made = store::TraceLock::create(db);
  ASSERT_TRUE(made) << made.error().message;
  struct stat st {};
  ASSERT_EQ(stat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_nlink, 1u);
  auto second = store::TraceLock::acquire(db);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().sys_errno, EWOULDBLOCK);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db}, &out, &err), 1);
  EXPECT_NE(err.find(" is being written by another ingero process"), std::string::npos) << err;
  // A name that exists, or a link (even to nothing), is never created over.
  auto again = store::TraceLock::create(db);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().sys_errno, EEXIST);
  std::string target = temp_path("elsewhere.db"), link = temp_path("link.db");
  std::filesystem::create_symlink(target, link);
  auto through = store::TraceLock::create(link);
  ASSERT_FALSE(through);
  EXPECT_EQ(through.error().sys_errno, EEXIST);
  EXPECT_FALSE(std::filesystem::exists(target));
  made = store::TraceLock();  // released
  EXPECT_TRUE(store::TraceLock::acquire(db));
}

// --full-rows takes a duration with its unit, as every duration of `trace` does: a bare number
// (12 what?) is refused before the file is touched, where `--full-rows 1` folded all but the
// last second of a trace in place. A file that cannot be read is said without the hint that
// belongs to one being written.
TEST(CompactFlags, FullRowsWithoutAUnitIsRefusedAndTheFileKept) {
  std::string db = write_free_calls(temp_path("bare.db"), 1000);
  std::string before = sha256_file(db);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db, "--full-rows", "1"}, &out, &err), 2);
  EXPECT_EQ(err,
            "--full-rows: '1' has no unit: write a duration with its unit (10m, 1h)\n"
            "Run with --help or --help-all for more information.\n");
  EXPECT_EQ(sha256_file(db), before);
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db, "--full-rows", "1s"}, &out, &err), 0) << err;
  std::string missing = temp_path("no-such-trace.db");
  EXPECT_EQ(run_command({INGERO_BIN, "compact", missing}, &out, &err), 1);
  EXPECT_EQ(err, "ingero compact: cannot read " + missing + ": No such file or directory\n");
}

}  // namespace
}  // namespace ingero::test

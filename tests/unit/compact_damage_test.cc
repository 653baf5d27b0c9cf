// `compact` on a damaged trace: it cannot mend a block that does not decode, or an entry whose
// count is not its block's, and says so with exit 1, the file left byte for byte. Before, it
// printed "0 of N calls now keep only their folded form", exit 0, on a file every reader
// refuses; and an entry's damaged count changed explain's event count without a word.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/chain.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(CompactDamage, ABlockThatDoesNotDecodeIsRefusedAndTheFileKept) {
  std::string db = write_free_calls(temp_path("undecodable.db"), 1000);
  ASSERT_EQ(query_int(db, "SELECT count(*) FROM call_store WHERE full IS NOT NULL"), 16);
  alter_trace(db, "UPDATE call_store SET full = zeroblob(600) WHERE id = 5");
  std::string before = sha256_file(db);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db}, &out, &err), 1);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "ingero compact: " + db +
                     ": call block 5 (its calls): damaged archive block: not a compressed block; "
                     "compact cannot mend a damaged block, and left the file as it was\n");
  EXPECT_EQ(sha256_file(db), before);
  // The readers refuse it too: compact was not hiding damage they would have read past.
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &out, &err), 1);
  EXPECT_EQ(err, "ingero explain: " + db +
                     ": call block 5: damaged archive block: not a compressed block\n");
  // The plain copy names the trace it read, not its temporary file (twice, as it did).
  std::string plain = temp_path("plain.db");
  EXPECT_EQ(run_command({INGERO_BIN, "export", "--format", "sqlite", "--db", db, "-o", plain}, &out,
                        &err),
            1);
  EXPECT_EQ(err, "ingero export: copying " + db + " into " + plain +
                     ": call block 5: damaged archive block: not a compressed block\n");
  EXPECT_FALSE(std::filesystem::exists(plain));
}

TEST(CompactDamage, AHostBlockCutShortIsRefused) {
  std::string db = write_free_calls(temp_path("host-cut.db"), 200);
  // A host block of the file's own kind, cut: the frame's length is not the blob's.
  alter_trace(db,
              "INSERT INTO host_store (node, session_id, first_id, last_id, first_ts, last_ts, "
              "end_ts, events, data) SELECT node, session_id, 900000, 900001, first_ts, last_ts, "
              "end_ts, 2, substr(full, 1, length(full) - 9) FROM call_store WHERE id = 1");
  int64_t id = query_int(db, "SELECT max(id) FROM host_store");
  std::string before = sha256_file(db);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db}, &out, &err), 1);
  EXPECT_EQ(err, "ingero compact: " + db + ": host block " + std::to_string(id) +
                     " (its events): damaged archive block: its length is not its frame's; "
                     "compact cannot mend a damaged block, and left the file as it was\n");
  EXPECT_EQ(sha256_file(db), before);
}

// The entries' counts are the trace's event count: one damaged changed explain's header by as
// much, exit 0. Now every reader of the whole trace and compact name the block.
TEST(CompactDamage, AnEntryCountingOtherThanItsBlockIsAnErrorForCompactAndExplain) {
  std::string db = write_free_calls(temp_path("miscounted.db"), 1000);
  ASSERT_EQ(query_int(db, "SELECT calls = kept + folded FROM call_store WHERE id = 3"), 1);
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &out, &err), 0) << err;
  EXPECT_NE(out.find("\n1,000 events over"), std::string::npos) << out;
  alter_trace(db, "UPDATE call_store SET calls = calls + 5 WHERE id = 3");
  std::string before = sha256_file(db);
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db}, &out, &err), 1);
  EXPECT_EQ(err, "ingero compact: " + db +
                     ": call block 3 (its calls): it holds 64 rows where its entry says 69; "
                     "compact cannot mend a damaged block, and left the file as it was\n");
  EXPECT_EQ(sha256_file(db), before);
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &out, &err), 1);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "ingero explain: " + db +
                     ": call block 3: its entry counts 69 calls where its folded form holds 64\n");
}

// A block whose entry was lost (its row deleted) hides its calls from every reader without an
// error of SQLite's: compact said "0 of 936 calls now keep only their folded form", exit 0. Now
// compact and explain alike find the file's summaries counting calls no read returns.
TEST(CompactDamage, ABlockWhoseEntryWasLostIsRefusedAndTheFileKept) {
  std::string db = write_free_calls(temp_path("lost-entry.db"), 1000);
  ASSERT_EQ(query_int(db, "SELECT calls FROM call_store WHERE id = 5"), 64);
  alter_trace(db, "DELETE FROM call_store WHERE id = 5");
  std::string before = sha256_file(db);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db}, &out, &err), 1);
  EXPECT_EQ(out, "");
  const std::string says =
      ": damaged: 64 calls counted by the file's per-second summaries were "
      "not read, the first in the second from ";
  EXPECT_EQ(err.rfind("ingero compact: " + db + says, 0), 0u) << err;
  const std::string tail =
      " (a block of calls whose entry in call_store was lost or holds a damaged time range, or "
      "a damaged index idx_call_store_ts, hides its calls from a window without an error); run: "
      "sqlite3 -readonly " +
      db +
      " 'PRAGMA quick_check' (REINDEX on a copy rebuilds the indexes); compact cannot mend a "
      "damaged block, and left the file as it was\n";
  ASSERT_GE(err.size(), tail.size());
  EXPECT_EQ(err.substr(err.size() - tail.size()), tail) << err;
  EXPECT_EQ(sha256_file(db), before);
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &out, &err), 1);
  EXPECT_EQ(err.rfind("ingero explain: " + db + says, 0), 0u) << err;
}

// Found by a hostile-testing helper: export --format sqlite copied such a file without a word,
// 64 calls short, exit 0 (every other reader refuses it). It refuses it too, writing nothing.
TEST(CompactDamage, ASqliteExportOfAFileWithALostBlockIsRefused) {
  std::string db = write_free_calls(temp_path("lost-export.db"), 1000);
  alter_trace(db, "DELETE FROM call_store WHERE id = 5");
  const std::string copy = temp_path("lost-export.sqlite");
  std::string out, err;
  EXPECT_EQ(
      run_command({INGERO_BIN, "export", "--format", "sqlite", "--db", db, "-o", copy}, &out, &err),
      1);
  EXPECT_NE(err.find(": damaged: 64 calls counted by the file's per-second summaries were not "
                     "read, the first in the second from "),
            std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(copy));
}

// On a full disk compact said SQLite's bare "database or disk is full": no file, no way out.
// It names the file and what it needs, and the file stays whole and readable.
TEST(CompactDamage, AFullDiskIsSaidWithTheFileAndWhatCompactNeeds) {
  std::string db = write_free_calls(temp_path("full.db"), 20000);
  std::string mnt = temp_path("tiny");
  std::filesystem::create_directories(mnt);
  std::string copy = mnt + "/full.db";
  // Filled but for 16 KiB once the trace is in it; the checks run before the mount goes.
  std::string out, err;
  int rc = run_on_full_tmpfs(mnt, "4m", "cp " + db + " " + copy, 16,
                             std::string(INGERO_BIN) + " compact " + copy + "; echo \"rc=$?\"; " +
                                 INGERO_BIN + " explain --db " + copy +
                                 " | grep -c '20,000 events over'",
                             &out, &err);
  if (rc == kNoTmpfs) {
    if (running_in_ci()) FAIL() << "CI=true but no private tmpfs mount: " << err;
    GTEST_SKIP() << "*** SKIPPED: cannot mount a tmpfs in a user namespace: " << err << " ***";
  }
  EXPECT_EQ(out, "rc=1\n1\n") << err;
  EXPECT_EQ(err, "ingero compact: " + copy +
                     ": preparing it for writing failed: database or disk is full: compact needs "
                     "free space about the file's size, "
                     "as it rewrites it; the steps it finished are kept and the file is whole: "
                     "run it again once there is room\n");
}

// A killed writer leaves its last commits in FILE-wal: the size said before compacting is the
// file's and its log's, as compact's own is after (the log was left out: "1.0 MB -> 1.1 MB" of a
// trace that held 2 MB more).
TEST(CompactSizes, TheSizeBeforeCountsTheWriteAheadLog) {
  std::string db = write_free_calls(temp_path("with-wal.db"), 1000);
  // A writer that commits ~2 MB into the log and dies before any checkpoint.
  std::string py =
      "import os, sqlite3\n"
      "c = sqlite3.connect('" +
      db +
      "', isolation_level=None)\n"
      "c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA wal_autocheckpoint=0')\n"
      "c.execute('CREATE TABLE scratch(b)')\n"
      "c.execute('INSERT INTO scratch VALUES (zeroblob(2000000))')\n"
      "os._exit(0)\n";
  ASSERT_EQ(run_command({"python3", "-c", py}), 0);
  const auto size = [](const std::string& f) { return int64_t(std::filesystem::file_size(f)); };
  int64_t before = size(db) + size(db + "-wal");
  ASSERT_GT(size(db + "-wal"), 2000000);
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "compact", db}, &out, &err), 0) << err;
  std::string said = db + ": " + engine::format_bytes(uint64_t(before)) + " -> ";
  EXPECT_NE(out.find(said), std::string::npos) << out << " (expected " << said << ")";
}

// compact takes its trace as every other command that reads one does, as well as positionally.
TEST(CompactFlags, TheTraceMayBeGivenAsDb) {
  std::string db = write_free_calls(temp_path("as-db.db"), 1000);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "compact", "--db", db, "--full-rows", "1h"}, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("0 of 1000 calls now keep only their folded form (0 blocks); " + db + ": "),
            std::string::npos)
      << out;
  EXPECT_EQ(err, "");
  // Neither, or both: said as a usage error (it said "--db is required" of the positional form).
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{INGERO_BIN, "compact"},
        std::vector<std::string>{INGERO_BIN, "compact", db, "--db", db}}) {
    EXPECT_EQ(run_command(args, &out, &err), 2);
    EXPECT_EQ(err,
              "ingero compact: give the trace to compact once: ingero compact TRACE (or --db "
              "TRACE)\n");
  }
}

}  // namespace
}  // namespace ingero::test

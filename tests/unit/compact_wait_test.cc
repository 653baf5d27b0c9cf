// `compact` beside another process reading the file. A trace at rest is in rollback-journal
// mode, where compact's writes need every reader to let go: it failed at once with SQLite's
// bare "database is locked" while a report or an MCP tool call read the file. It now waits
// (--wait, 60 s by default), says so once, and names the cause when the wait runs out.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <csignal>
#include <filesystem>

#include "app/builtin_backends.h"
#include "store/lock_wait.h"
#include "store/sqlite_db.h"
#include "store/trace_reader.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// A read transaction on `path` from this process: a shared lock on the file until it goes.
class Reader {
 public:
  explicit Reader(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN; SELECT count(*) FROM sessions;", nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  void done() {
    if (db_) sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
  }
  ~Reader() { done(); }

 private:
  sqlite3* db_ = nullptr;
};

TEST(CompactWait, AReaderIsWaitedForSaidOnceAndTheFileThenCompacted) {
  std::string db = write_free_calls(temp_path("waited.db"), 1000);
  Reader reader(db);
  auto c = Subprocess::spawn({INGERO_BIN, "compact", db, "--wait", "30s"});
  ASSERT_TRUE(c.wait_stderr_line("is open in another process", std::chrono::seconds(20)))
      << c.err();
  reader.done();
  ASSERT_EQ(c.wait(std::chrono::seconds(60)), 0) << c.err();
  EXPECT_EQ(c.err(), "ingero compact: " + db +
                         " is open in another process; waiting up to 30s for it to let go\n");
  EXPECT_EQ(c.out().rfind("ingero compact: 0 of 1000 calls now keep only their folded form", 0), 0u)
      << c.out();
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 1000);
}

TEST(CompactWait, AReaderThatStaysIsNamedAsTheCauseAndTheFileKept) {
  std::string db = write_free_calls(temp_path("kept.db"), 1000);
  std::string before = sha256_file(db);
  Reader reader(db);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db, "--wait", "1500ms"}, &out, &err), 1);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "ingero compact: " + db +
                     " is open in another process; waiting up to 1500ms for it to let go\n"
                     "ingero compact: " +
                     db +
                     ": preparing it for writing failed: database is locked; another process "
                     "has the file: a reader (explain, report, query, an MCP tool call) while "
                     "this writes it, or ingero compact or a tracer ending its session while "
                     "this reads it. Run this again once it is done: compact waited 1500ms "
                     "(--wait); the steps it finished are kept and the file is whole\n");
  reader.done();
  EXPECT_EQ(sha256_file(db), before);
  // With a millisecond's wait it fails at once, and says nothing of waiting.
  Reader again(db);
  EXPECT_EQ(run_command({INGERO_BIN, "compact", db, "--wait", "1ms"}, &out, &err), 1);
  EXPECT_EQ(err.find("waiting"), std::string::npos) << err;
  EXPECT_NE(err.find("database is locked; another process has the file"), std::string::npos) << err;
  again.done();
  EXPECT_EQ(sha256_file(db), before);
}

// Found by a hostile-testing helper: Ctrl-C during compact killed it with its journal beside
// the file, a hot journal read-only readers cannot roll back: every reader failed until
// compact ran again. A signal now interrupts the statement in progress (here, the wait for a
// reader to let go of the file), which is rolled back, and compact says so: exit 130.
TEST(CompactWait, CtrlCRollsBackAndLeavesTheFileWhole) {
  std::string db = write_free_calls(temp_path("interrupted.db"), 1000);
  std::string before = sha256_file(db);
  Reader reader(db);
  auto c = Subprocess::spawn({INGERO_BIN, "compact", db, "--wait", "30s"});
  ASSERT_TRUE(c.wait_stderr_line("is open in another process", std::chrono::seconds(20)))
      << c.err();
  c.signal(SIGINT);
  EXPECT_EQ(c.wait(std::chrono::seconds(20)), 130) << c.err();
  EXPECT_NE(c.err().find("ingero compact: interrupted (Interrupt): the step in progress was "
                         "rolled back; the steps it finished are kept and " +
                         db + " is whole\n"),
            std::string::npos)
      << c.err();
  reader.done();
  EXPECT_FALSE(std::filesystem::exists(db + "-journal"));
  EXPECT_EQ(sha256_file(db), before);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 1000);
}

// Any reader of a file another process holds for writing (compact's VACUUM, a tracer's end)
// is told who may hold it once its wait runs out, whichever way it asked: a statement, a script,
// a statement that failed to prepare.
TEST(CompactWait, EveryReadOfAFileHeldForWritingSaysWhoMayHoldIt) {
  std::string db = write_free_calls(temp_path("held.db"), 100);
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &writer), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto r = store::Db::open(db, store::Db::Mode::kReadOnly);
  ASSERT_TRUE(r) << r.error().message;
  store::Db& d = **r;
  sqlite3_busy_timeout(d.handle(), 50);
  const std::string hint = "database is locked" + store::busy_hint(SQLITE_BUSY);
  auto st = d.prepare("SELECT 1 FROM sessions");  // the schema is read first: locked
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "preparing SQL: " + hint);
  auto ex = d.exec("SELECT count(*) FROM sessions");
  ASSERT_FALSE(ex);
  EXPECT_EQ(ex.error().message, hint);
  sqlite3_exec(writer, "COMMIT", nullptr, nullptr, nullptr);
  auto stmt = d.prepare("SELECT count(*) FROM sessions");
  ASSERT_TRUE(stmt) << stmt.error().message;
  ASSERT_EQ(sqlite3_exec(writer, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto step = stmt->step();
  ASSERT_FALSE(step);
  EXPECT_EQ(step.error().message, db + ": " + hint);
  sqlite3_exec(writer, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(writer);
}

// A statement that meets a lock (compact's VACUUM, a tracer's end) waits no longer than its own
// time limit: `query --timeout 1` waited SQLite's 5 s for it and failed with "database is
// locked", and an MCP tool's 5 s limit could become 10.
TEST(CompactWait, AStatementWaitsForALockOnlyWithinItsTimeLimit) {
  std::string db = write_free_calls(temp_path("held-query.db"), 100);
  auto reader = store::TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(reader) << reader.error().message;
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &writer), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  store::QueryLimits limits;
  limits.timeout_ms = 200;
  auto res = store::run_query(**reader, "SELECT count(*) FROM calls", limits);
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().message, "SQL aborted: time limit of 200 ms exceeded");
  // Cancelled while it waits: said so.
  std::atomic<bool> cancel{true};
  limits.timeout_ms = 60'000;
  limits.cancel = &cancel;
  res = store::run_query(**reader, "SELECT count(*) FROM calls", limits);
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().message, "SQL aborted: the request was cancelled");
  // The lock gone, the connection waits as every one does again, and reads.
  sqlite3_exec(writer, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(writer);
  limits.cancel = nullptr;
  res = store::run_query(**reader, "SELECT count(*) FROM calls", limits);
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(std::get<int64_t>(res->rows.at(0).at(0)), 100);
}

}  // namespace
}  // namespace ingero::test

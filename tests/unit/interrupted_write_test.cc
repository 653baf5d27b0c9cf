// A write interrupted in rollback-journal mode (a compact killed part-way; a tracer killed while
// it created its file) leaves a hot FILE-journal: read-only commands refuse the file and name
// `ingero compact` as the way out, and every writer rolls it back first
// (store::roll_back_interrupted_write): nothing committed is lost, nothing half-written stays.
// `ingero compact` also removes the FILE-reserve a killed tracer left.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/file_access.h"
#include "store/schema.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

// In a child that dies mid-transaction: the file switched to a rollback journal, a table
// created and 2.4 MB written with a cache of two pages, so uncommitted pages reach the file
// and the journal holds what they overwrote.
void interrupt_a_write(const std::string& path) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) _exit(2);
    const char* steps[] = {
        "PRAGMA journal_mode = DELETE",
        "PRAGMA cache_size = 2",
        "BEGIN",
        "CREATE TABLE half_written (x BLOB)",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) "
        "INSERT INTO half_written SELECT randomblob(8000) FROM n",
        "UPDATE sessions SET node = 'half-written'"};
    for (const char* sql : steps)
      if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) _exit(3);
    _exit(0);  // killed: no COMMIT, no ROLLBACK, no close
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_TRUE(std::filesystem::exists(path + "-journal"));
}

struct Content {
  int64_t calls = 0, half_written = 0;
  std::string node;
};

Content content(const std::string& path) {
  return {test::query_int(path, "SELECT count(*) FROM calls"),
          test::query_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'half_written'"),
          test::query_rows(path, "SELECT DISTINCT node FROM sessions")[0][0]};
}

// Rolled back: the journal gone, every committed call kept, nothing of the interrupted write.
void expect_rolled_back(const std::string& path, const Content& before) {
  EXPECT_FALSE(std::filesystem::exists(path + "-journal"));
  Content after = content(path);
  EXPECT_EQ(after.calls, before.calls);
  EXPECT_EQ(after.half_written, 0);
  EXPECT_EQ(after.node, "n1");
}

TEST(InterruptedWrite, ReadersNameCompactWhichRollsItBack) {
  std::string path = write_trace("interrupted-compact.db", training_loop(30).calls);
  Content before = content(path);
  ASSERT_GT(before.calls, 0);
  interrupt_a_write(path);
  // The tracer was killed: its space set aside beside the file is left too.
  { std::ofstream(path + "-reserve") << std::string(4096, '\0'); }
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_FALSE(reader);
  EXPECT_NE(reader.error().message.find("`ingero compact " + path + "` rolls it back"),
            std::string::npos)
      << reader.error().message;
  std::string out, err;
  // The commands that read say so and print nothing else.
  for (const char* cmd : {"explain", "report", "query"}) {
    std::vector<std::string> args = {INGERO_BIN, cmd, "--db", path};
    if (std::string(cmd) == "query") args.push_back("SELECT count(*) FROM calls");
    EXPECT_EQ(test::run_command(args, &out, &err), 1) << cmd;
    EXPECT_NE(err.find("`ingero compact " + path + "` rolls it back"), std::string::npos)
        << cmd << ": " << err;
    EXPECT_EQ(out, "") << cmd;
  }
  ASSERT_EQ(test::run_command({INGERO_BIN, "compact", path}, &out, &err), 0) << err;
  expect_rolled_back(path, before);
  EXPECT_FALSE(std::filesystem::exists(path + "-reserve"));
}

TEST(InterruptedWrite, TheWriterRollsItBackBeforeAppending) {
  std::string path = write_trace("interrupted-append.db", training_loop(30).calls);
  Content before = content(path);
  interrupt_a_write(path);
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  w->reset();
  expect_rolled_back(path, before);
}

TEST(InterruptedWrite, AFileWithoutAHotJournalIsLeftAsItIs) {
  std::string path = write_trace("no-journal.db", training_loop(5).calls);
  std::string sum = test::sha256_file(path);
  ASSERT_TRUE(roll_back_interrupted_write(path));
  // A journal left empty by a clean end is not hot: SQLite ignores it, and so does this.
  {
    std::FILE* f = std::fopen((path + "-journal").c_str(), "w");
    std::fclose(f);
  }
  ASSERT_TRUE(roll_back_interrupted_write(path));
  EXPECT_EQ(test::sha256_file(path), sum);
}

// A tracer killed while it created its file (within ~0.1 s of starting) leaves it with no
// tables and its journal or log beside it. Readers and compact said "empty database, not an
// ingero trace"; they now say what happened and how to start again. A plain empty file is
// still only empty.
TEST(InterruptedWrite, AFileItsTracerDiedCreatingIsSaidToHoldNoTrace) {
  // Each command on a file as the tracer left it: SQLite removes a log that holds nothing when
  // its last reader closes, so only the first reader sees it.
  for (const char* side : {"-journal", "-wal"})
    for (const char* cmd : {"explain", "compact"}) {
      std::string path = test::temp_path(std::string("died-creating-") + cmd + side + ".db");
      std::ofstream(path).close();
      std::ofstream(path + side) << std::string(512, '\0');
      std::vector<std::string> argv = {INGERO_BIN, cmd, path};
      if (std::string(cmd) == "explain") argv = {INGERO_BIN, cmd, "--db", path};
      std::string out, err;
      EXPECT_EQ(test::run_command(argv, &out, &err), 1) << cmd << side;
      EXPECT_EQ(err, std::string("ingero ") + cmd + ": " + path +
                         ": holds no trace: a tracer was killed while it created it (" + path +
                         side + " was beside it); `ingero trace --db " + path +
                         "` starts it anew\n")
          << cmd << side;
    }
  // The same file while a tracer holds its lock (it is making the tables now): not a killed
  // tracer, whose advice ("starts it anew") that tracer's lock would refuse.
  std::string making = test::temp_path("being-made.db");
  std::ofstream(making).close();
  std::ofstream(making + "-wal") << std::string(512, '\0');
  {
    auto held = store::TraceLock::acquire(making);
    ASSERT_TRUE(held) << held.error().message;
    for (const char* cmd : {"explain", "status"}) {
      std::string out, err;
      EXPECT_EQ(test::run_command({INGERO_BIN, cmd, "--db", making}, &out, &err), 1) << cmd;
      EXPECT_EQ(err, std::string("ingero ") + cmd + ": " + making +
                         ": holds no trace yet: a running `ingero trace` is creating it; read it "
                         "again in a moment\n")
          << cmd;
    }
  }
  std::string empty = test::temp_path("just-empty.db");
  std::ofstream(empty).close();
  std::string out, err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "explain", "--db", empty}, &out, &err), 1);
  EXPECT_EQ(err, "ingero explain: " + empty + ": empty database, not an ingero trace\n");
}

}  // namespace
}  // namespace ingero::store

// Issue 12, items 12 and 14. Trace files are private (0600, also their -wal and -shm) and the
// folder ingero creates for them is 0700, because a trace holds every traced process's
// command line. A path that cannot be a trace (a directory, no permission, a missing folder)
// gets a message naming the path and the cause from every command that takes --db, instead of
// SQLite's "disk I/O error" or "unable to open database file".
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "store/file_access.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Run {
  int rc = -1;
  std::string out, err;
};
const std::vector<std::string> kAsNobody = {"setpriv", "--reuid=65534", "--regid=65534",
                                            "--clear-groups", "--"};

// As this user, or as nobody when root (root reads anything: permission tests need a user
// the permissions apply to).
Run ingero(const std::vector<std::string>& args, bool unprivileged = false) {
  Run r;
  std::vector<std::string> argv;
  bool as_nobody = unprivileged && geteuid() == 0;
  if (as_nobody) argv = kAsNobody;
  argv.push_back(as_nobody ? ingero_binary_for_nobody() : std::string(INGERO_BIN));
  argv.insert(argv.end(), args.begin(), args.end());
  r.rc = run_command(argv, &r.out, &r.err, {"HOME=/nonexistent"});
  return r;
}

// The read-side commands, each given `db` (and `trace`'s writer, tested through TraceWriter).
std::vector<std::vector<std::string>> readers(const std::string& db, const std::string& out) {
  return {{"explain", "--db", db},
          {"query", db, "SELECT 1"},
          {"export", "--db", db, "-o", out + "/export.json"},
          {"report", "--db", db, "-o", out + "/report.html"},
          {"mcp", "--db", db}};
}

TEST(TraceFiles, NewTracesAre0600InA0700Folder) {
  std::string home = temp_path("home");
  std::filesystem::create_directories(home);
  std::string dir = home + "/.ingero/sub";
  mode_t home_mode = mode_of(home);
  ASSERT_TRUE(store::make_private_dirs(dir));
  EXPECT_EQ(mode_of(home + "/.ingero"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(home), home_mode) << "an existing folder is left alone";
  std::string db = dir + "/ingero.db";
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  ASSERT_TRUE((*w)->begin_session(si));
  ASSERT_TRUE((*w)->commit());
  EXPECT_EQ(mode_of(db), 0600u);
  ASSERT_TRUE(std::filesystem::exists(db + "-wal"));
  EXPECT_EQ(mode_of(db + "-wal"), 0600u);
  EXPECT_EQ(mode_of(db + "-shm"), 0600u);
  // A file in a folder that is not a folder.
  auto bad = store::make_private_dirs(db + "/x");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find(db + " is not a directory"), std::string::npos)
      << bad.error().message;
}

// Folders made for a trace whose path turns out too long for the system are removed again:
// 2,100 nested folders past PATH_MAX left 2,044 empty ones behind the error.
TEST(TraceFiles, FoldersMadeForAPathThatFailsAreRemovedAgain) {
  std::string base = temp_path("deep");
  std::filesystem::create_directories(base);
  std::string dir = base;
  for (int i = 0; i < 2100; ++i) dir += "/a";
  auto r = store::make_private_dirs(dir);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot create the folder " + base + "/a/a/"), std::string::npos)
      << r.error().message.substr(0, 200);
  EXPECT_TRUE(std::filesystem::is_empty(base));
}

TEST(TraceFiles, ADirectoryAsDbIsNamed) {
  std::string dir = temp_path("a-folder.db");
  std::string out = temp_path("out");
  std::filesystem::create_directories(dir);
  std::filesystem::create_directories(out);
  auto all = readers(dir, out);
  // The dashboard waits for a missing file (trace may be about to create it), not for these.
  all.push_back({"dashboard", "--db", dir, "--http", "127.0.0.1:0"});
  for (const auto& args : all) {
    auto r = ingero(args);
    EXPECT_EQ(r.rc, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(dir + ": is a directory, not a trace file"), std::string::npos)
        << args[0] << ": " << r.err;
  }
  auto w = store::TraceWriter::open(dir);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().message, dir + ": is a directory, not a trace file");
}

// A file that is no SQLite database at all (the fixture still xz-compressed, an export given
// back) is said to be what it is, by every command, and left as it was: it was called a
// damaged trace, with a hint to check its pages.
TEST(TraceFiles, AFileThatIsNoDatabaseIsSaidToBeWhatItIs) {
  std::string out = temp_path("out");
  std::filesystem::create_directories(out);
  struct Case {
    std::string name, bytes, said;
  };
  const std::vector<Case> cases = {
      {"run.json", "  {\"traceEvents\": []}\n",
       "; it holds JSON (a Perfetto trace written by `ingero export`? ingero reads the trace file "
       "it was exported from)"},
      {"run.db.xz",
       std::string("\xfd"
                   "7zXZ\0\0\x04\xe6\xd6\xb4\x46\x02\0\x21\x01",
                   18),
       "; it is xz-compressed (`xz -dk @` gives the file inside)"},
      {"run.pb.gz", std::string("\x1f\x8b\x08\0\0\0\0\0\0\x03\x01\0\0\xff\xff\0", 16),
       "; it is gzip-compressed (a pprof profile from `ingero export --format pprof`, or a file "
       "to `gunzip` first)"},
      {"notes.txt", std::string(4096, 'x'), ""},
      // Shorter than SQLite's header: "hello" was called a damaged trace (hostile test).
      {"hello.db", "hello\n", ""},
      {"tiny.json", "{\"a\":1}\n",
       "; it holds JSON (a Perfetto trace written by `ingero export`? ingero reads the trace file "
       "it was exported from)"},
  };
  for (const Case& c : cases) {
    std::string path = temp_path(c.name);
    std::ofstream(path, std::ios::binary) << c.bytes;
    std::string said = path + ": not a trace: not an SQLite database" + c.said;
    for (size_t at; (at = said.find('@')) != std::string::npos;) said.replace(at, 1, path);
    for (const auto& args : readers(path, out)) {
      auto r = ingero(args);
      EXPECT_EQ(r.rc, 1) << args[0] << ": " << r.err;
      EXPECT_EQ(r.err, "ingero " + args[0] + ": " + said + "\n") << args[0];
    }
    auto r = ingero({"compact", path});
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_EQ(r.err, "ingero compact: " + said + "\n");
    EXPECT_EQ(bytes_of(path), c.bytes) << c.name;
    auto w = store::TraceWriter::open(path);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().message, said);
    EXPECT_EQ(bytes_of(path), c.bytes) << c.name;
  }
}

// A file whose header says SQLite but whose pages are not: said to be damaged, naming the file
// once (SQLite's own message named it again, by its absolute path, in parentheses).
TEST(TraceFiles, AFileWithAnSQLiteHeaderAndNoDatabaseIsNamedOnce) {
  std::string out = temp_path("out");
  std::filesystem::create_directories(out);
  std::string path = temp_path("half.db");
  std::string bytes = std::string("SQLite format 3\0", 16) + std::string(8000, 'g');
  std::ofstream(path, std::ios::binary) << bytes;
  const std::string said =
      path +
      ": not a readable SQLite database: file is not a database; the file is damaged: `sqlite3 "
      "-readonly FILE 'PRAGMA quick_check'` lists the damage, and no answer read from it is "
      "complete";
  for (const auto& args : readers(path, out)) {
    auto r = ingero(args);
    EXPECT_EQ(r.rc, 1) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err, "ingero " + args[0] + ": " + said + "\n") << args[0];
  }
  EXPECT_EQ(bytes_of(path), bytes);
}

TEST(TraceFiles, AMissingFileOrFolderIsNamed) {
  std::string missing = temp_path("nope.db");
  std::string out = temp_path("out");
  std::filesystem::create_directories(out);
  for (const auto& args : readers(missing, out)) {
    auto r = ingero(args);
    EXPECT_EQ(r.rc, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(missing + ": No such file or directory"), std::string::npos)
        << args[0] << ": " << r.err;
  }
  auto w = store::TraceWriter::open(temp_path("no-folder") + "/x/t.db");
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("No such file or directory"), std::string::npos)
      << w.error().message;
}

TEST(TraceFiles, NoPermissionIsNamed) {
  // A trace only its owner may read, and an output folder anyone may write to.
  std::string db = write_free_calls(temp_path("private.db"), 10);
  ASSERT_EQ(chmod(db.c_str(), 0600), 0);
  if (geteuid() != 0) {
    ASSERT_EQ(chmod(db.c_str(), 0000), 0);
  }
  std::string out = temp_path("out");
  std::filesystem::create_directories(out);
  for (const auto& p : {std::filesystem::path(db).parent_path(), std::filesystem::path(out)})
    std::filesystem::permissions(p, std::filesystem::perms::all);
  auto all = readers(db, out);
  all.push_back({"dashboard", "--db", db, "--http", "127.0.0.1:0"});
  for (const auto& args : all) {
    auto r = ingero(args, true);
    EXPECT_EQ(r.rc, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("cannot read " + db + ": Permission denied"), std::string::npos)
        << args[0] << ": " << r.err;
  }
  // A trace in a folder this user may not enter.
  std::string locked = temp_path("locked");
  std::filesystem::create_directories(locked);
  std::string inside = write_free_calls(locked + "/t.db", 10);
  ASSERT_EQ(chmod(locked.c_str(), 0700), 0);
  if (geteuid() != 0) {
    ASSERT_EQ(chmod(locked.c_str(), 0000), 0);
  }
  auto r = ingero({"explain", "--db", inside}, true);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(inside + ": Permission denied"), std::string::npos) << r.err;
  if (geteuid() != 0) {
    ASSERT_EQ(chmod(locked.c_str(), 0700), 0);
  }
}

// A copy of a trace taken while it was written (WAL mode) and read where this user may not write
// (a shared folder, another user's): SQLite needs its -shm beside it, and every reader failed
// with "not a readable SQLite database: attempt to write a readonly database". Alone (no -wal,
// -shm or -journal), the file holds the whole trace and is read as it is.
TEST(TraceFiles, ACopyOfATraceInWalModeIsReadInAFolderNotOurs) {
  std::string dir = temp_path("wal-copy");
  std::filesystem::create_directories(dir);
  std::string db = write_free_calls(dir + "/t.db", 10);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
  ASSERT_FALSE(std::filesystem::exists(db + "-wal"));
  ASSERT_EQ(chmod(db.c_str(), 0644), 0);
  ASSERT_EQ(chmod(dir.c_str(), geteuid() == 0 ? 0755 : 0555), 0);
  auto q = ingero({"query", db, "SELECT count(*) FROM calls"}, true);
  EXPECT_EQ(q.rc, 0) << q.err;
  EXPECT_EQ(q.out, "count(*)\n--------\n      10\n(1 row)\n") << q.err;
  auto e = ingero({"explain", "--db", db}, true);
  EXPECT_EQ(e.rc, 0) << e.err;
  EXPECT_FALSE(std::filesystem::exists(db + "-shm"));
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
}

TEST(TraceFiles, AReadOnlyTraceIsRefusedForWritingBeforeAnyChange) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes read-only files; covered by setpriv above";
  std::string db = write_free_calls(temp_path("ro.db"), 10);
  ASSERT_EQ(chmod(db.c_str(), 0400), 0);
  std::string before = sha256_file(db);
  auto w = store::TraceWriter::open(db);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("cannot write " + db + ": Permission denied"), std::string::npos)
      << w.error().message;
  EXPECT_EQ(sha256_file(db), before);
}

// Issue 37, item 9: `trace` refused at BPF load (no privilege) switched an existing file to WAL
// and dropped its time index before failing. The programs now load before the file is
// touched: the file stays byte-identical, nothing is created beside it, and a missing file or
// folder is not created.
TEST(TraceFiles, ATraceRefusedForPrivilegeLeavesTheFileByteIdentical) {
  std::string dir = temp_path("theirs");
  std::filesystem::create_directories(dir);
  std::string db = write_free_calls(dir + "/t.db", 1000);
  ASSERT_EQ(test::query_int(db,
                            "SELECT count(*) FROM sqlite_master WHERE name = "
                            "'idx_call_store_ts'"),
            1);
  if (geteuid() == 0) {
    // The unprivileged user owns the folder and the file: only BPF can refuse it.
    for (const auto& p : {dir, db}) ASSERT_EQ(chown(p.c_str(), 65534, 65534), 0) << p;
  }
  std::string before = sha256_file(db);
  auto r = ingero({"trace", "--no-live", "--db", db, "--", "/bin/true"}, true);
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_EQ(sha256_file(db), before);
  for (const char* suffix : {"-wal", "-shm", "-journal", "-reserve"})
    EXPECT_FALSE(std::filesystem::exists(db + suffix)) << suffix;
  EXPECT_EQ(test::query_int(db,
                            "SELECT count(*) FROM sqlite_master WHERE name = "
                            "'idx_call_store_ts'"),
            1);
  // A trace to create, in a folder to create: neither is.
  r = ingero({"trace", "--no-live", "--db", dir + "/new/t.db", "--", "/bin/true"}, true);
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/new"));
}

}  // namespace
}  // namespace ingero::test

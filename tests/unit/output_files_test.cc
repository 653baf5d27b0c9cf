// Issue 12, item 4: what export writes, and what query and explain print, either arrives whole
// or the command fails. export refuses to overwrite without --force, refuses to write over
// its input (same inode, whatever the name), writes a temporary file renamed into place, and
// checks every write, fsync and close: -o /dev/full and a full disk (a 64 KiB tmpfs in a
// private mount namespace) are errors that leave nothing behind. query and explain writing
// into a full standard output exit non-zero.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/run_ingero.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Run = IngeroRun;
IngeroRun ingero(const std::vector<std::string>& args) { return run_ingero(args); }
Run shell(const std::string& script) {
  Run r;
  r.rc = run_command({"/bin/sh", "-c", script}, &r.out, &r.err);
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

size_t entries(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

class OutputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_path("out");
    std::filesystem::create_directories(dir_);
    db_ = write_free_calls(temp_path("t.db"), 2000);
  }
  std::string dir_, db_;
};

TEST_F(OutputFiles, ExportWritesAWholeFileWithPrivateMode) {
  auto r = ingero({"export", "--db", db_, "-o", dir_ + "/t.json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(dir_ + "/t.json"));
  size_t calls = 0;
  for (const auto& e : j) calls += e.value("name", "") == "cudaFree";
  EXPECT_EQ(calls, 2000u);
  EXPECT_NE(r.err.find(std::to_string(j.size()) + " trace events written"), std::string::npos)
      << r.err;
  EXPECT_EQ(entries(dir_), 1u) << "a temporary file was left behind";
  EXPECT_EQ(std::filesystem::status(dir_ + "/t.json").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// cli.md: export, report and merge each take -o, --out and --output as one option (export had
// only --out, report only --output: "--output" from export's docs was a usage error).
TEST_F(OutputFiles, ExportReportAndMergeTakeOutAndOutput) {
  for (const char* flag : {"-o", "--out", "--output"}) {
    const std::string f = flag;
    auto e = ingero({"export", "--db", db_, f, dir_ + "/e" + f + ".json"});
    EXPECT_EQ(e.rc, 0) << f << ": " << e.err;
    EXPECT_TRUE(std::filesystem::is_regular_file(dir_ + "/e" + f + ".json")) << f;
    auto r = ingero({"report", "--db", db_, f, dir_ + "/r" + f + ".html"});
    EXPECT_EQ(r.rc, 0) << f << ": " << r.err;
    EXPECT_TRUE(std::filesystem::is_regular_file(dir_ + "/r" + f + ".html")) << f;
    auto m = ingero({"merge", db_, f, dir_ + "/m" + f + ".db"});
    EXPECT_EQ(m.rc, 0) << f << ": " << m.err;
    EXPECT_EQ(query_int(dir_ + "/m" + f + ".db", "SELECT count(*) FROM calls"), 2000) << f;
  }
}

// cli.md: without -o, report writes ingero-report.html in the working folder, and says so.
TEST_F(OutputFiles, AReportWithoutOutputIsIngeroReportHtmlHere) {
  auto r = shell("cd '" + dir_ + "' && '" INGERO_BIN "' report --db '" + db_ + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(entries(dir_), 1u);
  EXPECT_NE(slurp(dir_ + "/ingero-report.html").find("<html"), std::string::npos);
  EXPECT_NE(r.err.find("ingero-report.html"), std::string::npos) << r.err;
}

// An output that exists without --force is a usage error (exit 2) in every format, as merge's
// is: export said it with exit 1 for perfetto and pprof, 2 for sqlite.
TEST_F(OutputFiles, ExportRefusesToOverwriteWithoutForce) {
  std::string out = dir_ + "/t.json";
  std::ofstream(out) << "keep me";
  for (const std::string format : {"perfetto", "pprof", "sqlite"}) {
    auto r = ingero({"export", "--format", format, "--db", db_, "-o", out});
    EXPECT_EQ(r.rc, 2) << format;
    EXPECT_EQ(r.err, "ingero export: " + out + ": exists; pass --force to replace it\n") << format;
    EXPECT_EQ(r.out, "") << format;
    EXPECT_EQ(slurp(out), "keep me");
    EXPECT_EQ(entries(dir_), 1u);
  }
  auto f = ingero({"export", "--db", db_, "-o", out, "--force"});
  ASSERT_EQ(f.rc, 0) << f.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(out)).size(), 2000u + 1u);  // calls + process track
  EXPECT_EQ(entries(dir_), 1u);
}

// A symbolic link to nothing is a name that exists: perfetto and pprof wrote their whole output
// and then failed at the rename, exit 1; sqlite replaced the link without a word (helper-73).
TEST_F(OutputFiles, ALinkToNothingIsAnExistingOutput) {
  std::string out = dir_ + "/dl.json";
  std::filesystem::create_symlink(dir_ + "/nowhere", out);
  for (const std::string format : {"perfetto", "pprof", "sqlite"}) {
    auto r = ingero({"export", "--format", format, "--db", db_, "-o", out});
    EXPECT_EQ(r.rc, 2) << format;
    EXPECT_EQ(r.err, "ingero export: " + out +
                         ": exists (a symbolic link to nothing); pass --force to replace it\n")
        << format;
    EXPECT_TRUE(std::filesystem::is_symlink(out)) << format;
    EXPECT_EQ(entries(dir_), 1u) << format;
  }
  auto f = ingero({"export", "--db", db_, "-o", out, "--force"});
  ASSERT_EQ(f.rc, 0) << f.err;
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(out)));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/nowhere"));
}

// The trace read is never the output, --force or not, in any format (a usage error, exit 2):
// --format sqlite --force renamed its plain copy over the trace it read.
TEST_F(OutputFiles, ExportRefusesToWriteOverItsInput) {
  std::string before = sha256_file(db_);
  for (const std::string format : {"perfetto", "pprof", "sqlite"})
    for (bool force : {false, true}) {
      std::vector<std::string> args = {"export", "--format", format, "--db", db_, "-o", db_};
      if (force) args.push_back("--force");
      auto r = ingero(args);
      EXPECT_EQ(r.rc, 2) << format;
      EXPECT_NE(r.err.find("is the input " + db_), std::string::npos) << format << ": " << r.err;
      EXPECT_EQ(sha256_file(db_), before) << format;
    }
  // report writes over its output always, never over its input.
  auto rep = ingero({"report", "--db", db_, "-o", db_});
  EXPECT_EQ(rep.rc, 2);
  EXPECT_EQ(rep.err, "ingero report: " + db_ + ": is the input " + db_ +
                         "; writing it would destroy the trace (choose another output file)\n");
  EXPECT_EQ(sha256_file(db_), before);
  // Another name for the same file (a hard link, a path through a symlinked folder).
  std::string link = dir_ + "/same.db";
  std::filesystem::create_hard_link(db_, link);
  auto r = ingero({"export", "--db", db_, "-o", link, "--force"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("is the input"), std::string::npos) << r.err;
  EXPECT_EQ(sha256_file(db_), before);
  std::filesystem::create_directory_symlink(std::filesystem::path(db_).parent_path(),
                                            dir_ + "/alias");
  auto s = ingero({"export", "--db", db_, "-o",
                   dir_ + "/alias/" + std::filesystem::path(db_).filename().string(), "--force"});
  EXPECT_EQ(s.rc, 2);
  EXPECT_EQ(sha256_file(db_), before);
}

// SQLite's files beside the trace, by name even before they exist: a report written as
// TRACE-journal made every reader take it for an interrupted write (and compact deleted it).
TEST_F(OutputFiles, TheTracesJournalLogAndIndexAreNeverAnOutput) {
  std::string before = sha256_file(db_);
  for (const std::string suffix : {"-journal", "-wal", "-shm"}) {
    std::string what = suffix == "-wal"   ? "the write-ahead log"
                       : suffix == "-shm" ? "the shared-memory index"
                                          : "the rollback journal";
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"report", "--db", db_, "-o", db_ + suffix},
          std::vector<std::string>{"export", "--db", db_, "-o", db_ + suffix},
          std::vector<std::string>{"export", "--format", "sqlite", "--db", db_, "-o",
                                   db_ + suffix}}) {
      auto r = ingero(args);
      EXPECT_EQ(r.rc, 2) << args[0] << suffix;
      EXPECT_EQ(r.err, "ingero " + args[0] + ": " + db_ + suffix + ": is " + what +
                           " of the input " + db_ +
                           "; writing it would destroy the trace (choose another output file)\n");
      EXPECT_FALSE(std::filesystem::exists(db_ + suffix)) << suffix;
    }
  }
  EXPECT_EQ(sha256_file(db_), before);
  auto ok = ingero({"explain", "--db", db_});
  EXPECT_EQ(ok.rc, 0) << ok.err;
}

// A SQLite copy is a file renamed into place: over a device or a FIFO it replaced it with a
// regular file, exit 0 (a hostile test turned /dev/full into an 88 MB file). Refused, exit 2;
// the other formats write such a target in place.
TEST_F(OutputFiles, ASqliteCopyIsNeverRenamedOverADeviceOrFifo) {
  std::string fifo = dir_ + "/copy.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& target : {fifo, std::string("/dev/full")}) {
    auto r = ingero({"export", "--format", "sqlite", "--db", db_, "-o", target, "--force"});
    EXPECT_EQ(r.rc, 2) << target;
    EXPECT_EQ(r.err, "ingero export: " + target +
                         ": is not a regular file (a device or a FIFO): --format sqlite writes a "
                         "database file of its own, renamed into place (give a file name)\n");
  }
  struct stat st {};
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

// The copy is a file of the whole trace: standard output, a fleet and every flag that selects
// part of it are usage errors, said before anything is written.
TEST_F(OutputFiles, ASqliteCopyIsAWholeFileOrAUsageError) {
  const std::string give = "ingero export: --format sqlite writes a file: give --db and -o FILE\n";
  const std::string whole =
      "ingero export: --format sqlite copies the whole file: --since, --from, --to, --pid and "
      "--node do not apply (`ingero query` selects rows)\n";
  const std::string out = dir_ + "/copy.sqlite";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--db", db_}, give},
      {{"--db", db_, "-o", "-"}, give},
      {{"--source", "clickhouse://127.0.0.1:1/ingero", "-o", out}, give},
      {{"--db", db_, "-o", out, "--since", "5s"}, whole},
      {{"--db", db_, "-o", out, "--pid", "7"}, whole},
      {{"--db", db_, "-o", out, "--node", "a"}, whole},
  };
  for (const auto& [args, said] : cases) {
    std::vector<std::string> argv = {"export", "--format", "sqlite"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = ingero(argv);
    EXPECT_EQ(r.rc, 2) << args.back();
    EXPECT_EQ(r.err, said) << args.back();
    EXPECT_EQ(r.out, "") << args.back();
    EXPECT_EQ(entries(dir_), 0u) << args.back();
  }
}

// Found by a hostile-testing helper: a trace removed without its -wal left OUT-wal behind, and
// `merge ... -o OUT` and `export --format sqlite -o OUT` renamed their new file under it: SQLite
// read the old -wal on top, and OUT answered as the other trace. A stray -wal (no OUT beside it)
// is removed; beside an existing OUT it is OUT's, and replacing OUT is refused.
TEST_F(OutputFiles, AStrayWalIsRemovedAndAnExistingFilesWalRefusesTheReplacement) {
  const std::string other = temp_path("other.db");
  std::filesystem::copy_file(db_, other, std::filesystem::copy_options::overwrite_existing);
  leave_in_wal(other, "CREATE TABLE stray(x); INSERT INTO stray VALUES (1);");
  for (const char* cmd : {"merge", "export"}) {
    SCOPED_TRACE(cmd);
    const std::string out = dir_ + "/" + cmd + ".db";
    std::filesystem::copy_file(other + "-wal", out + "-wal");
    std::filesystem::copy_file(other + "-shm", out + "-shm");
    auto r = std::string(cmd) == "merge"
                 ? ingero({"merge", db_, "-o", out})
                 : ingero({"export", "--format", "sqlite", "--db", db_, "-o", out});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(query_int(out, "SELECT count(*) FROM sqlite_master WHERE name = 'stray'"), 0);
    EXPECT_EQ(query_int(out, "SELECT count(*) FROM calls"), 2000);
    EXPECT_FALSE(std::filesystem::exists(out + "-wal"));
  }
  // An existing file with its -wal: the new copy is not renamed over it.
  const std::string kept = dir_ + "/kept.db";
  std::filesystem::copy_file(other, kept);
  std::filesystem::copy_file(other + "-wal", kept + "-wal");
  const auto before = slurp(kept);
  auto r = ingero({"export", "--format", "sqlite", "--db", db_, "-o", kept, "--force"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "ingero export: " + kept + "-wal is beside " + kept + ": a program is writing " +
                       kept + ", or one was killed while it did; replacing " + kept +
                       " would give the new file its log (write to another name, or remove " +
                       kept + " and its -wal, -shm and -journal first)\n");
  EXPECT_EQ(slurp(kept), before);
}

// Found by a hostile-testing helper: a sqlite copy of an empty file, or of the original
// implementation's trace, said "not a trace of ours (a plain copy is of schema 10 or later)";
// every other command says what the file is.
TEST_F(OutputFiles, ASqliteCopyOfAFileItCannotCopySaysWhatTheFileIs) {
  const std::string empty = dir_ + "/empty.db", out = dir_ + "/copy.sqlite";
  { std::ofstream touch(empty); }
  auto r = ingero({"export", "--format", "sqlite", "--db", empty, "-o", out});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "ingero export: copying " + empty + " into " + out + ": " + empty +
                       ": empty database, not an ingero trace\n");
  const std::string go = INGERO_FIXTURES_DIR "/ingero-go/sample-gpu-node-01.db";
  r = ingero({"export", "--format", "sqlite", "--db", go, "-o", out});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "ingero export: copying " + go + " into " + out + ": " + go +
                       ": a trace of the original Go implementation: its events are rows "
                       "already, and the sqlite3 shell reads it as it is\n");
  EXPECT_FALSE(std::filesystem::exists(out));
}

// demo keeps its trace only in a new file, and an unknown scenario makes none: both are usage
// errors said before anything is written, and an existing file is left as it was.
TEST_F(OutputFiles, ADemoRefusesAnExistingFileAndAnUnknownScenarioBeforeMakingOne) {
  const std::string kept = dir_ + "/kept.db";
  { std::ofstream(kept) << "mine"; }
  auto r = ingero({"demo", "launch-bound", "--db", kept});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "ingero demo: " + kept + " exists; give a new path\n");
  EXPECT_EQ(r.out, "");
  std::ifstream in(kept);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "mine");
  const std::string fresh = dir_ + "/fresh.db";
  r = ingero({"demo", "no-such-incident", "--db", fresh});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err,
            "ingero demo: unknown scenario 'no-such-incident' (known: incident, "
            "dataloader-starvation, hidden-sync, graph-recapture, nccl-straggler, launch-bound, "
            "device-fault)\n");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(entries(dir_), 1u) << "only the file that was there";
}

// A hostile tester's findings: demo's session was never ended (stopped_at 0, no reason), so
// status read the file as a tracer killed mid-trace and compact "repaired" it; and
// `check --config ""` (an unset $CFG) ran the whole host check and passed.
TEST_F(OutputFiles, ADemoEndsItsSessionAndCheckConfigNeedsAPath) {
  const std::string db = dir_ + "/demo.db";
  auto r = ingero({"demo", "hidden-sync", "--db", db});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto row = query_rows(db, "SELECT stopped_at > 0, exit_reason FROM sessions");
  EXPECT_EQ(row, (std::vector<std::vector<std::string>>{{"1", "demo"}}));
  auto st = ingero({"status", "--db", db});
  EXPECT_EQ(st.out.find("ended without stopping"), std::string::npos) << st.out;
  auto c = ingero({"check", "--config", ""});
  EXPECT_EQ(c.rc, 2) << c.out;
  EXPECT_NE(c.err.find("an empty path names no file"), std::string::npos) << c.err;
}

// Found by a hostile-testing helper: Ctrl-C during `export --format sqlite -o F` left
// .F.export-PID and its journal beside F (and the other formats their .F.tmp-XXXXXX). A copy
// of three million calls is interrupted as soon as it appears (it takes seconds to finish; the
// test looks every 10 ms): nothing is left.
TEST_F(OutputFiles, CtrlCDuringAnExportLeavesNothingBehind) {
  std::string big = write_free_calls(temp_path("big.db"), 3'000'000);
  auto e = Subprocess::spawn(
      {INGERO_BIN, "export", "--db", big, "--format", "sqlite", "-o", dir_ + "/t.sqlite"});
  bool copying = false;
  for (int i = 0; i < 3000 && !copying; ++i) {
    copying = entries(dir_) > 0;
    if (!copying) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(copying) << e.err();
  e.signal(SIGINT);
  EXPECT_EQ(e.wait(std::chrono::seconds(20)), 128 + SIGINT) << e.err();
  std::vector<std::string> left;
  for (const auto& f : std::filesystem::directory_iterator(dir_))
    left.push_back(f.path().filename().string());
  EXPECT_TRUE(left.empty()) << left.front();
}

// Any signal that ends the command removes its temporary file: a file-size limit (SIGXFSZ,
// raised by the write that passes it) and Ctrl-backslash (SIGQUIT) left a hidden copy of up to
// the whole output beside FILE.
TEST_F(OutputFiles, AFileSizeLimitOrSigquitLeavesNothingBehind) {
  auto r = shell("ulimit -f 50; exec '" INGERO_BIN "' export --db '" + db_ + "' -o '" + dir_ +
                 "/t.json'");
  EXPECT_EQ(r.rc, 128 + SIGXFSZ) << r.err;
  EXPECT_EQ(entries(dir_), 0u) << "a temporary file was left behind";
  std::string big = write_free_calls(temp_path("big.db"), 3'000'000);
  auto e = Subprocess::spawn(
      {INGERO_BIN, "export", "--db", big, "--format", "sqlite", "-o", dir_ + "/t.sqlite"});
  for (int i = 0; i < 3000 && entries(dir_) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(entries(dir_), 0u) << e.err();
  e.signal(SIGQUIT);
  EXPECT_EQ(e.wait(std::chrono::seconds(20)), 128 + SIGQUIT) << e.err();
  EXPECT_EQ(entries(dir_), 0u) << "a temporary file was left behind";
}

TEST_F(OutputFiles, ExportIntoDevFullFails) {
  auto r = ingero({"export", "--db", db_, "-o", "/dev/full"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("writing /dev/full: No space left on device"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("written"), std::string::npos) << r.err;
  auto s = shell(std::string(INGERO_BIN) + " export --db " + db_ + " > /dev/full");
  EXPECT_EQ(s.rc, 1);
  EXPECT_NE(s.err.find("No space left on device"), std::string::npos) << s.err;
}

TEST_F(OutputFiles, ExportOntoAFullDiskFailsAndLeavesNothing) {
  // A 64 KiB tmpfs in a private mount namespace (unprivileged through a user namespace; the
  // trace's export is ~200 KiB). The listing runs inside, before the mount goes away.
  std::string mnt = dir_ + "/tiny";
  std::filesystem::create_directories(mnt);
  auto r = shell("unshare -rm /bin/sh -c 'mount -t tmpfs -o size=64k tmpfs " + mnt +
                 " || exit 99; " + INGERO_BIN + " export --db " + db_ + " -o " + mnt +
                 "/t.json; rc=$?; ls -A " + mnt + "; exit $rc'");
  if (r.rc == 99) {
    if (running_in_ci()) FAIL() << "CI=true but no private tmpfs mount: " << r.err;
    GTEST_SKIP() << "*** SKIPPED: cannot mount a tmpfs in a user namespace: " << r.err << " ***";
  }
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(mnt + "/t.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "left on the full disk: " << r.out;
  // --format sqlite: SQLite's own words, the output named once, nothing left (its copy was left
  // empty beside it, and the message lost the path: "copying T to database or disk is full").
  auto q = shell("unshare -rm /bin/sh -c 'mount -t tmpfs -o size=64k tmpfs " + mnt +
                 " || exit 99; " + INGERO_BIN + " export --format sqlite --db " + db_ + " -o " +
                 mnt + "/t.db; rc=$?; ls -A " + mnt + "; exit $rc'");
  EXPECT_EQ(q.rc, 1) << q.err;
  EXPECT_EQ(q.err,
            "ingero export: copying " + db_ + " into " + mnt + "/t.db: database or disk is full\n");
  EXPECT_EQ(q.out, "") << "left on the full disk: " << q.out;
}

// A new trace on a disk too full for its tables (~600 KiB empty), or for what is then written
// into it: the error says what failed, exit 1, and the half-made file is not left behind, nor
// SQLite's files beside it. (`demo --db` writes its trace through the same writer as `trace`;
// it exited 2, a usage error, and left the file when its calls did not fit.)
TEST_F(OutputFiles, ANewTraceOnAFullDiskIsNotLeftHalfMade) {
  // 64 KiB: the tables do not fit; 1,500 KiB: they do, and the demo's calls then do not.
  const std::pair<std::string, std::string> cases[] = {
      {"64k",
       "/t.db: creating the trace's tables failed: database or disk is full (the new file "
       "was removed)"},
      {"1500k", "writing " + dir_ +
                    "/tiny-1500k/t.db: database or disk is full (the new file was "
                    "removed)"}};
  for (const auto& [size, said] : cases) {
    std::string mnt = dir_ + "/tiny-" + size;
    std::filesystem::create_directories(mnt);
    auto r = shell("unshare -rm /bin/sh -c 'mount -t tmpfs -o size=" + size + " tmpfs " + mnt +
                   " || exit 99; " + INGERO_BIN + " demo --db " + mnt +
                   "/t.db > /dev/null; rc=$?; ls -A " + mnt + "; exit $rc'");
    if (r.rc == 99) {
      if (running_in_ci()) FAIL() << "CI=true but no private tmpfs mount: " << r.err;
      GTEST_SKIP() << "*** SKIPPED: cannot mount a tmpfs in a user namespace: " << r.err << " ***";
    }
    EXPECT_EQ(r.rc, 1) << size << ": " << r.err;
    EXPECT_NE(r.err.find(said), std::string::npos) << size << ": " << r.err;
    EXPECT_EQ(r.out, "") << size << ": left on the full disk: " << r.out;
  }
}

TEST_F(OutputFiles, QueryAndExplainIntoAFullStdoutFail) {
  for (const std::string& cmd : {"query " + db_ + " 'SELECT ts_ns, op FROM calls'",
                                 "query --json " + db_ + " 'SELECT ts_ns FROM calls'",
                                 "explain --db " + db_, "explain --json --db " + db_}) {
    auto ok = shell(std::string(INGERO_BIN) + " " + cmd + " > /dev/null");
    EXPECT_EQ(ok.rc, 0) << cmd << ": " << ok.err;
    auto r = shell(std::string(INGERO_BIN) + " " + cmd + " > /dev/full");
    EXPECT_EQ(r.rc, 1) << cmd;
    EXPECT_NE(r.err.find("writing to standard output failed: No space left on device"),
              std::string::npos)
        << cmd << ": " << r.err;
  }
}

// Help that did not reach its reader is a failure too: `query --help > /dev/full` exited 0.
TEST_F(OutputFiles, HelpIntoAFullStdoutFails) {
  for (const std::string flags : {"query --help", "--help", "--help-all", "explain -h"}) {
    auto ok = shell(std::string(INGERO_BIN) + " " + flags + " > /dev/null");
    EXPECT_EQ(ok.rc, 0) << flags << ": " << ok.err;
    auto r = shell(std::string(INGERO_BIN) + " " + flags + " > /dev/full");
    EXPECT_EQ(r.rc, 1) << flags;
    EXPECT_EQ(r.err, "ingero: writing to standard output failed: No space left on device\n")
        << flags;
  }
}

// A standard output closed early (`| head -c 1`) is a write error each command says, exit 1
// (cli.md), not a death by SIGPIPE (141 in a shell with pipefail), which hid it. Each output
// here is larger than a pipe holds, so the write after head has gone always fails.
TEST_F(OutputFiles, AStandardOutputClosedEarlyIsAFailureSaid) {
  for (const std::string& cmd :
       {"query " + db_ + " 'SELECT * FROM calls'", "query --json " + db_ + " 'SELECT * FROM calls'",
        "export --db " + db_ + " -o -", "report --db " + db_ + " -o -"}) {
    std::string out, err;
    run_command({"/bin/bash", "-c",
                 std::string(INGERO_BIN) + " " + cmd +
                     " | head -c 1 > /dev/null; echo \"${PIPESTATUS[0]}\""},
                &out, &err);
    EXPECT_EQ(out, "1\n") << cmd << ": " << err;
    EXPECT_NE(err.find("Broken pipe"), std::string::npos) << cmd << ": " << err;
  }
}

}  // namespace
}  // namespace ingero::test

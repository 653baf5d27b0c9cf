// Issue 37, item 1: files ingero creates beside a trace (the writer's -reserve, the shipper's
// .ship.lock, the report's and merge's temporaries) are opened so that what a user of the
// trace's folder planted there (a symbolic link, a hard link, a FIFO, a file of their own) is
// refused with an error naming it, and nothing it points to is written. `ingero trace` runs as
// root: the repro is root tracing into a user's folder where the user linked
// x.db-reserve to a root-owned file, which became 256 KiB of zeros.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "fleet/shipper.h"
#include "store/file_access.h"
#include "store/sqlite_db.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

constexpr uid_t kOtherUid = 65534;  // nobody
const std::string kFix = " (remove it, or keep the trace in a folder only its owner can write)";

std::string write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Runs argv as uid/gid 65534 (root only).
int as_other_user(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"});
  std::string err;
  int rc = run_command(argv, nullptr, &err);
  EXPECT_EQ(rc, 0) << err;
  return rc;
}

// A folder that belongs to another user, as `mkdir d; chown USER d` in the issue.
std::string other_users_folder(const std::string& name) {
  std::string d = temp_path(name);
  std::filesystem::create_directories(d);
  EXPECT_EQ(chown(d.c_str(), kOtherUid, kOtherUid), 0);
  return d;
}

std::string link_error(const std::string& path) {
  return path + ": is a symbolic link; ingero never follows one to a file it keeps beside a trace" +
         kFix;
}

TEST(PlantedFiles, OpenOwnedFileRefusesWhatAnotherUserCouldPlant) {
  std::string d = temp_path("d");
  std::filesystem::create_directories(d);
  std::string victim = write_text(temp_path("victim"), "precious");

  auto symlink = d + "/link";
  std::filesystem::create_symlink(victim, symlink);
  auto r = store::open_owned_file(symlink);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, link_error(symlink));

  // A dangling link: O_CREAT would have created its target.
  auto dangling = d + "/dangling";
  std::filesystem::create_symlink(d + "/target", dangling);
  r = store::open_owned_file(dangling);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, link_error(dangling));
  EXPECT_FALSE(std::filesystem::exists(d + "/target"));

  // A FIFO: refused at once, not waited on.
  auto fifo = d + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto t0 = std::chrono::steady_clock::now();
  r = store::open_owned_file(fifo);
  ASSERT_FALSE(r);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(
      r.error().message,
      fifo + ": is not a regular file; ingero keeps only its own files beside a trace" + kFix);

  // A hard link to a file elsewhere.
  auto hard = d + "/hard";
  ASSERT_EQ(::link(victim.c_str(), hard.c_str()), 0);
  r = store::open_owned_file(hard);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            hard + ": has 2 hard links; ingero writes only its own files beside a trace" + kFix);
  EXPECT_EQ(read_text(victim), "precious");

  // Its own file is opened and not truncated (the caller truncates after the checks); a
  // missing one is created 0600; `exclusive` refuses an existing one.
  auto own = write_text(d + "/own", "kept");
  r = store::open_owned_file(own);
  ASSERT_TRUE(r) << r.error().message;
  close(*r);
  EXPECT_EQ(read_text(own), "kept");
  r = store::open_owned_file(d + "/new");
  ASSERT_TRUE(r) << r.error().message;
  close(*r);
  EXPECT_EQ(mode_of(d + "/new"), 0600u);
  r = store::open_owned_file(own, true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cannot create " + own + ": File exists");

  // check_owned_file: the same verdicts without opening; a missing file passes.
  EXPECT_EQ(store::check_owned_file(symlink).error().message, link_error(symlink));
  EXPECT_TRUE(store::check_owned_file(d + "/missing"));
  EXPECT_TRUE(store::check_owned_file(own));
}

TEST(PlantedFiles, AFileOfAnotherUserIsRefused) {
  REQUIRE_ROOT();
  std::string d = other_users_folder("d");
  ASSERT_EQ(as_other_user({"/usr/bin/touch", d + "/theirs"}), 0);
  auto r = store::open_owned_file(d + "/theirs");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            d + "/theirs: belongs to uid 65534, not to the user running ingero " +
                "(uid 0); ingero writes only its own files beside a trace" + kFix);
}

// The repro, through the writer `ingero trace` opens (tests/bpf has it through `trace`
// itself): root, a folder of another user, who linked x.db-reserve to a root-owned file.
TEST(PlantedFiles, AReserveLinkedToARootFileIsRefusedAndTheFileKept) {
  REQUIRE_ROOT();
  std::string d = other_users_folder("d");
  std::string victim = write_text(temp_path("victim"), "root's file\n");
  ASSERT_EQ(as_other_user({"/bin/ln", "-s", victim, d + "/x.db-reserve"}), 0);
  std::string before = sha256_file(victim);
  auto w = store::TraceWriter::open(d + "/x.db");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().message, link_error(d + "/x.db-reserve"));
  EXPECT_EQ(sha256_file(victim), before);
  EXPECT_EQ(std::filesystem::file_size(victim), 12u);
  EXPECT_FALSE(std::filesystem::exists(d + "/x.db")) << "refused before the trace was created";

  // An existing trace is refused before its first write: byte-identical, no WAL.
  std::string trace = write_free_calls(d + "/t.db", 100);
  std::string trace_sum = sha256_file(trace);
  ASSERT_EQ(as_other_user({"/bin/ln", "-s", victim, d + "/t.db-reserve"}), 0);
  w = store::TraceWriter::open(trace);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().message, link_error(d + "/t.db-reserve"));
  EXPECT_EQ(sha256_file(trace), trace_sum);
  EXPECT_FALSE(std::filesystem::exists(trace + "-wal"));
  EXPECT_EQ(sha256_file(victim), before);

  // A regular file of theirs is refused as well.
  ASSERT_EQ(as_other_user({"/usr/bin/touch", d + "/y.db-reserve"}), 0);
  w = store::TraceWriter::open(d + "/y.db");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().message, d + "/y.db-reserve: belongs to uid 65534, not to the user running " +
                                   "ingero (uid 0); ingero writes only its own files beside a " +
                                   "trace" + kFix);
}

// The same without root: a link planted beside one's own trace.
TEST(PlantedFiles, AReserveLinkIsRefusedForAnyUser) {
  std::string d = temp_path("d");
  std::filesystem::create_directories(d);
  std::string victim = write_text(temp_path("victim"), "precious");
  std::filesystem::create_symlink(victim, d + "/x.db-reserve");
  auto w = store::TraceWriter::open(d + "/x.db");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().message, link_error(d + "/x.db-reserve"));
  EXPECT_EQ(read_text(victim), "precious");
  // Without the link the reserve is made, 256 KiB, 0600, and removed at the end.
  std::filesystem::remove(d + "/x.db-reserve");
  {
    auto ok = store::TraceWriter::open(d + "/x.db");
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(std::filesystem::file_size(d + "/x.db-reserve"), 256u * 1024);
    EXPECT_EQ(mode_of(d + "/x.db-reserve"), 0600u);
  }
  EXPECT_FALSE(std::filesystem::exists(d + "/x.db-reserve"));
}

// SQLite's own files beside the trace (-wal, -shm, -journal): SQLite opens them with
// O_NOFOLLOW; a link planted at any of them leaves its target as it was.
TEST(PlantedFiles, SqliteFilesBesideTheTraceDoNotFollowLinks) {
  std::string d = temp_path("d");
  std::filesystem::create_directories(d);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    std::string victim = write_text(temp_path(std::string("victim") + suffix), "precious");
    std::string db = d + "/t" + suffix + ".db";
    std::filesystem::create_symlink(victim, db + suffix);
    {
      auto w = store::TraceWriter::open(db);
      if (w) {
        store::SessionInfo si;
        (void)(*w)->begin_session(si);
        (void)(*w)->commit();
      }
    }
    // (SQLite may remove the link, as it removes its own -journal and -wal: the link goes,
    // never its target.)
    EXPECT_EQ(read_text(victim), "precious") << suffix;
    EXPECT_TRUE(std::filesystem::is_regular_file(victim)) << suffix;
  }
}

// helper-73, as filed: a user who may write the trace's folder (a sticky /tmp) planted TRACE-wal,
// kept it open, and read every frame root's tracer then wrote through it; or planted a hot
// TRACE-journal whose pages (a file of theirs, with triggers) root's tracer rolled back into the
// trace and ran. SQLite's files of another user's are refused, before any change and as SQLite
// opens them; so is appending to a trace of another user's, whose owner would read it all.
TEST(PlantedFiles, SqliteFilesOfAnotherUserBesideATraceAreRefused) {
  REQUIRE_ROOT();
  std::string d = other_users_folder("d");
  std::string trace = write_free_calls(d + "/t.db", 100);
  const std::string sum = sha256_file(trace);
  for (const char* side : {"-wal", "-shm", "-journal"}) {
    SCOPED_TRACE(side);
    ASSERT_EQ(as_other_user({"/usr/bin/touch", trace + side}), 0);
    auto w = store::TraceWriter::open(trace);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().message, trace + side +
                                     ": belongs to uid 65534, not to the user running ingero "
                                     "(uid 0); ingero writes only its own files beside a trace" +
                                     kFix);
    EXPECT_EQ(sha256_file(trace), sum);
    std::filesystem::remove(trace + side);
  }
  // Planted after ingero looked, before SQLite opens it: refused as SQLite opens it, and
  // nothing is written through it. (A trace whose session ended is in rollback mode; one being
  // written, or left by a killed tracer, is in WAL mode.)
  {
    auto db = store::Db::open(trace, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(db) << db.error().message;
    ASSERT_TRUE((*db)->exec("PRAGMA journal_mode = WAL"));
  }
  ASSERT_FALSE(std::filesystem::exists(trace + "-wal"));
  const std::string wal_sum = sha256_file(trace);
  ASSERT_EQ(as_other_user({"/usr/bin/touch", trace + "-wal"}), 0);
  ASSERT_EQ(chmod((trace + "-wal").c_str(), 0666), 0);
  {
    auto db = store::Db::open(trace, store::Db::Mode::kReadWrite);
    bool wrote = db && (*db)->exec("PRAGMA user_version = 7");
    EXPECT_FALSE(wrote);
  }
  EXPECT_EQ(std::filesystem::file_size(trace + "-wal"), 0u);
  EXPECT_EQ(sha256_file(trace), wal_sum);
  std::filesystem::remove(trace + "-wal");
  std::filesystem::remove(trace + "-shm");
  // A trace of another user's.
  ASSERT_EQ(chown(trace.c_str(), kOtherUid, kOtherUid), 0);
  auto w = store::TraceWriter::open(trace);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().message, trace +
                                   ": belongs to uid 65534, not to the user running ingero (uid "
                                   "0); its owner would read what this trace records (give --db "
                                   "a file of your own)");
  EXPECT_EQ(sha256_file(trace), wal_sum);
}

TEST(PlantedFiles, TheShippingLockIsNotFollowed) {
  std::string db = write_free_calls(temp_path("t.db"), 10);
  std::string victim = write_text(temp_path("victim"), "precious");
  std::filesystem::create_symlink(victim, db + ".ship.lock");
  auto ep = fleet::parse_endpoint("http://127.0.0.1:9/ingero");
  ASSERT_TRUE(ep);
  auto s = fleet::Shipper::create(db, *ep);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "the shipping lock: " + link_error(db + ".ship.lock"));
  EXPECT_EQ(read_text(victim), "precious");
  // Its own lock: created 0600 and locked.
  std::filesystem::remove(db + ".ship.lock");
  auto ok = fleet::Shipper::create(db, *ep);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(mode_of(db + ".ship.lock"), 0600u);
}

// `report -o FILE` wrote FILE.tmp through whatever was there, then renamed it.
TEST(PlantedFiles, TheReportWritesNoFixedTemporaryName) {
  std::string db = write_free_calls(temp_path("t.db"), 100);
  std::string victim = write_text(temp_path("victim"), "precious");
  std::string out = temp_path("report.html");
  std::filesystem::create_symlink(victim, out + ".tmp");
  std::string err;
  ASSERT_EQ(run_command({INGERO_BIN, "report", "--db", db, "-o", out}, nullptr, &err), 0) << err;
  EXPECT_EQ(read_text(victim), "precious");
  EXPECT_TRUE(std::filesystem::is_regular_file(out));
  EXPECT_FALSE(std::filesystem::is_symlink(out));
  EXPECT_EQ(mode_of(out), 0600u);
  EXPECT_NE(read_text(out).find("<html"), std::string::npos);
  // The input trace itself is never the output.
  EXPECT_EQ(run_command({INGERO_BIN, "report", "--db", db, "-o", db}, nullptr, &err), 2);
  EXPECT_NE(err.find(db + ": is the input " + db + ";"), std::string::npos) << err;
}

// export --format sqlite made its copy at ".OUT.export-PID" beside OUT: a user who can write
// that folder planted a link there (PID is the exec'ing shell's own), root's copy went through
// it into the link's target, and OUT became the link; under umask 022 the copy was 0644. It
// is made in a folder of its own (mkdtemp) now, as 0600, and the folder goes.
TEST(PlantedFiles, ASqliteExportWritesNoFixedTemporaryNameAndIsPrivate) {
  std::string db = write_free_calls(temp_path("t.db"), 100);
  std::string victim = write_text(temp_path("victim"), "");
  std::string dir = temp_path("shared");
  std::filesystem::create_directories(dir);
  std::string out = dir + "/out.db", err;
  ASSERT_EQ(
      run_command({"/bin/sh", "-c",
                   "umask 022; ln -s '" + victim + "' '" + dir + "/.out.db.export-'$$; exec '" +
                       INGERO_BIN + "' export --format sqlite --db '" + db + "' -o '" + out + "'"},
                  nullptr, &err),
      0)
      << err;
  EXPECT_EQ(read_text(victim), "");
  EXPECT_FALSE(std::filesystem::is_symlink(out));
  EXPECT_EQ(mode_of(out), 0600u);
  EXPECT_EQ(query_int(out, "SELECT count(*) FROM events"), 100);
  size_t left = 0;  // the planted link, and nothing of the copy's
  for (const auto& e : std::filesystem::directory_iterator(dir)) left += e.path() != out;
  EXPECT_EQ(left, 1u);
}

}  // namespace
}  // namespace ingero::test

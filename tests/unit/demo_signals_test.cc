// Ctrl-C (or SIGTERM, SIGHUP) at any moment of `ingero demo`: its private folder goes, and a
// --db file is either whole (the demo had ended its session) or gone. 27 SIGINTs of 30 left
// /tmp/ingero-demo-XXXXXX behind, with the trace and SQLite's files in it; a --db file was left
// half-written and read as a normal trace.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(DemoSignals, ASignalAtAnyMomentLeavesNoFolderAndNoHalfFile) {
  const std::string tmp = temp_path("demo-tmpdir");
  std::filesystem::create_directories(tmp);
  int killed = 0;
  for (int ms : {5, 15, 30, 45, 60}) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      const std::string db =
          temp_path("demo-" + std::to_string(ms) + "-" + std::to_string(sig) + ".db");
      for (bool own : {false, true}) {
        std::vector<std::string> argv = {INGERO_BIN, "demo"};
        if (own) argv.insert(argv.end(), {"--db", db});
        auto p = Subprocess::spawn(argv, {"TMPDIR=" + tmp});
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        p.signal(sig);
        int rc = p.wait();
        if (rc != 0) ++killed;
        EXPECT_TRUE(std::filesystem::is_empty(tmp)) << ms << " ms, signal " << sig;
        if (own && std::filesystem::exists(db)) {
          EXPECT_EQ(query_rows(db, "SELECT exit_reason FROM sessions")[0][0], "demo") << db;
        }
        for (const char* s : {"-journal", "-wal", "-shm", "-reserve"})
          EXPECT_FALSE(std::filesystem::exists(db + s)) << db << s;
      }
    }
  }
  EXPECT_GT(killed, 0);  // some signal came while it ran
  // The folder is made under $TMPDIR (SIGKILL, which nothing can catch, leaves it there): the
  // checks above looked where it is. Killed once the folder is there, not after a fixed time:
  // on a slow host the demo had made nothing 40 ms in.
  auto p = Subprocess::spawn({INGERO_BIN, "demo"}, {"TMPDIR=" + tmp});
  for (int i = 0; i < 2000 && std::filesystem::is_empty(tmp); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  p.signal(SIGKILL);
  p.wait();
  EXPECT_FALSE(std::filesystem::is_empty(tmp));
}

}  // namespace
}  // namespace ingero::test

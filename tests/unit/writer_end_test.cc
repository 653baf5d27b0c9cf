// The end of a trace while a reader still reads it (a report or an export of it holds a read
// transaction): finish() waits for the reader, a bounded time, to fold the log into the file;
// past the bound it leaves the log beside the file and says so. Before, the checkpoint gave up
// after SQLite's 5 s busy timeout without a word, and the file copied alone read as empty.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

// A trace of 100 calls, committed and not finished.
std::unique_ptr<TraceWriter> hundred_calls(const std::string& path) {
  auto w = TraceWriter::open(path);
  EXPECT_TRUE(w) << w.error().message;
  SessionInfo si;
  si.node = "node-e";
  EXPECT_TRUE((*w)->begin_session(si));
  for (int i = 0; i < 100; ++i)
    EXPECT_TRUE((*w)->add(test::runtime_call(1000 + uint64_t(i) * 1000, 10, 42, 42,
                                             hal::EventKind::kAlloc, "cudaMalloc")));
  EXPECT_TRUE((*w)->commit_all());
  return std::move(*w);
}

// A reader in a read transaction, as a report holds one.
sqlite3* reading(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "BEGIN; SELECT count(*) FROM sessions;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  return db;
}

TEST(WriterEnd, AReaderThatLetsGoInTimeLeavesTheFileWhole) {
  std::string path = test::temp_path("end.db"), alone = test::temp_path("alone.db");
  auto w = hundred_calls(path);
  sqlite3* reader = reading(path);
  // Past SQLite's 5 s busy timeout, which the end gave up after.
  std::thread lets_go([reader] {
    std::this_thread::sleep_for(std::chrono::seconds(6));
    sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  });
  ASSERT_TRUE(w->finish({}));
  lets_go.join();
  sqlite3_close(reader);
  EXPECT_FALSE(w->left_in_wal());
  // The file alone holds the whole trace.
  std::filesystem::copy_file(path, alone);
  EXPECT_EQ(test::query_int(alone, "SELECT count(*) FROM events"), 100);
}

TEST(WriterEnd, AReaderPastTheBoundLeavesTheLogBesideTheFileAndItIsSaid) {
  std::string path = test::temp_path("end.db");
  auto w = hundred_calls(path);
  sqlite3* reader = reading(path);
  w->set_end_wait_ms(300);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(w->finish({}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_TRUE(w->left_in_wal());
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(reader);
  EXPECT_GT(std::filesystem::file_size(path + "-wal"), 0u);
  // The two together hold it.
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM events"), 100);
}

}  // namespace
}  // namespace ingero::store

// A COMMIT that fails (a full disk) takes back the per-second summaries it would have written:
// the next batch writes them, so every call committed before stays counted in call_seconds.
// The disk is a VFS over SQLite's default one whose next writes fail with SQLITE_FULL on demand.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>

#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

class FullDisk {
 public:
  FullDisk() {
    base_ = sqlite3_vfs_find(nullptr);
    vfs_ = *base_;
    vfs_.iVersion = 2;
    vfs_.szOsFile = int(sizeof(File)) + base_->szOsFile;
    vfs_.zName = "ingero_full_disk";
    vfs_.pNext = nullptr;
    vfs_.xOpen = open;
    vfs_.xDelete = [](sqlite3_vfs*, const char* n, int s) { return base_->xDelete(base_, n, s); };
    vfs_.xAccess = [](sqlite3_vfs*, const char* n, int f, int* r) {
      return base_->xAccess(base_, n, f, r);
    };
    vfs_.xFullPathname = [](sqlite3_vfs*, const char* n, int k, char* out) {
      return base_->xFullPathname(base_, n, k, out);
    };
    vfs_.xSetSystemCall = nullptr;
    vfs_.xGetSystemCall = nullptr;
    vfs_.xNextSystemCall = nullptr;
    EXPECT_EQ(sqlite3_vfs_register(&vfs_, 1), SQLITE_OK);
  }
  ~FullDisk() {
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(base_, 1);
  }
  static inline int failing_writes = 0;  // the next writes that fail

 private:
  struct File {
    sqlite3_file head;
    sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
  };
  static sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<File*>(f)->real(); }
  static const sqlite3_io_methods* base_io(sqlite3_file* f) { return real(f)->pMethods; }

  static int open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out) {
    f->pMethods = nullptr;
    int rc = base_->xOpen(base_, name, real(f), flags, out);
    if (rc != SQLITE_OK) return rc;
    if (!io_.xClose) make_io(base_io(f)->iVersion);
    f->pMethods = &io_;
    return SQLITE_OK;
  }
  // Every method is the real file's, but writes fail while the disk is full.
  static void make_io(int version) {
    io_.iVersion = std::min(version, 2);
    io_.xClose = [](sqlite3_file* f) { return base_io(f)->xClose(real(f)); };
    io_.xRead = [](sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
      return base_io(f)->xRead(real(f), b, n, o);
    };
    io_.xWrite = [](sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
      if (failing_writes > 0) {
        --failing_writes;
        return SQLITE_FULL;
      }
      return base_io(f)->xWrite(real(f), b, n, o);
    };
    io_.xTruncate = [](sqlite3_file* f, sqlite3_int64 s) {
      return base_io(f)->xTruncate(real(f), s);
    };
    io_.xSync = [](sqlite3_file* f, int fl) { return base_io(f)->xSync(real(f), fl); };
    io_.xFileSize = [](sqlite3_file* f, sqlite3_int64* s) {
      return base_io(f)->xFileSize(real(f), s);
    };
    io_.xLock = [](sqlite3_file* f, int l) { return base_io(f)->xLock(real(f), l); };
    io_.xUnlock = [](sqlite3_file* f, int l) { return base_io(f)->xUnlock(real(f), l); };
    io_.xCheckReservedLock = [](sqlite3_file* f, int* r) {
      return base_io(f)->xCheckReservedLock(real(f), r);
    };
    io_.xFileControl = [](sqlite3_file* f, int op, void* a) {
      return base_io(f)->xFileControl(real(f), op, a);
    };
    io_.xSectorSize = [](sqlite3_file* f) { return base_io(f)->xSectorSize(real(f)); };
    io_.xDeviceCharacteristics = [](sqlite3_file* f) {
      return base_io(f)->xDeviceCharacteristics(real(f));
    };
    io_.xShmMap = [](sqlite3_file* f, int i, int sz, int ext, void volatile** p) {
      return base_io(f)->xShmMap(real(f), i, sz, ext, p);
    };
    io_.xShmLock = [](sqlite3_file* f, int o, int n, int fl) {
      return base_io(f)->xShmLock(real(f), o, n, fl);
    };
    io_.xShmBarrier = [](sqlite3_file* f) { base_io(f)->xShmBarrier(real(f)); };
    io_.xShmUnmap = [](sqlite3_file* f, int d) { return base_io(f)->xShmUnmap(real(f), d); };
  }

  static inline sqlite3_vfs* base_ = nullptr;
  static inline sqlite3_io_methods io_{};
  sqlite3_vfs vfs_{};
};

constexpr int64_t kStart = 1'800'000'000'000'000'000;
constexpr uint64_t kMs = 1'000'000;

hal::Event launch(uint64_t ts) {
  hal::Event e;
  e.ts_ns = ts;
  e.dur_ns = 5000;
  e.pid = e.tid = 10;
  e.set_comm("python3");
  e.vendor = "nvidia";
  e.api = "cuda_runtime";
  e.op = "cudaLaunchKernel";
  e.kind = hal::EventKind::kLaunch;
  e.has_ret = true;
  return e;
}

// A session of 20 calls in seconds 0 and 1, committed. Their seconds are written once
// complete: 2 s behind the newest call.
void twenty_calls(const std::string& path, std::unique_ptr<TraceWriter>& w) {
  auto opened = TraceWriter::open(path);
  ASSERT_TRUE(opened) << opened.error().message;
  w = std::move(*opened);
  SessionInfo si;
  si.node = si.host = "n";
  si.started_at_ns = si.mono_offset_ns = kStart;
  ASSERT_TRUE(w->begin_session(si));
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(w->add(launch(i * 100 * kMs)));
  ASSERT_TRUE(w->commit());
}

TEST(CallSummaries, AFailedCommitWritesItsSecondsWithTheNextBatch) {
  std::string path = test::temp_path("failed-commit.db");
  FullDisk disk;
  std::unique_ptr<TraceWriter> w;
  ASSERT_NO_FATAL_FAILURE(twenty_calls(path, w));
  // A call at 5 s completes them: this batch writes them, and its COMMIT finds the disk full.
  ASSERT_TRUE(w->add(launch(5000 * kMs)));
  FullDisk::failing_writes = 1;
  auto failed = w->commit();
  ASSERT_FALSE(failed);
  EXPECT_EQ(FullDisk::failing_writes, 0);
  EXPECT_EQ(w->failed(), 1u);
  // The next batch writes them again.
  ASSERT_TRUE(w->add(launch(6000 * kMs)));
  ASSERT_TRUE(w->commit());
  SessionEnd end;
  end.stopped_at_ns = kStart + 7000 * int64_t(kMs);
  ASSERT_TRUE(w->finish(end));
  w.reset();
  const std::string before_2s =
      " WHERE timestamp < " + std::to_string(kStart + 2000 * int64_t(kMs));
  EXPECT_EQ(test::query_int(path, "SELECT sum(calls) FROM call_seconds" + before_2s), 20);
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM calls WHERE ts_ns < " +
                                      std::to_string(kStart + 2000 * int64_t(kMs))),
            20);
  // The call at 5 s lost its row with its batch (the session counts it); the summaries count
  // every call traced, it included.
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM calls"), 21);
  EXPECT_EQ(test::query_int(path, "SELECT store_errors FROM sessions"), 1);
  EXPECT_EQ(test::query_int(path, "SELECT sum(calls) FROM call_seconds"), 22);
  // Readers, which check the calls they read against the summaries, take the lost row for
  // the loss the session reports, not for a damaged file.
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader) << reader.error().message;
  SqlTraceSource source(**reader);
  uint64_t calls = 0;
  source.calls({}, [&](const hal::Event&) { ++calls; });
  EXPECT_EQ(source.error(), "");
  EXPECT_EQ(calls, 21u);
}

// The session's end writes every second left; when that COMMIT fails, the seconds go into the
// space the writer set aside at open, with the session row.
TEST(CallSummaries, SecondsTheEndCouldNotCommitGoIntoTheReserve) {
  std::string path = test::temp_path("failed-end.db");
  FullDisk disk;
  std::unique_ptr<TraceWriter> w;
  ASSERT_NO_FATAL_FAILURE(twenty_calls(path, w));
  ASSERT_TRUE(std::filesystem::exists(path + "-reserve"));
  FullDisk::failing_writes = 1;
  SessionEnd end;
  end.stopped_at_ns = kStart + 3000 * int64_t(kMs);
  EXPECT_FALSE(w->finish(end));  // a write failed, and says so
  EXPECT_EQ(FullDisk::failing_writes, 0);
  w.reset();
  EXPECT_FALSE(std::filesystem::exists(path + "-reserve"));
  EXPECT_EQ(test::query_int(path, "SELECT sum(calls) FROM call_seconds"), 20);
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM calls"), 20);
  EXPECT_EQ(test::query_int(path, "SELECT stopped_at FROM sessions"), end.stopped_at_ns);
}

}  // namespace
}  // namespace ingero::store

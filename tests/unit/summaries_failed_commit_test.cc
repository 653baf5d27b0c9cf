// A COMMIT that fails (a full disk) takes back the per-second summaries it would have written:
// the next batch writes them, so every call committed before stays counted in call_seconds.
// The disk: tests/support/full_disk.h.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>

#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/full_disk.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

using test::FullDisk;

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

// Ops are named in a dictionary whose rows a failed COMMIT takes back with its batch: the
// writer forgets the ids it handed out then, memos included, and names them again in the next
// batch. A launch renamed after its runtime names two ops a call (its own, and the driver's it
// made), as ingero's launches do once the runtime's probes are detached.
TEST(CallSummaries, OpsNamedInAFailedBatchAreNamedAgainInTheNext) {
  std::string path = test::temp_path("failed-ops.db");
  FullDisk disk;
  std::unique_ptr<TraceWriter> w;
  ASSERT_NO_FATAL_FAILURE(twenty_calls(path, w));
  auto renamed = [](uint64_t ts) {
    hal::Event e = launch(ts);
    e.op = "cudaLaunchKernelExC";
    e.nested = 1;
    e.nested_api = "cuda_driver";
    e.nested_op = "cuLaunchKernelEx";
    e.nested_kind = hal::EventKind::kLaunch;
    return e;
  };
  ASSERT_TRUE(w->add(renamed(3000 * kMs)));
  ASSERT_TRUE(w->add(renamed(3001 * kMs)));
  FullDisk::failing_writes = 1;
  ASSERT_FALSE(w->commit());
  EXPECT_EQ(FullDisk::failing_writes, 0);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(w->add(renamed((4000 + i) * kMs)));
  ASSERT_TRUE(w->commit());
  SessionEnd end;
  end.stopped_at_ns = kStart + 5000 * int64_t(kMs);
  ASSERT_TRUE(w->finish(end));
  w.reset();
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM calls"), 23);
  EXPECT_EQ(test::query_int(path,
                            "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernelExC' "
                            "AND nested_op = 'cuLaunchKernelEx'"),
            3);
}

}  // namespace
}  // namespace ingero::store

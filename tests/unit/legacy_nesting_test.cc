// A call made inside another traced call is one call: our tracer folds a runtime call's driver
// call into it (nested_calls), so one launch is one row. The original implementation stored
// both, so its files read through `calls` counted each such launch twice (the launch rate of
// the vLLM file read 50/s where its engine made 40). Its files are now read the way ours are
// written (store/legacy_views.h), the file's own `events` unchanged; and `ingero merge` carries
// the folded calls of either kind of file (it dropped nested_calls of our own files).
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/analysis.h"
#include "store/sql_trace_source.h"
#include "store/sqlite_db.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

const std::string kDir = INGERO_FIXTURES_DIR "/ingero-go/";
using Rows = std::vector<std::vector<std::string>>;

// A file of the original implementation's 0.9 schema (nodes) holding only `values` as events
// (timestamp, duration, node, pid, tid, source, op): the node file's tables, its events
// replaced.
std::string planted_legacy_file(const std::string& name, const std::string& values) {
  std::string path = test::temp_path(name);
  std::filesystem::copy_file(kDir + "sample-gpu-node-01.db", path,
                             std::filesystem::copy_options::overwrite_existing);
  auto db = Db::open(path, Db::Mode::kReadWrite);
  EXPECT_TRUE(db) << db.error().message;
  EXPECT_TRUE(
      (*db)->exec("DELETE FROM events; INSERT INTO events (id, timestamp, duration, node, "
                  "pid, tid, source, op) VALUES " +
                  values));
  return path;
}

TEST(LegacyNesting, ADriverCallWithinARuntimeCallOfItsThreadIsCountedInIt) {
  // Sources: 1 the runtime (3 cudaLaunchKernel, 6 cudaDeviceSync), 4 the driver
  // (1 cuLaunchKernel, 4 cuCtxSynchronize). Rows are not in time order.
  std::string f = planted_legacy_file(
      "planted.db",
      "('a:1', 1000, 100, 'a', 10, 11, 1, 3),"    // runtime launch [1000, 1100]
      "('a:2', 900, 50, 'a', 10, 11, 4, 1),"      // before any runtime call: its own
      "('a:3', 1010, 50, 'a', 10, 11, 4, 1),"     // inside a:1
      "('a:4', 1070, 100, 'a', 10, 11, 4, 1),"    // ends after a:1: its own
      "('a:5', 1020, 10, 'a', 10, 12, 4, 1),"     // another thread: its own
      "('b:1', 1030, 10, 'b', 10, 11, 4, 1),"     // another node's same pid and tid: its own
      "('a:6', 2000, 500, 'a', 10, 11, 1, 6),"    // runtime sync [2000, 2500]
      "('a:7', 2100, 100, 'a', 10, 11, 4, 4),"    // inside a:6, second
      "('a:8', 2050, 10, 'a', 10, 11, 4, 1),"     // inside a:6, first
      "('a:9', 3000, 10, 'a', 10, 11, 4, 1),"     // begins and ends with a:10: inside it
      "('a:10', 3000, 10, 'a', 10, 11, 1, 3),"    // runtime launch
      "('a:11', 4000, 100, 'a', 10, 11, 1, 3),"   // runtime launch [4000, 4100]
      "('a:12', 4200, -150, 'a', 10, 11, 4, 1),"  // after a:11 ended, though it 'ends' at 4050
      "('a:13', 5000, 1000, 'a', 10, 11, 1, 6),"  // runtime sync [5000, 6000]
      "('a:14', 5100, 100, 'a', 10, 11, 1, 3),"   // a runtime launch inside it [5100, 5200]
      "('a:15', 5120, 30, 'a', 10, 11, 4, 1),"    // inside a:14, the innermost
      "('a:16', 5500, 100, 'a', 10, 11, 4, 4)");  // after a:14 ended, inside a:13
  EXPECT_EQ(test::query_rows(f,
                             "SELECT ts_ns, node, tid, op, nested_calls, nested_op FROM calls "
                             "ORDER BY ts_ns, node, tid"),
            (Rows{{"900", "a", "11", "cuLaunchKernel", "0", "NULL"},
                  {"1000", "a", "11", "cudaLaunchKernel", "1", "cuLaunchKernel"},
                  {"1020", "a", "12", "cuLaunchKernel", "0", "NULL"},
                  {"1030", "b", "11", "cuLaunchKernel", "0", "NULL"},
                  {"1070", "a", "11", "cuLaunchKernel", "0", "NULL"},
                  {"2000", "a", "11", "cudaDeviceSync", "2", "cuLaunchKernel"},
                  {"3000", "a", "11", "cudaLaunchKernel", "1", "cuLaunchKernel"},
                  {"4000", "a", "11", "cudaLaunchKernel", "0", "NULL"},
                  {"4200", "a", "11", "cuLaunchKernel", "0", "NULL"},
                  {"5000", "a", "11", "cudaDeviceSync", "1", "cuCtxSynchronize"},
                  {"5100", "a", "11", "cudaLaunchKernel", "1", "cuLaunchKernel"}}));
  EXPECT_EQ(test::query_int(f, "SELECT count(*) FROM events"), 17);  // the file's own: as it was
  auto r = TraceReader::open(f);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)->legacy_nested_calls(), 6);
  EXPECT_EQ((*r)->legacy_nested_calls(std::string("a"), 2000, 3000), 3);  // a window of a node
  EXPECT_EQ((*r)->legacy_nested_calls(std::string("b"), INT64_MIN, INT64_MAX), 0);
  // A second connection (the engine's host reads) is given the same fold.
  auto again = (*r)->reopen();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ((*again)->legacy_nested_calls(), 6);
  EXPECT_EQ(test::query_int(f, "SELECT count(*) FROM calls"), 11);
  // explain says the folded calls of the node it explains.
  for (auto [node, says] : {std::pair{"a", true}, std::pair{"b", false}}) {
    std::string out, err;
    ASSERT_EQ(test::run_command({INGERO_BIN, "explain", "--db", f, "--node", node}, &out, &err), 0)
        << err;
    EXPECT_EQ(out.find("ingero-go schema 0.9 (read-only): 6 driver calls made inside runtime "
                       "calls are counted in them") != std::string::npos,
              says)
        << node << "\n"
        << out;
  }
}

// A file whose calls cannot be folded (its events table has no rowid) still opens, nothing
// folded: it used to be refused at open ("no such column: rowid").
TEST(LegacyNesting, AFileWhoseCallsCannotBeFoldedStillOpens) {
  std::string path = test::temp_path("without-rowid.db");
  std::filesystem::copy_file(kDir + "sample-gpu-node-01.db", path,
                             std::filesystem::copy_options::overwrite_existing);
  {
    auto db = Db::open(path, Db::Mode::kReadWrite);
    ASSERT_TRUE(db) << db.error().message;
    auto create = (*db)->query_text("SELECT sql FROM sqlite_master WHERE name = 'events'");
    ASSERT_TRUE(create && *create);
    ASSERT_TRUE((*db)->exec("ALTER TABLE events RENAME TO events_old; " + **create +
                            " WITHOUT ROWID; INSERT INTO events SELECT * FROM events_old; "
                            "DROP TABLE events_old;"));
  }
  auto r = TraceReader::open(path);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)->legacy_nested_calls(), 0);
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM events"), 200);
}

TEST(LegacyNesting, TheVllmEnginesLaunchesAreCountedOnce) {
  const std::string f = kDir + "vllm-37343-logprobs-amplification.db";
  // Independently of the reader: driver calls within a runtime call of their thread, by a join.
  const int64_t inside = test::query_int(
      f,
      "SELECT count(*) FROM events d JOIN events r ON r.pid = d.pid AND r.tid = d.tid AND "
      "r.source = 1 AND d.source = 4 AND d.timestamp >= r.timestamp AND "
      "d.timestamp + d.duration <= r.timestamp + r.duration");
  EXPECT_EQ(inside, 445);  // 435 cuLaunchKernel, 10 cuCtxSynchronize
  auto r = TraceReader::open(f);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)->legacy_nested_calls(), inside);
  EXPECT_EQ(test::query_rows(f,
                             "SELECT op, count(*), sum(nested_calls) FROM calls "
                             "WHERE kind = 'launch' GROUP BY op ORDER BY op"),
            (Rows{{"cuLaunchKernel", "1237", "0"}, {"cudaLaunchKernel", "550", "435"}}));
  // The engine's launches: 550 + 1,672 - 435, not 2,222.
  SqlTraceSource src(**r);
  auto a = engine::analyze(src, engine::Window{});
  uint64_t launches = 0;
  for (const auto& s : a.stats.overall)
    if (s.key.kind == hal::EventKind::kLaunch) launches += s.count;
  EXPECT_EQ(launches, 1787u);
  // explain says so under the format.
  std::string out;
  ASSERT_EQ(test::run_command({INGERO_BIN, "explain", "--db", f}, &out), 0);
  EXPECT_NE(out.find("ingero-go schema 0.8 (read-only): 445 driver calls made inside runtime "
                     "calls are counted in them, as ingero records them (one launch is one row; "
                     "the file's own `events` table keeps both)\n"),
            std::string::npos)
      << out;
}

// Our own file with launches that entered the driver: merge keeps what was folded into them.
TEST(LegacyNesting, MergeCarriesTheCallsFoldedIntoACall) {
  std::string in = test::temp_path("nested.db");
  {
    auto w = TraceWriter::open(in);
    ASSERT_TRUE(w) << w.error().message;
    SessionInfo si;
    si.node = "n1";
    si.host = "n1";
    si.started_at_ns = 1'775'218'715'000'000'000;
    ASSERT_TRUE((*w)->begin_session(si));
    for (int i = 0; i < 3; ++i) {
      hal::Event e = test::runtime_call(uint64_t(i + 1) * 1000, 100, 42, 42,
                                        hal::EventKind::kLaunch, "cudaLaunchKernel");
      e.nested = uint32_t(i);
      if (i) {
        e.nested_api = "cuda_driver";
        e.nested_op = "cuLaunchKernel";
        e.nested_kind = hal::EventKind::kLaunch;
      }
      ASSERT_TRUE((*w)->add(e));
    }
    SessionEnd end;
    end.stopped_at_ns = si.started_at_ns + 1'000'000;
    ASSERT_TRUE((*w)->finish(end));
  }
  const char* q = "SELECT ts_ns, op, nested_calls, nested_op FROM calls ORDER BY ts_ns";
  const Rows want = {{"1000", "cudaLaunchKernel", "0", "NULL"},
                     {"2000", "cudaLaunchKernel", "1", "cuLaunchKernel"},
                     {"3000", "cudaLaunchKernel", "2", "cuLaunchKernel"}};
  ASSERT_EQ(test::query_rows(in, q), want);
  std::string out = test::temp_path("merged-nested.db"), err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", in, "-o", out}, nullptr, &err), 0) << err;
  auto rows = test::query_rows(out, q);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i)  // merged times are wall clock
    EXPECT_EQ(std::vector<std::string>(rows[i].begin() + 1, rows[i].end()),
              std::vector<std::string>(want[i].begin() + 1, want[i].end()));
  // The original implementation's file: the folded driver calls go into the merged file as
  // ours records them, and merge says how many.
  std::string legacy = test::temp_path("merged-vllm.db");
  const std::string f = kDir + "vllm-37343-logprobs-amplification.db";
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", f, "-o", legacy}, nullptr, &err), 0) << err;
  EXPECT_NE(err.find(f + ": 445 driver calls made inside runtime calls are counted in them "
                         "(nested_calls), as ingero records them\n"),
            std::string::npos)
      << err;
  const char* by_op =
      "SELECT op, nested_op, count(*), sum(nested_calls) FROM calls GROUP BY 1, 2 ORDER BY 1, 2";
  EXPECT_EQ(test::query_rows(legacy, by_op), test::query_rows(f, by_op));
  EXPECT_EQ(test::query_int(legacy, "SELECT count(*) FROM events"), 10869 - 445);
  // A file whose dictionary does not name its driver ops: the folded calls go in all the same,
  // under the names the view gives them ('op1').
  std::string unnamed = test::temp_path("unnamed-driver-ops.db");
  std::filesystem::copy_file(f, unnamed, std::filesystem::copy_options::overwrite_existing);
  {
    auto db = Db::open(unnamed, Db::Mode::kReadWrite);
    ASSERT_TRUE(db) << db.error().message;
    ASSERT_TRUE((*db)->exec("DELETE FROM ops WHERE source_id = 4"));
  }
  std::string merged = test::temp_path("merged-unnamed.db");
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", unnamed, "-o", merged}, nullptr, &err), 0)
      << err;
  EXPECT_EQ(test::query_rows(merged,
                             "SELECT op, nested_op, sum(nested_calls) FROM calls WHERE "
                             "nested_calls > 0 GROUP BY 1, 2 ORDER BY 1, 2"),
            (Rows{{"cudaDeviceSync", "op4", "10"}, {"cudaLaunchKernel", "op1", "435"}}));
}

}  // namespace
}  // namespace ingero::store

// A damaged time index is an error, never a short answer. Reads of a window find its blocks of
// calls along the blocks' time index (idx_call_store_ts; files of schema 9 and before walk the
// rows' idx_events_timestamp); a leaf page of it that lost entries leaves a file SQLite reads
// without complaint, and the walk skips them: explain answered 38,340 of resnet-clean's 103,920
// events with exit 0. The calls read are now checked against the per-second summaries
// (store/call_count_check.h), or, in a file written before them, against a count of the rows
// along the table. And what may rightly differ is not damage: seconds before a retention cut,
// folded runs spread across a second's edge.
#include <gtest/gtest.h>

#include <filesystem>

#include "app/builtin_backends.h"
#include "store/compact.h"
#include "store/retention.h"
#include "store/sql_trace_source.h"
#include "store/tiers.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

constexpr int64_t kBase = 1'700'000'000'000'000'000;  // a whole second, wall clock
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;

// 10 s of cudaFree calls: pid 100 every 100 us, pid 200 every 1 ms, from 250 ms on.
constexpr int64_t kCalls100 = 100'000, kCalls200 = 10'000;
std::string ten_seconds(const std::string& path) {
  auto w = store::TraceWriter::open(path);
  EXPECT_TRUE(w) << (w ? "" : w.error().message);
  if (!w) return path;
  // Blocks of 25 calls: 4,400 entries in the blocks' time index, over several of its pages.
  (*w)->set_block_rows(25);
  store::SessionInfo si;
  si.node = "gpu-node-01";
  si.mono_offset_ns = kBase;
  EXPECT_TRUE((*w)->begin_session(si));
  for (int64_t i = 0; i < kCalls100; ++i) {
    int64_t ts = 250 * kMs + i * 100'000;
    EXPECT_TRUE(
        (*w)->add(runtime_call(uint64_t(ts), 700, 100, 101, hal::EventKind::kFree, "cudaFree")));
    if (i % 10 == 0) {
      EXPECT_TRUE((*w)->add(
          runtime_call(uint64_t(ts + 50'000), 900, 200, 201, hal::EventKind::kFree, "cudaFree")));
    }
  }
  store::SessionEnd end;
  end.exit_reason = "test";
  EXPECT_TRUE((*w)->finish(end));
  return path;
}

const std::string& intact() {
  // Beside the tests' own folders: it outlives the test that wrote it.
  static const std::string path = ten_seconds(scratch_root() + "/intact-10s.db");
  return path;
}

std::string damaged(const std::string& name, int64_t* dropped = nullptr) {
  std::string path = temp_path(name);
  std::filesystem::copy_file(intact(), path, std::filesystem::copy_options::overwrite_existing);
  int64_t n = drop_index_entries(path, "idx_call_store_ts");
  if (dropped) *dropped = n;
  return path;
}

struct Read {
  uint64_t calls = 0;
  std::string error;
};
Read read_calls(const std::string& db, const engine::Window& w = {}) {
  Read r;
  auto reader = store::TraceReader::open(db, app::builtin_views());
  EXPECT_TRUE(reader) << (reader ? "" : reader.error().message);
  if (!reader) return r;
  store::SqlTraceSource source(**reader);
  source.calls(w, [&](const hal::Event&) { ++r.calls; });
  r.error = source.error();
  return r;
}

using Run = IngeroRun;
IngeroRun ingero(const std::vector<std::string>& args) { return run_ingero(args); }

// The calls of the blocks listed along the blocks' time index, or along the table.
std::string count_along(const std::string& db, const char* how) {
  return std::to_string(query_int(
      db, std::string("SELECT sum(calls) FROM main.call_store ") + how + " WHERE first_ts > 0"));
}

TEST(DamagedIndex, TheDamageIsSilentToSqlite) {
  int64_t dropped = 0;
  std::string db = damaged("silent.db", &dropped);
  ASSERT_GT(dropped, 10);
  std::string all = std::to_string(kCalls100 + kCalls200);
  EXPECT_EQ(count_along(intact(), "INDEXED BY idx_call_store_ts"), all);
  // Along the index the entries are gone, and no error says so; the table has every block.
  EXPECT_EQ(count_along(db, "INDEXED BY idx_call_store_ts"),
            std::to_string(kCalls100 + kCalls200 - 25 * dropped));
  EXPECT_EQ(count_along(db, "NOT INDEXED"), all);
  EXPECT_NE(query_rows(db, "PRAGMA quick_check")[0][0], "ok");
}

TEST(DamagedIndex, ExplainRefusesTheShortRead) {
  auto ok = ingero({"explain", "--db", intact(), "--json"});
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"calls\": 110000"), std::string::npos) << ok.out.substr(0, 2000);
  int64_t dropped = 0;
  std::string db = damaged("explain.db", &dropped);
  auto r = ingero({"explain", "--db", db, "--json"});
  EXPECT_EQ(r.rc, 1) << r.out.substr(0, 2000);
  EXPECT_NE(r.err.find(db + ": damaged: " + std::to_string(25 * dropped) +
                       " calls counted by the file's per-second summaries were not read"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("quick_check"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("cudaFree"), std::string::npos) << "a partial report was printed";
}

// A window inside the trace is compared on its whole seconds: the intact file's window reads
// exactly its calls without a word, whichever process; the damaged one is refused.
TEST(DamagedIndex, AWindowIsCheckedOnItsWholeSeconds) {
  engine::Window w;
  w.from_ns = kBase + 1500 * kMs;
  w.to_ns = kBase + 8500 * kMs;
  // pid 100: 250 ms + k x 100 us in [1.5 s, 8.5 s]: k = 12,500..82,500; pid 200: every tenth.
  Read all = read_calls(intact(), w);
  EXPECT_EQ(all.error, "");
  EXPECT_EQ(all.calls, 70'001u + 7'000u);
  engine::Window one = w;
  one.pid = 200;
  Read pid200 = read_calls(intact(), one);
  EXPECT_EQ(pid200.error, "");
  EXPECT_EQ(pid200.calls, 7'000u);
  Read bad = read_calls(damaged("window.db"), w);
  EXPECT_NE(bad.error.find("damaged"), std::string::npos) << bad.error;
}

TEST(DamagedIndex, MergeAndExportRefuseIt) {
  std::string db = damaged("merge-bad.db");
  std::string dir = temp_path("out");
  std::filesystem::create_directories(dir);
  // (Alone: with intact(), of which it is a copy, merge would refuse the same session twice.)
  auto m = ingero({"merge", db, "-o", dir + "/cluster.db"});
  EXPECT_EQ(m.rc, 1) << m.err;
  // merge checks its inputs whole first (a damaged index page dropped rows without an error).
  EXPECT_NE(m.err.find(db + ": the file is damaged (PRAGMA quick_check: "), std::string::npos)
      << m.err;
  auto e = ingero({"export", "--db", db, "-o", dir + "/trace.json"});
  EXPECT_EQ(e.rc, 1) << e.err;
  EXPECT_NE(e.err.find(db + ": damaged"), std::string::npos) << e.err;
  auto p = ingero({"export", "--format", "pprof", "--db", db, "-o", dir + "/trace.pb.gz"});
  EXPECT_EQ(p.rc, 1) << p.err;
  EXPECT_NE(p.err.find(db + ": damaged"), std::string::npos) << p.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a file was left behind";
  // The intact file merges whole.
  auto good = ingero({"merge", intact(), "-o", dir + "/one.db"});
  ASSERT_EQ(good.rc, 0) << good.err;
  EXPECT_EQ(query_int(dir + "/one.db", "SELECT count(*) FROM calls"), kCalls100 + kCalls200);
}

// The H100 traces were written before the summaries (schema 6): their call rows are counted
// along the table instead.
// A hostile tester damaged an index page of a trace: ship shipped 7,142 of 13,067 events and
// said "ClickHouse has every row of the file" (fleet.md has the file deleted then), and merge
// wrote 5,925, both exit 0. Both check the whole file first now, and refuse it.
TEST(DamagedIndex, ShipAndMergeRefuseADamagedFile) {
  std::string db = write_free_calls(temp_path("ship-damaged.db"), 200'000);
  ASSERT_GT(drop_index_entries(db, "idx_call_store_id"), 0);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", "http://127.0.0.1:1/x"},
                        &out, &err),
            1);
  EXPECT_EQ(err.rfind("ingero ship: " + db + ": the file is damaged (PRAGMA quick_check: ", 0), 0u)
      << err;
  EXPECT_NE(err.find("): nothing shipped\n"), std::string::npos) << err;
  std::string merged = temp_path("merged-damaged.db");
  EXPECT_EQ(run_command({INGERO_BIN, "merge", db, "-o", merged}, &out, &err), 1);
  EXPECT_NE(err.find(db + ": the file is damaged (PRAGMA quick_check: "), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(merged));
}

TEST(DamagedIndex, AFileWithoutSummariesIsCheckedByItsRows) {
  std::string db = temp_path("resnet-clean.db");
  ASSERT_TRUE(unpack_fixture("h100/resnet-clean", db));
  ASSERT_EQ(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'call_seconds'"), 0);
  Read ok = read_calls(db);
  EXPECT_EQ(ok.error, "");
  EXPECT_EQ(ok.calls, uint64_t(query_int(db, "SELECT count(*) FROM calls")));
  int64_t dropped = drop_index_entries(db, "idx_events_timestamp");
  ASSERT_GT(dropped, 0);
  auto r = ingero({"explain", "--db", db});
  EXPECT_EQ(r.rc, 1) << r.out.substr(0, 2000);
  EXPECT_NE(
      r.err.find(db + ": damaged: the window holds " + std::to_string(ok.calls) + " calls but"),
      std::string::npos)
      << r.err;
}

// Retention deletes rows and summaries in separate batches and keeps each table's newest row,
// and seconds not yet summarised are summarised after it: a trace idle longer than --retain
// keeps one call and the summaries of 3,000. That is not damage, because the file says where
// retention cut (retention_state).
TEST(DamagedIndex, RetentionLeftoversAreNotDamage) {
  std::string db = temp_path("retained.db");
  {
    auto w = store::TraceWriter::open(db);
    ASSERT_TRUE(w) << w.error().message;
    (*w)->set_block_rows(100);  // 30 blocks: retention deletes whole blocks
    store::SessionInfo si;
    si.mono_offset_ns = kBase;
    ASSERT_TRUE((*w)->begin_session(si));
    for (int64_t i = 0; i < 3000; ++i)
      ASSERT_TRUE((*w)->add(runtime_call(uint64_t(250 * kMs + i * kMs), 1000, 100, 101,
                                         hal::EventKind::kFree, "cudaFree")));
    ASSERT_TRUE((*w)->commit());
    store::RetentionPolicy keep_1s{kSecond, 0, {}};
    auto p = (*w)->apply_retention(keep_1s, kBase + 60 * kSecond);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->calls, 2900u);  // all but the newest block; the newest summary stays
    store::SessionEnd end;
    ASSERT_TRUE((*w)->finish(end));  // summarises seconds 1 to 3
  }
  EXPECT_EQ(query_int(db, "SELECT sum(calls) FROM call_seconds"), 3000);
  EXPECT_EQ(query_int(db, "SELECT deleted_before FROM retention_state"), kBase + 59 * kSecond);
  Read r = read_calls(db);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.calls, 100u);
  // Without the record the leftovers would look like damage.
  ASSERT_EQ(std::system(("sqlite3 '" + db + "' 'DROP TABLE retention_state'").c_str()), 0);
  EXPECT_NE(read_calls(db).error.find("damaged"), std::string::npos);
}

// A block's entry in call_store says which calls it holds (ids, times): blocks are chosen and
// merged in time order by their entries. An entry that misstates its rows is an error naming
// the block wherever the block is read: by SQL and by the engine.
TEST(DamagedIndex, ABlockEntryThatMisstatesItsRowsIsAnErrorNamingIt) {
  std::string db = temp_path("misstated.db");
  std::filesystem::copy_file(intact(), db, std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(query_int(db, "SELECT calls FROM call_store WHERE id = 100"), 25);
  ASSERT_EQ(std::system(("sqlite3 '" + db +
                         "' 'UPDATE call_store SET first_id = first_id + 1 WHERE id = 100'")
                            .c_str()),
            0);
  const std::string said =
      "call block 100: its rows do not lie in the id and time range its "
      "entry says";
  auto q = ingero({"query", "--db", db, "SELECT count(*) AS n FROM calls"});
  EXPECT_EQ(q.rc, 1) << q.out;
  EXPECT_NE(q.err.find(said), std::string::npos) << q.err;
  EXPECT_EQ(q.out, "");
  auto e = ingero({"explain", "--db", db});
  EXPECT_EQ(e.rc, 1) << e.out.substr(0, 2000);
  EXPECT_NE(e.err.find(db + ": "), std::string::npos) << e.err;
  EXPECT_NE(e.err.find(said), std::string::npos) << e.err;
  EXPECT_EQ(e.out.find("cudaFree"), std::string::npos) << "a partial report was printed";
}

// An entry whose time range moved away hides its block from a window that holds its calls,
// as a damaged index hides rows: the read falls short of the per-second summaries by exactly
// the block's calls, and explain refuses the window.
TEST(DamagedIndex, ABlockEntryWhoseTimesMovedAwayIsMissedAndRefused) {
  std::string db = temp_path("moved.db");
  std::filesystem::copy_file(intact(), db, std::filesystem::copy_options::overwrite_existing);
  // The block holding the calls 5 s in; its entry moved an hour later.
  int64_t block = query_int(
      db, "SELECT id FROM call_store WHERE first_ts >= " + std::to_string(kBase + 5 * kSecond) +
              " ORDER BY first_ts LIMIT 1");
  int64_t in_it = query_int(db, "SELECT calls FROM call_store WHERE id = " + std::to_string(block));
  ASSERT_GT(in_it, 0);
  std::string hour = std::to_string(3600 * kSecond);
  ASSERT_EQ(std::system(("sqlite3 '" + db + "' 'UPDATE call_store SET first_ts = first_ts + " +
                         hour + ", last_ts = last_ts + " + hour + ", end_ts = end_ts + " + hour +
                         " WHERE id = " + std::to_string(block) + "'")
                            .c_str()),
            0);
  engine::Window w;
  w.from_ns = kBase + 1500 * kMs;
  w.to_ns = kBase + 8500 * kMs;
  ASSERT_EQ(read_calls(intact(), w).error, "");
  Read bad = read_calls(db, w);
  EXPECT_NE(bad.error.find(db + ": damaged: " + std::to_string(in_it) +
                           " calls counted by the file's per-second summaries were not read"),
            std::string::npos)
      << bad.error;
  EXPECT_NE(bad.error.find("a block of calls whose entry in call_store was lost or holds a "
                           "damaged time range"),
            std::string::npos)
      << bad.error;
  // The command, on the same window and on the whole trace.
  auto r = ingero({"explain", "--db", db, "--from", "2023-11-14T22:13:21.5Z", "--to",
                   "2023-11-14T22:13:28.5Z"});
  EXPECT_EQ(r.rc, 1) << r.out.substr(0, 2000);
  EXPECT_NE(r.err.find(db + ": damaged: " + std::to_string(in_it) + " calls"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("cudaFree"), std::string::npos) << "a partial report was printed";
  auto all = ingero({"explain", "--db", db});
  EXPECT_EQ(all.rc, 1) << all.out.substr(0, 2000);
  EXPECT_NE(all.err.find(db + ": "), std::string::npos) << all.err;
}

// Folded runs are read back spread evenly over their span, so a run across a second's edge
// may put its calls in the other second: the seconds it spans are compared as one.
TEST(DamagedIndex, RunsAcrossASecondAreComparedAsOne) {
  std::string db = temp_path("folded.db");
  int64_t calls = 0;
  {
    auto w = store::TraceWriter::open(db);
    ASSERT_TRUE(w) << w.error().message;
    store::SessionInfo si;
    si.mono_offset_ns = kBase;
    ASSERT_TRUE((*w)->begin_session(si));
    // A step a millisecond, starting 100 us before each: seven 5 us launches 10 us apart, an
    // eighth at 450 us (one run, across the second's edge where a step straddles it), and a
    // 20 us launch at 700 us (above the p95 share: it keeps its row).
    for (int64_t step = 0; step < 3000; ++step) {
      int64_t t = 900'000 + step * kMs;
      for (int64_t off : {0, 10, 20, 30, 40, 50, 60, 450, 700}) {
        uint64_t dur = off == 700 ? 20'000 : 5'000;
        ASSERT_TRUE((*w)->add(runtime_call(uint64_t(t + off * 1000), dur, 100, 101,
                                           hal::EventKind::kLaunch, "cudaLaunchKernel")));
        ++calls;
      }
    }
    store::SessionEnd end;
    ASSERT_TRUE((*w)->finish(end));
  }
  auto c = store::compact_trace(db, 0, app::builtin_views());
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_GT(query_int(db, "SELECT count(*) FROM call_runs"), 2000);
  EXPECT_EQ(query_int(db,
                      "SELECT count(*) FROM call_runs WHERE timestamp / 1000000000 <> "
                      "(timestamp + span_ns) / 1000000000"),
            3);
  Read r = read_calls(db);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.calls, uint64_t(calls));
}

}  // namespace
}  // namespace ingero::test

// Tiered retention (store/tiers.h): per-second summaries of every call, launches folded into
// runs, and what the engine reads back from a folded trace.
#include "store/tiers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "app/builtin_backends.h"
#include "engine/analysis.h"
#include "store/call_summaries.h"
#include "store/column_block.h"
#include "store/row_block.h"
#include "store/sketch_sql.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/h100_fixture.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;
using hal::Event;
using hal::EventKind;
using hal::Field;

TEST(Tiers, SummariesAddUpToTheRowsTheyCoverEverySecond) {
  std::mt19937_64 rng(5);
  std::vector<Event> calls;
  uint64_t t = 0;
  for (int i = 0; i < 30000; ++i) {
    t += rng() % 400 * kUs;
    Event e = rng() % 3 ? launch(t, rng() % (50 * kUs), 10 + uint32_t(rng() % 3))
                        : call(t, rng() % (5 * kMs), "cuda_runtime", "cudaMemcpyAsync",
                               EventKind::kMemcpy, 20, 20);
    if (rng() % 50 == 0) e.ret = 2;
    if (rng() % 97 == 0) {
      e.has_ret = false;
      e.unfinished = true;
    }
    if (e.kind == EventKind::kMemcpy) e.set(Field::kBytes, rng() % 100000);
    if (rng() % 7 == 0) {
      e.off_cpu_ns = rng() % (e.dur_ns + 1);
      e.preempts = uint32_t(rng() % 3);
    }
    calls.push_back(e);
  }
  // A late call: its second was written already when it arrives.
  calls.push_back(launch(1000 * kMs + 17, 3 * kUs, 10));
  std::string db = write_trace("summaries.db", calls);
  std::string by_key =
      " GROUP BY timestamp / 1000000000, pid, tid, source, op ORDER BY 1, 2, 3, 4, 5";
  auto rows = test::query_rows(
      db,
      "SELECT timestamp / 1000000000, pid, tid, source, op, count(*), "
      "sum(ret_code IS NOT NULL AND ret_code <> 0 AND status = 0), sum(status = 1), "
      "sum(duration), min(duration), max(duration), sum(off_cpu_ns), sum(preempts), "
      "sum(coalesce(bytes, 0)) FROM events WHERE source <> 3" +
          by_key);
  auto sums = test::query_rows(
      db,
      "SELECT timestamp / 1000000000, pid, tid, source, op, sum(calls), sum(errors), "
      "sum(unfinished), sum(sum_ns), min(min_ns), max(max_ns), sum(off_cpu_ns), sum(preempts), "
      "sum(bytes) FROM call_seconds" +
          by_key);
  EXPECT_GT(rows.size(), 20u);
  EXPECT_EQ(sums, rows);
  // The late call made a second row for its second; readers add them up (above).
  EXPECT_GT(test::query_int(db, "SELECT count(*) FROM call_seconds"), int64_t(rows.size()));
  // Each row's sketch holds exactly its calls.
  auto db2 = Db::open(db, Db::Mode::kReadOnly);
  ASSERT_TRUE(db2);
  auto st = (*db2)->prepare("SELECT calls, min_ns, max_ns, sketch FROM call_seconds");
  ASSERT_TRUE(st);
  size_t n = 0;
  while (*st->step()) {
    auto sk = sketch_column(st->get(), 3);
    ASSERT_TRUE(sk);
    EXPECT_EQ(int64_t(sk->count()), st->int64(0));
    EXPECT_EQ(int64_t(sk->min()), st->int64(1));
    EXPECT_EQ(int64_t(sk->max()), st->int64(2));
    ++n;
  }
  EXPECT_GT(n, rows.size());
}

TEST(Tiers, FoldingKeepsWhatTheRulesNeedAndRunsHoldTheRest) {
  Loop l = training_loop(200);
  std::string full = write_trace("loop-full.db", l.calls);
  std::string tiered = copy_of(full, "loop-tiered.db");
  FoldCount c = fold_everything(tiered);
  int64_t launches_kept =
      test::query_int(tiered, "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel'");
  // Every failed and preempted launch keeps its row, and every slow one (400 us, 20 of them).
  EXPECT_EQ(test::query_int(tiered,
                            "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel' "
                            "AND (status <> 'ok' OR preempts > 0 OR dur_ns >= 400000)"),
            20 + 10 + 8);
  // Copies and syncs are never folded.
  EXPECT_EQ(test::query_int(tiered, "SELECT count(*) FROM calls WHERE op <> 'cudaLaunchKernel'"),
            int64_t(l.others));
  // The rest of the launches are in runs, counted once.
  EXPECT_EQ(c.folded + uint64_t(launches_kept), l.launches);
  EXPECT_EQ(uint64_t(test::query_int(tiered, "SELECT sum(calls) FROM call_runs")), c.folded);
  EXPECT_EQ(uint64_t(test::query_int(tiered, "SELECT count(*) FROM call_runs")), c.runs);
  // Fewer than a tenth of the launches keep a row, and runs are long.
  EXPECT_LT(uint64_t(launches_kept) * 10, l.launches);
  EXPECT_GT(c.folded / c.runs, 8u);
  // The summaries still cover every call.
  EXPECT_EQ(test::query_int(tiered, "SELECT sum(calls) FROM call_seconds"),
            int64_t(l.launches + l.others));
}

// Calls and host events share one id space, which goes on where the file left it: a session
// appended to a folded file gives ids above every one it holds (a shipper resumes by id), and
// SQL over `events` sees each id once.
TEST(Tiers, IdsGoOnAcrossSessionsWhateverWasFolded) {
  Loop l = training_loop(60);
  std::string db = write_trace("ids.db", l.calls, true);
  fold_everything(db);
  // The greatest id given: a host event's, or a call's (its block says so, whether its row
  // was kept or folded into a run).
  int64_t before = test::query_int(
      db, "SELECT max((SELECT max(id) FROM host_rows), (SELECT max(last_id) FROM call_store))");
  EXPECT_GE(before, test::query_int(db, "SELECT max(id) FROM events"));
  {
    auto w = TraceWriter::open(db);
    ASSERT_TRUE(w) << w.error().message;
    SessionInfo si;
    si.node = "n1";
    si.mono_offset_ns = kOffset;
    ASSERT_TRUE((*w)->begin_session(si));
    for (const Event& e : training_loop(5).calls) ASSERT_TRUE((*w)->add(e));
    ASSERT_TRUE((*w)->finish(SessionEnd{}));
  }
  EXPECT_EQ(test::query_int(db, "SELECT min(id) FROM events WHERE session_id = 2"), before + 1);
  EXPECT_EQ(test::query_int(db, "SELECT count(*) - count(DISTINCT id) FROM events"), 0);
}

TEST(Tiers, FoldedCallsReadBackWithTheirCountsSumsExtremesAndGaps) {
  Loop l = training_loop(200);
  std::string full = write_trace("gaps-full.db", l.calls);
  std::string tiered = copy_of(full, "gaps-tiered.db");
  fold_everything(tiered);
  struct Totals {
    uint64_t n = 0, sum = 0, min = UINT64_MAX, max = 0;
    std::vector<std::pair<uint64_t, uint64_t>> gaps;  // (end, next start) over 500 us
    std::vector<uint64_t> after_sync;                 // start of the first launch after a sync
  };
  auto totals = [](const std::string& path) {
    Totals t;
    auto reader = TraceReader::open(path, app::builtin_views());
    EXPECT_TRUE(reader);
    SqlTraceSource src(**reader);
    uint64_t end = 0;
    bool synced = false;
    src.calls({}, [&](const Event& e) {
      if (end && e.ts_ns > end + 500 * kUs) t.gaps.push_back({end, e.ts_ns});
      end = std::max(end, e.ts_ns + e.dur_ns);
      if (e.kind == EventKind::kSync) synced = true;
      if (e.kind != EventKind::kLaunch) return;
      if (synced) t.after_sync.push_back(e.ts_ns);
      synced = false;
      ++t.n;
      t.sum += e.dur_ns;
      t.min = std::min(t.min, e.dur_ns);
      t.max = std::max(t.max, e.dur_ns);
    });
    EXPECT_EQ(src.error(), "");
    return t;
  };
  Totals a = totals(full), b = totals(tiered);
  EXPECT_EQ(b.n, a.n);
  EXPECT_EQ(b.sum, a.sum);
  EXPECT_EQ(b.min, a.min);
  EXPECT_EQ(b.max, a.max);
  EXPECT_EQ(b.after_sync, a.after_sync);
  EXPECT_EQ(b.gaps, a.gaps);
  EXPECT_EQ(a.gaps.size(), 199u);  // the host work between steps
}

TEST(Tiers, SameChainsStepsAndQuantilesWithinTheBoundOnAFoldedCopy) {
  Loop l = training_loop(200);
  std::string full = write_trace("chains-full.db", l.calls);
  std::string tiered = copy_of(full, "chains-tiered.db");
  fold_everything(tiered);
  Read a = analyze(full), b = analyze(tiered);
  ASSERT_FALSE(a.a.chains.empty());
  ASSERT_EQ(a.a.steps.processes.size(), 1u);
  expect_same_answers(a.a, b.a);
}

// The real H100 traces (tests/fixtures/h100): the same chains, in the same order, with the
// same severities, whether the launches have rows or are folded.
std::string fixture(const std::string& name) { return test::h100_fixture(name, "tiers", true); }

TEST(Tiers, H100TracesGiveTheSameChainsFullAndFolded) {
  for (const char* name : {"starve", "emptycache", "resnet-clean", "resnet-contended"}) {
    std::string full = fixture(name);
    std::string tiered = copy_of(full, std::string(name) + "-tiered.db");
    FoldCount c = fold_everything(tiered);
    // Traces of schema < 5 store a runtime launch and its driver launch as two rows, one
    // inside the other: those keep their rows (store/tiers.h), and cuDNN's own launches fold.
    EXPECT_GT(c.folded, 300u) << name;
    Read a = analyze(full), b = analyze(tiered);
    EXPECT_EQ(chain_keys(b.a), chain_keys(a.a)) << name;
    ASSERT_FALSE(b.a.chains.empty()) << name;
    EXPECT_EQ(b.a.chains[0].summary, a.a.chains[0].summary) << name;
    EXPECT_EQ(b.a.events, a.a.events) << name;
  }
}

TEST(Tiers, DamagedRunsAreAnErrorNotInventedCalls) {
  Loop l = training_loop(60);
  std::string db = write_trace("damaged-runs.db", l.calls);
  fold_everything(db);
  {  // a block's first run with a total smaller than its extremes
    auto w = Db::open(db, Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    auto st = (*w)->prepare("SELECT id, run_data FROM call_store WHERE runs > 0 LIMIT 1");
    ASSERT_TRUE(st);
    ASSERT_TRUE(*st->step());
    int64_t id = st->int64(0);
    auto runs = RowBlock::decode(
        std::string_view(static_cast<const char*>(sqlite3_column_blob(st->get(), 1)),
                         size_t(sqlite3_column_bytes(st->get(), 1))));
    ASSERT_TRUE(runs);
    ColumnBlock damaged(runs->columns());
    for (size_t r = 0; r < runs->rows(); ++r) {
      for (size_t c = 0; c < runs->columns().size(); ++c) {
        if (runs->type(r, c) == SQLITE_TEXT)
          damaged.set_text(c, runs->bytes(r, c));
        else if (runs->type(r, c) == SQLITE_INTEGER)
          damaged.set_int(c, r == 0 && runs->columns()[c] == "sum_ns" ? 1 : runs->int64(r, c));
      }
      damaged.end_row();
    }
    std::string data = damaged.encode();
    st = Stmt();
    auto up = (*w)->prepare("UPDATE call_store SET run_data = ? WHERE id = ?");
    ASSERT_TRUE(up);
    sqlite3_bind_blob(up->get(), 1, data.data(), int(data.size()), SQLITE_STATIC);
    up->bind(2, id);
    ASSERT_TRUE(up->step());
  }
  auto reader = TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource src(**reader);
  uint64_t n = 0;
  src.calls({}, [&](const hal::Event&) { ++n; });
  EXPECT_NE(src.error().find("damaged call_runs row"), std::string::npos) << src.error();
}

TEST(Tiers, ADamagedSketchIsAnErrorNotAQuantile) {
  Loop l = training_loop(20);
  std::string db = write_trace("damaged-sketch.db", l.calls);
  fold_everything(db);
  {
    auto w = Db::open(db, Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->exec("UPDATE call_seconds SET sketch = x'01ff' WHERE rowid = 1"));
  }
  auto reader = TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource src(**reader);
  EXPECT_FALSE(src.folded_call_sketches({}).has_value());
  EXPECT_NE(src.error().find("damaged call_seconds sketch"), std::string::npos) << src.error();
  // Folding more of it refuses too, rather than folding with a wrong p95.
  std::string more = write_trace("damaged-sketch-unfolded.db", training_loop(60).calls);
  {
    auto w = Db::open(more, Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->exec("UPDATE call_seconds SET sketch = x'01ff' WHERE rowid = 1"));
  }
  auto pass = compact_trace(more, 0, app::builtin_views());
  ASSERT_FALSE(pass);
  EXPECT_NE(pass.error().message.find("damaged call_seconds sketch"), std::string::npos);
}

TEST(Tiers, CompactRefusesTheOriginalImplementationsFilesAndLeavesThemAsTheyWere) {
  std::string go =
      copy_of(INGERO_FIXTURES_DIR "/ingero-go/pytorch-dataloader-starvation.db", "go-compact.db");
  std::string before = test::sha256_file(go);
  auto r = compact_trace(go, 0, app::builtin_views());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("original Go implementation"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(test::sha256_file(go), before);
}

// A window that cuts runs (--since on a folded trace) counts in its event header the calls
// its reads give: a run begun before the window counts its calls inside it, and a run that
// goes on past the window's end does not count those after it. It counted whole runs by
// their start (the header said 195,608 events where the statistics counted 195,625 calls).
TEST(Tiers, AWindowCuttingRunsCountsTheCallsItReads) {
  std::string path = write_trace("count-window.db", training_loop(200).calls);
  fold_everything(path);
  auto runs = test::query_rows(
      path, "SELECT timestamp, span_ns FROM call_runs WHERE calls >= 8 ORDER BY timestamp");
  ASSERT_GT(runs.size(), 100u);
  int64_t a = std::stoll(runs[40][0]), b = std::stoll(runs[90][0]);
  engine::Window w;
  w.from_ns = a + std::stoll(runs[40][1]) / 2;  // both edges halfway through a run
  w.to_ns = b + std::stoll(runs[90][1]) / 2;
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader) << reader.error().message;
  SqlTraceSource source(**reader);
  uint64_t read = 0;
  source.calls(w, [&](const hal::Event&) { ++read; });
  source.host_events(w, [&](const hal::Event&) { ++read; });
  EXPECT_EQ(source.error(), "");
  EXPECT_EQ(source.event_count(w), read);
}

// `a` (node n1) and `b` (node n2) merged into one file; "" when the merge failed.
std::string merge_two_nodes(const std::string& a, const std::string& b) {
  std::string merged = test::temp_path("merged.db");
  std::string cmd =
      std::string(INGERO_BIN) + " merge '" + a + "' '" + b + "' -o '" + merged + "' 2>/dev/null";
  return std::system(cmd.c_str()) == 0 ? merged : "";
}

// A merged file holds its nodes one after the other by id: compact folded the first node and
// stopped at its recent calls, never reaching the others. Each node now folds as its own file
// does.
TEST(Tiers, CompactFoldsEveryNodeOfAMergedFile) {
  Loop l = training_loop(200);
  std::string a = write_trace("node-a.db", l.calls),
              b = write_trace("node-b.db", l.calls, false, "n2");
  std::string merged = merge_two_nodes(a, b);
  ASSERT_FALSE(merged.empty());
  // The last 300 ms keep their rows: n1's stop its first pass before n2 begins.
  auto fold = [](const std::string& path) {
    auto r = compact_trace(path, 300 * int64_t(kMs), app::builtin_views());
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return FoldCount{
        uint64_t(test::query_int(path, "SELECT coalesce(sum(calls), 0) FROM call_runs")), 0};
  };
  FoldCount alone = fold(a);
  ASSERT_GT(alone.folded, l.launches / 2);
  FoldCount both = fold(merged);
  EXPECT_EQ(both.folded, 2 * alone.folded);
  EXPECT_EQ(test::query_rows(merged, "SELECT node, sum(calls) FROM call_runs GROUP BY node"),
            (std::vector<std::vector<std::string>>{{"n1", std::to_string(alone.folded)},
                                                   {"n2", std::to_string(alone.folded)}}));
  // And the folded merged file reads whole: every call of both nodes.
  auto reader = TraceReader::open(merged, app::builtin_views());
  ASSERT_TRUE(reader) << reader.error().message;
  SqlTraceSource source(**reader);
  uint64_t calls = 0;
  source.calls({}, [&](const hal::Event&) { ++calls; });
  EXPECT_EQ(source.error(), "");
  EXPECT_EQ(calls, 2 * (l.launches + l.others));
}

// Each node folds by its own processes' p95: pid 10 of one node and pid 10 of another are two
// processes. With one limit for both, the fast node's launches up to the slow node's p95 were
// folded, its own tail with them.
TEST(Tiers, NodesOfAMergedFileFoldByTheirOwnLimits) {
  Loop fast = training_loop(200), slow = training_loop(200);
  for (Event& e : fast.calls)  // half as long, at the same starts
    if (e.kind == EventKind::kLaunch) e.dur_ns /= 2;
  std::string a = write_trace("fast.db", fast.calls),
              b = write_trace("slow.db", slow.calls, false, "n2");
  std::string merged = merge_two_nodes(a, b);
  ASSERT_FALSE(merged.empty());
  FoldCount alone_a = fold_everything(a), alone_b = fold_everything(b);
  fold_everything(merged);
  EXPECT_EQ(test::query_rows(merged, "SELECT node, sum(calls) FROM call_runs GROUP BY node"),
            (std::vector<std::vector<std::string>>{{"n1", std::to_string(alone_a.folded)},
                                                   {"n2", std::to_string(alone_b.folded)}}));
}

}  // namespace
}  // namespace ingero::store

// Folding calls as they are archived (store/archive_fold.h), as `ingero trace` does with its
// defaults: the engine reads the folded form, whatever the age of the calls; SQL over rows
// sees every call once, as a row while its block keeps its copy in recent_blocks, in a run
// after; the calls kept are never folded again into runs of their own.
#include "store/archive_fold.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "store/query_json.h"
#include "store/query_note.h"
#include "store/trace_queries.h"
#include "tests/support/run_ingero.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;
using test::run_ingero;

constexpr int64_t kSec = 1'000'000'000;

// `calls` written as `ingero trace` writes them: every 0.5 s of trace time, the rows older than
// the window that no block took are folded, then whole blocks archived and folded, each kept
// whole in recent_blocks while its calls ended within `full_rows_ns`; the session's end makes
// the last pass.
std::string write_as_traced(const std::string& name, const std::vector<Event>& calls,
                            int64_t full_rows_ns) {
  std::string path = test::temp_path(name);
  auto w = begin_trace(path);
  auto upkeep = [&](int64_t now, bool final) {
    while (true) {
      auto p = w->fold_calls(now - full_rows_ns, now, 5000);
      ASSERT_TRUE(p) << p.error().message;
      if (!p->more) break;
    }
    while (true) {
      auto a = w->archive_rows(INT64_MAX, TraceWriter::Folding{now, full_rows_ns, final});
      ASSERT_TRUE(a) << a.error().message;
      if (!a->rows) break;
    }
  };
  uint64_t next_tick = calls.front().ts_ns + 500 * kMs;
  for (const Event& e : calls) {
    if (e.ts_ns >= next_tick) {
      upkeep(w->to_wall(e.ts_ns), false);
      next_tick = e.ts_ns + 500 * kMs;
    }
    EXPECT_TRUE(w->add(e));
  }
  upkeep(w->to_wall(calls.back().ts_ns + calls.back().dur_ns), true);
  EXPECT_TRUE(w->finish(SessionEnd{}));
  return path;
}

int64_t count_calls(const std::vector<Event>& calls) {
  return std::count_if(calls.begin(), calls.end(),
                       [](const Event& e) { return !hal::is_host_kind(e.kind); });
}

int64_t sql_int(const std::string& db, const std::string& sql) {
  auto r = TraceReader::open(db, app::builtin_views());
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  auto q = run_query(**r, sql);
  EXPECT_TRUE(q) << sql << ": " << (q ? "" : q.error().message);
  if (!q || q->rows.empty() || !std::holds_alternative<int64_t>(q->rows[0][0])) return -1;
  return std::get<int64_t>(q->rows[0][0]);
}

// Every row of `sql`'s answer, as text.
std::vector<std::string> sql_rows(const std::string& db, const std::string& sql) {
  auto r = TraceReader::open(db, app::builtin_views());
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  QueryLimits big;
  big.max_rows = 10'000'000;
  big.max_bytes = size_t(1) << 31;
  auto q = run_query(**r, sql, big);
  EXPECT_TRUE(q) << sql << ": " << (q ? "" : q.error().message);
  std::vector<std::string> out;
  if (!q) return out;
  for (const auto& row : q->rows) {
    std::string line;
    for (const auto& v : row) line += to_text(v) + "|";
    out.push_back(std::move(line));
  }
  return out;
}

std::string explain_json(const std::string& db) {
  auto e = run_ingero({"explain", "--json", "--db", db});
  EXPECT_EQ(e.rc, 0) << e.err;
  std::string out = e.out;
  for (size_t at; (at = out.find(db)) != std::string::npos;) out.replace(at, db.size(), "DB");
  return out;
}

struct Traced {
  Loop loop;
  std::string full, traced;
};

// 600 steps of the training loop (~9 s), with a second thread, written with every row and as
// traced with a 4 s window: blocks are archived (and folded) once their calls are summarised,
// 3 s behind, so the window's calls fold as they are archived; the blocks of the first seconds
// lost their copies by the end, the last ones keep them.
const Traced& traced() {
  static const Traced t = [] {
    Traced t;
    t.loop = training_loop(600);
    t.loop.calls = with_twin_thread(t.loop.calls, 0x4444);
    t.full = test::scratch_root() + "/archive-fold-full.db";
    t.traced = test::scratch_root() + "/archive-fold-traced.db";
    std::filesystem::copy_file(write_trace("full.db", t.loop.calls), t.full,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(write_as_traced("traced.db", t.loop.calls, 4 * kSec), t.traced,
                               std::filesystem::copy_options::overwrite_existing);
    return t;
  }();
  return t;
}

TEST(ArchiveFold, BlocksFoldAsTheyAreArchivedAndTheRecentOnesKeepEveryRow) {
  const Traced& t = traced();
  auto db = Db::open(t.traced, Db::Mode::kReadOnly);
  ASSERT_TRUE(db);
  auto q = [&](const std::string& sql) { return (*db)->query_int(sql)->value_or(-1); };
  // Every block but the last few calls' was archived, and folded: the engine's form.
  EXPECT_GT(q("SELECT count(*) FROM call_blocks"), 3);
  EXPECT_GT(q("SELECT coalesce(sum(calls), 0) FROM call_runs") +
                q("SELECT coalesce(sum(calls), 0) FROM run_blocks"),
            count_calls(t.loop.calls) / 2);
  EXPECT_EQ(q("SELECT sum(rows) FROM call_blocks") +
                q("SELECT coalesce(sum(calls), 0) FROM call_runs") +
                q("SELECT coalesce(sum(calls), 0) FROM run_blocks") +
                q("SELECT count(*) FROM events WHERE source IN (SELECT id FROM sources WHERE "
                  "vendor <> 'host')"),
            count_calls(t.loop.calls));
  // The copies: the newest blocks' (their calls ended within a second of the end), not the
  // first ones'; the runs say which call was their first.
  int64_t copies = q("SELECT count(*) FROM recent_blocks");
  EXPECT_GT(copies, 0);
  EXPECT_LT(copies, q("SELECT count(*) FROM call_blocks"));
  EXPECT_EQ(q("SELECT count(*) FROM recent_blocks WHERE end_ts < (SELECT max(timestamp) FROM "
              "events) - 4000000000"),
            0);
  // Folded as archived: the copies' calls are in runs too.
  EXPECT_GT(q("SELECT sum(folded_calls) FROM recent_folds"), 4096);
  EXPECT_EQ(q("SELECT sum(folded_calls) FROM recent_folds"),
            sql_int(t.traced,
                    "SELECT sum(calls) FROM (SELECT calls, first_call_id FROM main.call_runs "
                    "UNION ALL SELECT calls, first_call_id FROM temp.archived_runs) WHERE "
                    "first_call_id >= (SELECT min(first_id) FROM recent_blocks)"));
}

TEST(ArchiveFold, SqlSeesEveryCallOnceAsARowOrInARun) {
  const Traced& t = traced();
  int64_t calls = count_calls(t.loop.calls);
  int64_t rows = sql_int(t.traced, "SELECT count(*) FROM calls");
  int64_t in_runs = sql_int(t.traced, "SELECT coalesce(sum(calls), 0) FROM call_runs");
  EXPECT_GT(in_runs, 0);
  EXPECT_EQ(rows + in_runs, calls);
  EXPECT_EQ(sql_int(t.traced, "SELECT sum(calls) FROM call_summaries"), calls);
  // The calls of the blocks that keep their copies have their rows, exactly as written: every
  // column of every row from the first copy's first call on, host events between included.
  auto db = Db::open(t.traced, Db::Mode::kReadOnly);
  ASSERT_TRUE(db);
  auto from = recent_from_id(**db);
  ASSERT_TRUE(from && *from);
  std::string recent =
      "SELECT * FROM events WHERE id >= " + std::to_string(**from) + " ORDER BY id";
  auto want = sql_rows(t.full, recent), got = sql_rows(t.traced, recent);
  EXPECT_GT(want.size(), 8000u);
  EXPECT_EQ(got, want);
  // The runs shown are the calls without rows: what call_folding counts, and the note says.
  auto fold = fold_state(**db);
  ASSERT_TRUE(fold);
  EXPECT_EQ(int64_t(fold->folded_calls), in_runs);
  EXPECT_EQ(int64_t(fold->runs), sql_int(t.traced, "SELECT count(*) FROM call_runs"));
  EXPECT_NE(folded_calls_note(**db, "SELECT count(*) FROM calls")
                .find(engine::format_count(uint64_t(in_runs)) + " launches before "),
            std::string::npos);
  // The trace's first event and its nodes, from the blocks' and runs' entries: the first calls
  // are in runs, their block emptied of them.
  auto full = Db::open(t.full, Db::Mode::kReadOnly);
  ASSERT_TRUE(full);
  EXPECT_EQ(*first_event_ns(**db), *first_event_ns(**full));
  EXPECT_EQ(*read_nodes(**db), std::vector<std::string>{"n1"});
}

TEST(ArchiveFold, TheEngineReadsTheFoldedFormWhateverTheCopies) {
  const Traced& t = traced();
  // The copies going changes nothing the engine reads: its answer is the same, byte for byte.
  std::string dropped = copy_of(t.traced, "dropped.db");
  {
    auto db = Db::open(dropped, Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    auto n = drop_recent_blocks(**db, INT64_MAX);
    ASSERT_TRUE(n) << n.error().message;
    EXPECT_GT(*n, 0u);
    EXPECT_EQ((*db)->query_int("SELECT count(*) FROM recent_blocks")->value_or(-1), 0);
  }
  EXPECT_EQ(explain_json(dropped), explain_json(t.traced));
  // It says where its quantiles come from.
  EXPECT_NE(explain_json(t.traced).find("\"quantiles\": \"sketches\""), std::string::npos);
  EXPECT_NE(explain_json(t.full).find("\"quantiles\": \"exact\""), std::string::npos);
  const std::string said = "p50/p95/p99 from the per-second sketches, within 1%";
  EXPECT_NE(run_ingero({"explain", "--db", t.traced}).out.find(said), std::string::npos);
  EXPECT_EQ(run_ingero({"explain", "--db", t.full}).out.find(said), std::string::npos);
  // ...and SQL then sees the runs of the calls whose rows went: still every call once.
  EXPECT_EQ(sql_int(dropped, "SELECT count(*) FROM calls") +
                sql_int(dropped, "SELECT sum(calls) FROM call_runs"),
            count_calls(t.loop.calls));
  EXPECT_GT(sql_int(dropped, "SELECT sum(calls) FROM call_runs"),
            sql_int(t.traced, "SELECT sum(calls) FROM call_runs"));
  // Against every row: the same chains and steps, counts and extremes exact, quantiles within
  // the sketches' 1%.
  expect_same_answers(analyze(t.full).a, analyze(t.traced).a);
}

// The calls of a thread, kept and folded, in the engine's form: none inside another (a run's
// span holds only its own calls), whatever folded them.
void expect_runs_alone_on_their_threads(const std::string& path) {
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource src(**reader);
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> spans;  // tid -> runs
  std::map<uint32_t, std::vector<int64_t>> kept;                       // tid -> launch starts
  src.call_runs(
      engine::Window{},
      [&](const hal::Event& e) {
        if (e.kind == EventKind::kLaunch) kept[e.tid].push_back(int64_t(e.ts_ns));
      },
      [&](const engine::CallRun& r) {
        spans[r.tid].push_back({r.ts_ns, r.ts_ns + int64_t(r.span_ns)});
      });
  EXPECT_EQ(src.error(), "");
  size_t runs = 0;
  for (auto& [tid, s] : spans) {
    std::sort(s.begin(), s.end());
    runs += s.size();
    for (size_t i = 1; i < s.size(); ++i) EXPECT_LE(s[i - 1].second, s[i].first) << tid;
    for (int64_t k : kept[tid]) {
      auto it = std::upper_bound(s.begin(), s.end(), std::pair{k, INT64_MAX});
      if (it != s.begin()) {
        EXPECT_LE(std::prev(it)->second, k) << tid;
      }
    }
  }
  EXPECT_GT(runs, 10u);
}

TEST(ArchiveFold, CallsKeptAreNeverFoldedAgainBesideTheirBlocksRuns) {
  const Traced& t = traced();
  expect_runs_alone_on_their_threads(t.traced);
  // Compacting the trace as it was left, its window cut to nothing: the copies go, the last
  // calls that stayed rows fold, and the calls the blocks kept stay as they are.
  std::string compacted = copy_of(t.traced, "compacted.db");
  auto before = sql_int(compacted, "SELECT sum(rows) FROM call_blocks");
  auto c = compact_trace(compacted, 1, app::builtin_views());
  ASSERT_TRUE(c) << c.error().message;
  expect_runs_alone_on_their_threads(compacted);
  EXPECT_EQ(sql_int(compacted, "SELECT count(*) FROM recent_blocks"), 0);
  EXPECT_EQ(sql_int(compacted, "SELECT count(*) FROM calls") +
                sql_int(compacted, "SELECT sum(calls) FROM call_runs"),
            count_calls(t.loop.calls));
  // Only the rows no block took (the last calls, short of a block) were folded by compact.
  EXPECT_LE(c->folded, uint64_t(kArchiveBlockRows));
  EXPECT_LE(sql_int(compacted, "SELECT sum(rows) FROM call_blocks"),
            before + int64_t(kArchiveBlockRows));
  EXPECT_EQ(chain_keys(analyze(compacted).a), chain_keys(analyze(t.traced).a));
}

// Rows that folding the rows of events considered first (a block waited: the shipper, or
// fewer calls than a block) keep what it decided when their block is archived, whatever the
// limits then: a launch it kept, folded then, would be a run inside its neighbours' run.
TEST(ArchiveFold, RowsFoldingConsideredAreNotFoldedAgainWhenArchived) {
  Loop l = training_loop(100);
  std::string db = write_trace("considered.db", l.calls);
  auto d = Db::open(db, Db::Mode::kReadWrite);
  ASSERT_TRUE(d);
  FoldLimits strict;
  ASSERT_TRUE(read_limits(**d, strict));
  // Folding the rows with a limit of 5 us keeps the launches of 5-6 us, between runs.
  for (auto& [key, limit] : strict.limit) limit = 5 * int64_t(kUs);
  strict.read_for_ns = INT64_MAX / 2;
  auto half = (*d)->query_int("SELECT timestamp FROM events ORDER BY id LIMIT 1 OFFSET 6000");
  ASSERT_TRUE(half && *half);
  auto pass = fold_calls(**d, **half, 1'000'000, &strict);
  ASSERT_TRUE(pass) << pass.error().message;
  ASSERT_GT(pass->runs, 10u);
  // Archived and folded by the file's own limits (its p95 is over 5 us).
  FoldLimits real;
  ASSERT_TRUE(read_limits(**d, real));
  real.read_for_ns = INT64_MAX / 2;
  ArchiveOptions o;
  o.fold = &real;
  auto a = archive_calls(**d, o);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_GT(a->folded, 0u);
  d->reset();
  expect_runs_alone_on_their_threads(db);
  EXPECT_EQ(
      sql_int(db, "SELECT count(*) FROM calls") + sql_int(db, "SELECT sum(calls) FROM call_runs"),
      count_calls(l.calls));
}

// A reader kept open (MCP's, the dashboard's) installs the views of rows once copies exist, and
// knows when it is stale: the copies need the view of runs too, before any run is archived.
TEST(ArchiveFold, AReaderOfCopiesIsCurrentUntilTheArchiveChanges) {
  Loop l = training_loop(60);  // ~1 s: fewer runs than a block of them
  std::string db = write_as_traced("few-runs.db", l.calls, 600 * kSec);
  auto d = Db::open(db, Db::Mode::kReadOnly);
  ASSERT_TRUE(d);
  ASSERT_GT((*d)->query_int("SELECT count(*) FROM recent_blocks")->value_or(0), 0);
  ASSERT_EQ((*d)->query_int("SELECT count(*) FROM run_blocks")->value_or(-1), 0);
  auto r = TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(r);
  EXPECT_TRUE((*r)->archive_current());
  // Every call once, from the copies: none of the runs shown.
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM calls"), count_calls(l.calls));
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM call_runs"), 0);
  // The copies gone (by another connection): the reader's views read the runs now.
  {
    auto w = Db::open(db, Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    ASSERT_TRUE(drop_recent_blocks(**w, INT64_MAX));
  }
  EXPECT_TRUE((*r)->archive_current());
  auto q =
      run_query(**r, "SELECT (SELECT count(*) FROM calls) + (SELECT sum(calls) FROM call_runs)");
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(std::get<int64_t>(q->rows[0][0]), count_calls(l.calls));
  EXPECT_EQ(
      sql_int(db, "SELECT count(*) FROM calls") + sql_int(db, "SELECT sum(calls) FROM call_runs"),
      count_calls(l.calls));
}

// A block whose calls all ended before the window, archived after one that keeps its copy
// (its sync ends 100 s later), keeps its copy too: the views of rows read every call from the
// first copy on from the copies, and would otherwise show neither its kept calls nor its runs.
TEST(ArchiveFold, ABlockAfterACopyKeepsItsCopyWhateverItsAge) {
  std::string db = test::temp_path("long-call.db");
  auto w = begin_trace(db);
  std::vector<Event> calls;
  calls.push_back(
      call(1000, 100 * kSec, "cuda_runtime", "cudaStreamSynchronize", EventKind::kSync));
  for (uint64_t i = 1; i < 2 * kArchiveBlockRows + 10; ++i)
    calls.push_back(launch(1000 + i * 10 * kUs, 2 * kUs + i % 5 * kUs));
  for (const Event& e : calls) ASSERT_TRUE(w->add(e));
  // 5 s later, a window of 4.5 s: the first block's sync ends in it, the second block's calls
  // all ended 4.4 s before it.
  int64_t now = w->to_wall(5 * kSec);
  while (true) {
    auto a = w->archive_rows(INT64_MAX, TraceWriter::Folding{now, 4'500'000'000, false});
    ASSERT_TRUE(a) << a.error().message;
    if (!a->rows) break;
  }
  ASSERT_TRUE(w->finish(SessionEnd{}));
  EXPECT_EQ(test::query_int(db, "SELECT count(*) FROM main.recent_blocks"), 2);
  EXPECT_GT(test::query_int(db, "SELECT count(*) FROM main.call_runs"), 0);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM calls") +
                sql_int(db, "SELECT coalesce(sum(calls), 0) FROM call_runs"),
            int64_t(calls.size()));
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM calls"), int64_t(calls.size()));
}

// Readers opened on a live trace before its first block (the dashboard's, an MCP session's, a
// query's) read it after the tracer archived rows: the archive's views are installed wherever
// the file can hold blocks, where they missed every archived call (the dashboard answered "damaged:
// 540 calls counted by the file's per-second summaries were not read").
TEST(ArchiveFold, AReaderOpenedBeforeTheFirstBlockReadsEveryCallAfterIt) {
  std::string db = test::temp_path("first-block.db");
  auto w = begin_trace(db);
  const int64_t n = 2 * int64_t(kArchiveBlockRows) + 10;
  for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(w->add(launch(1000 + i * 10 * kUs, 2 * kUs)));
  ASSERT_TRUE(w->commit());
  auto engine_reader = TraceReader::open(db, app::builtin_views());
  auto sql_reader = TraceReader::open(db, app::builtin_views());
  auto report_reader = TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(engine_reader && sql_reader && report_reader);
  ASSERT_EQ(test::query_int(db, "SELECT count(*) FROM main.call_blocks"), 0);
  ASSERT_TRUE(run_query(**sql_reader, "SELECT 1"));  // confined, as MCP's run_sql keeps it
  // The tracer archives (the rows' copies kept: all within the window); the trace goes on.
  int64_t now = w->to_wall(5 * kSec);
  while (true) {
    auto a = w->archive_rows(INT64_MAX, TraceWriter::Folding{now, 600 * kSec, false});
    ASSERT_TRUE(a) << a.error().message;
    if (!a->rows) break;
  }
  ASSERT_EQ(test::query_int(db, "SELECT count(*) FROM main.call_blocks"), 2);
  // The engine's read: every call, in rows and runs, and the file's counts agree.
  SqlTraceSource src(**engine_reader);
  int64_t seen = 0;
  src.call_runs(
      engine::Window{}, [&](const hal::Event&) { ++seen; },
      [&](const engine::CallRun& r) { seen += int64_t(r.calls); });
  EXPECT_EQ(src.error(), "");
  EXPECT_EQ(seen, n);
  // SQL on the reader confined before the archive.
  auto q = run_query(**sql_reader, "SELECT count(*) FROM calls");
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(std::get<int64_t>(q->rows[0][0]), n);
  // Still confined after installing the views.
  auto refused = run_query(**sql_reader, "CREATE TEMP TABLE x (a)");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("SQL rejected"), std::string::npos);
  ASSERT_TRUE(w->finish(SessionEnd{}));
}

TEST(ArchiveFold, ADamagedCopyIsAnErrorNamingIt) {
  const Traced& t = traced();
  std::string db = copy_of(t.traced, "damaged-copy.db");
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h,
                         "UPDATE recent_blocks SET data = substr(data, 1, 99) || x'5a' || "
                         "substr(data, 101) WHERE id = (SELECT max(id) FROM recent_blocks)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
  auto q = run_ingero({"query", "--db", db, "SELECT count(*) FROM calls"});
  EXPECT_EQ(q.rc, 1) << q.out;
  EXPECT_NE(q.err.find(": recent archive block "), std::string::npos) << q.err;
  EXPECT_NE(q.err.find(": damaged archive block: "), std::string::npos) << q.err;
}

}  // namespace
}  // namespace ingero::store

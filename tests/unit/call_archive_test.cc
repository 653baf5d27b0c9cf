// Archived calls (store/call_archive.h): `compact` moves call rows into compressed blocks,
// and every reader gives what it gave from the rows.
#include "store/call_archive.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/builtin_backends.h"
#include "store/event_rows.h"
#include "store/tiers.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::test {
namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// Two copies of resnet-clean (92,678 calls, 11,242 host events), compacted alike, one with its
// calls archived.
struct Pair {
  std::string rows, archived;
};
const Pair& resnet_pair() {
  static Pair p = [] {
    // In the process's scratch directory: temp_path's is removed when its test passes.
    Pair out{scratch_root() + "/call-archive-rows.db", scratch_root() + "/call-archive.db"};
    std::string cmd =
        "xz -dc '" INGERO_FIXTURES_DIR "/h100/resnet-clean.db.xz' > '" + out.rows + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::filesystem::copy_file(out.rows, out.archived);
    auto a = run_ingero({"compact", "--no-archive", out.rows});
    EXPECT_EQ(a.rc, 0) << a.err;
    auto b = run_ingero({"compact", out.archived});
    EXPECT_EQ(b.rc, 0) << b.err;
    EXPECT_NE(b.out.find("archived 92678 call rows in 23 blocks"), std::string::npos) << b.out;
    return out;
  }();
  return p;
}

TEST(CallArchive, CompactMovesEveryCallButTheNewestRowIntoBlocks) {
  const Pair& p = resnet_pair();
  // The newest row would stay (SQLite numbers the next row after it): here it is a host event.
  EXPECT_EQ(query_int(p.archived, "SELECT sum(rows) FROM call_blocks"), 92678);
  EXPECT_EQ(query_int(p.archived, "SELECT count(*) FROM main.events"), 11242);
  EXPECT_EQ(query_int(p.archived,
                      "SELECT count(*) FROM main.events WHERE source IN (SELECT id FROM sources "
                      "WHERE vendor <> 'host')"),
            0);
  // Read through the view, the file holds what it held.
  EXPECT_EQ(query_int(p.archived, "SELECT count(*) FROM events"), 103920);
  EXPECT_EQ(query_int(p.rows, "SELECT count(*) FROM call_blocks"), 0);
  // A third of the size or less (deterministic: the same rows, the same encoder).
  auto rows = std::filesystem::file_size(p.rows), archived = std::filesystem::file_size(p.archived);
  EXPECT_LT(archived * 3, rows) << archived << " vs " << rows;
}

TEST(CallArchive, ExplainReportAndExportGiveWhatTheRowsGave) {
  const Pair& p = resnet_pair();
  auto same = [&](std::vector<std::string> args, const std::string& what) {
    auto with = [&](const std::string& db) {
      std::vector<std::string> a;
      for (const auto& x : args) a.push_back(x == "DB" ? db : x);
      auto r = run_ingero(a);
      EXPECT_EQ(r.rc, 0) << what << ": " << r.err;
      return replace_all(r.out, db, "DB");
    };
    std::string a = with(p.rows), b = with(p.archived);
    EXPECT_GT(a.size(), 1000u) << what;
    EXPECT_TRUE(a == b) << what << " differs";
  };
  same({"explain", "--json", "--db", "DB"}, "explain --json");
  same({"explain", "--json", "--since", "5s", "--db", "DB"}, "explain --since 5s");
  same({"explain", "--json", "--pid", "532", "--db", "DB"}, "explain --pid");
  same({"export", "--format", "perfetto", "--db", "DB"}, "export");
  // The report's model, but for when it was made.
  auto report = [](const std::string& db) {
    auto r = run_ingero({"report", "--json", "--db", db, "-o", "-"});
    EXPECT_EQ(r.rc, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded());
    if (j.is_discarded()) return std::string();
    j.erase("generated_at_ns");
    j["trace"]["path"] = "DB";
    return j.dump();
  };
  std::string a = report(p.rows), b = report(p.archived);
  EXPECT_GT(a.size(), 10000u);
  EXPECT_TRUE(a == b) << "report --json differs";
}

TEST(CallArchive, SqlSeesTheArchivedRows) {
  const Pair& p = resnet_pair();
  const char* queries[] = {
      "SELECT count(*), sum(duration), count(DISTINCT stack_hash), sum(gpu_id), sum(arg0), "
      "sum(arg1) FROM events",
      "SELECT * FROM events WHERE id BETWEEN 5000 AND 5100 ORDER BY id",
      "SELECT * FROM events WHERE id = 40000",
      "SELECT * FROM calls ORDER BY ts_ns, id LIMIT 300",
      "SELECT * FROM calls ORDER BY ts_ns DESC, id DESC LIMIT 50",
      "SELECT op, count(*), sum(dur_ns) FROM calls GROUP BY op ORDER BY op",
      "SELECT count(*), sum(duration) FROM events WHERE timestamp > (SELECT min(timestamp) + "
      "10000000000 FROM events) AND timestamp <= (SELECT min(timestamp) + 12000000000 FROM "
      "events)",
      "SELECT count(*), sum(id) FROM events WHERE id > 90000 AND id < 90010.5",
      "SELECT max(id), min(id), max(timestamp) FROM events",
      "SELECT count(*) FROM host_events",
  };
  for (const char* q : queries) {
    auto a = run_ingero({"query", "--json", "--db", p.rows, q});
    auto b = run_ingero({"query", "--json", "--db", p.archived, q});
    ASSERT_EQ(a.rc, 0) << q << ": " << a.err;
    ASSERT_EQ(b.rc, 0) << q << ": " << b.err;
    EXPECT_GT(a.out.size(), 20u) << q;
    EXPECT_TRUE(a.out == b.out) << q << "\n"
                                << a.out.substr(0, 400) << "\n"
                                << b.out.substr(0, 400);
  }
}

TEST(CallArchive, ASecondCompactLeavesTheArchiveAsItIs) {
  const Pair& p = resnet_pair();
  std::string db = temp_path("twice.db");
  std::filesystem::copy_file(p.archived, db);
  auto r = run_ingero({"compact", db});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("archived 0 call rows in 0 blocks"), std::string::npos) << r.out;
  auto a = run_ingero({"explain", "--json", "--db", p.archived});
  auto b = run_ingero({"explain", "--json", "--db", db});
  EXPECT_EQ(replace_all(a.out, p.archived, "DB"), replace_all(b.out, db, "DB"));
}

// A live trace archives calls as they come, before they are old enough to fold: folding then
// reads them from their blocks and rewrites the blocks without the calls it folded. The file
// ends as one folded first and archived after: the same runs, the same calls kept, the same
// answers.
TEST(CallArchive, CallsArchivedBeforeFoldingFoldAsRowsDo) {
  std::string first = temp_path("folded-first.db"), later = temp_path("archived-first.db");
  for (const std::string& db : {first, later}) {
    std::string cmd = "xz -dc '" INGERO_FIXTURES_DIR "/h100/resnet-clean.db.xz' > '" + db + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  // Migrated, then every call archived while none is folded.
  auto migrated = run_ingero({"compact", "--no-archive", "--full-rows", "1000h", later});
  ASSERT_EQ(migrated.rc, 0) << migrated.err;
  {
    auto w = store::Db::open(later, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(w) << w.error().message;
    auto a = store::archive_calls(**w);
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->rows, 92678u);
  }
  // Both folded with a 1 s window (the trace is 13 s long).
  for (const std::string& db : {first, later}) {
    auto c = run_ingero({"compact", "--full-rows", "1s", db});
    ASSERT_EQ(c.rc, 0) << c.err;
  }
  // The same runs, field by field, and the same calls kept, all in blocks.
  std::string runs = "SELECT * FROM call_runs ORDER BY timestamp, tid, id";
  EXPECT_EQ(query_rows(later, runs), query_rows(first, runs));
  int64_t n = query_int(first, "SELECT count(*) FROM call_runs");
  int64_t folded = query_int(first, "SELECT sum(calls) FROM call_runs");
  EXPECT_GT(n, 1000);
  std::string kept = "SELECT * FROM events ORDER BY id";
  EXPECT_EQ(query_rows(later, kept), query_rows(first, kept));
  EXPECT_EQ(query_int(later, "SELECT sum(rows) FROM call_blocks"), 92678 - folded);
  EXPECT_EQ(query_int(first, "SELECT sum(rows) FROM call_blocks"), 92678 - folded);
  auto a = run_ingero({"explain", "--json", "--db", first});
  auto b = run_ingero({"explain", "--json", "--db", later});
  EXPECT_EQ(replace_all(a.out, first, "DB"), replace_all(b.out, later, "DB"));
}

TEST(CallArchive, ADamagedBlockIsAnErrorNamingIt) {
  const Pair& p = resnet_pair();
  auto damaged = [&](const std::string& name, const std::string& sql) {
    std::string db = temp_path(name);
    std::filesystem::copy_file(p.archived, db);
    sqlite3* h = nullptr;
    EXPECT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_changes(h), 1);
    sqlite3_close(h);
    return db;
  };
  // One byte of block 7's compressed rows altered.
  std::string flipped = damaged("flipped.db",
                                "UPDATE call_blocks SET data = substr(data, 1, 99) || x'5a' || "
                                "substr(data, 101) WHERE id = 7");
  auto e = run_ingero({"explain", "--db", flipped});
  EXPECT_EQ(e.rc, 1) << e.out.substr(0, 500);
  EXPECT_NE(e.err.find(flipped + ": archive block 7: damaged archive block: "), std::string::npos)
      << e.err;
  auto q = run_ingero({"query", "--db", flipped, "SELECT count(*) FROM events"});
  EXPECT_EQ(q.rc, 1) << q.out;
  EXPECT_NE(q.err.find("archive block 7"), std::string::npos) << q.err;
  // An entry whose time range hides the block from a window that holds its calls: the calls
  // read fall short of the file's per-second summaries (store/call_count_check.h).
  std::string hidden = damaged("hidden.db", "UPDATE call_blocks SET last_ts = 1 WHERE id = 22");
  auto h = run_ingero({"explain", "--since", "13s", "--db", hidden});
  EXPECT_EQ(h.rc, 1) << h.out.substr(0, 500);
  EXPECT_NE(h.err.find(hidden + ": damaged: 4096 calls counted by the file's per-second summaries "
                                "were not read"),
            std::string::npos)
      << h.err;
  EXPECT_NE(h.err.find("an archive block whose entry (call_blocks, run_blocks) holds a damaged "
                       "time range"),
            std::string::npos)
      << h.err;
  // An entry whose range is off but still selects the block: the rows say otherwise.
  std::string shifted =
      damaged("shifted.db", "UPDATE call_blocks SET first_ts = first_ts - 1 WHERE id = 5");
  auto sh = run_ingero({"explain", "--db", shifted});
  EXPECT_EQ(sh.rc, 1);
  EXPECT_NE(sh.err.find(shifted + ": archive block 5: its rows do not lie in the id and time "
                                  "range its entry says"),
            std::string::npos)
      << sh.err;
  // An entry that claims another count of rows.
  std::string miscounted =
      damaged("miscounted.db", "UPDATE call_blocks SET rows = rows + 1 WHERE id = 3");
  auto m = run_ingero({"explain", "--db", miscounted});
  EXPECT_EQ(m.rc, 1);
  EXPECT_NE(m.err.find("archive block 3 holds 4096 rows where its entry says 4097"),
            std::string::npos)
      << m.err;
}

// Calls of two nodes over the same seconds, with equal start times, archived in blocks of 7
// rows: the blocks overlap in time, and reads in time order merge them.
TEST(CallArchive, OverlappingBlocksAreReadInTimeOrder) {
  constexpr int64_t kBase = 1'700'000'000'000'000'000;
  std::vector<std::string> parts;
  for (int node = 0; node < 2; ++node) {
    std::string path = temp_path("node" + std::to_string(node) + ".db");
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w) << w.error().message;
    store::SessionInfo si;
    si.node = "node-" + std::to_string(node);
    si.mono_offset_ns = kBase;
    ASSERT_TRUE((*w)->begin_session(si));
    for (int i = 0; i < 500; ++i) {
      // Node 1 starts some calls at node 0's times: ties broken by id.
      int64_t ts = i * 1000 + (node == 1 && i % 3 ? 500 : 0);
      auto e = runtime_call(uint64_t(ts), 100 + uint64_t(i % 7), 100 + uint32_t(node),
                            100 + uint32_t(i % 3), hal::EventKind::kLaunch, "cudaLaunchKernel");
      ASSERT_TRUE((*w)->add(e));
    }
    ASSERT_TRUE((*w)->end_session(store::SessionEnd{}));
    parts.push_back(path);
  }
  std::string merged = temp_path("merged.db");
  auto m = run_ingero({"merge", parts[0], parts[1], "-o", merged});
  ASSERT_EQ(m.rc, 0) << m.err;
  std::string archived = temp_path("archived.db");
  std::filesystem::copy_file(merged, archived);
  {
    auto db = store::Db::open(archived, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    ASSERT_TRUE(store::migrate(**db));
    auto a = store::archive_calls(**db, {.block_rows = 7});
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->rows, 999u);    // all but the newest row
    EXPECT_EQ(a->blocks, 144u);  // 72 of each node's: a block holds one node
  }
  auto read = [](const std::string& path, store::EventFilter f) {
    std::vector<std::string> out;
    auto r = store::TraceReader::open(path, app::builtin_views());
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return out;
    store::StringPool strings;
    auto st = store::for_each_event(
        (*r)->db(), store::EventCursor::Rows::kCalls, f, strings,
        [&](const hal::Event& e) -> ingero::Status {
          out.push_back(std::to_string(e.ts_ns) + "/" + std::to_string(e.pid) + "/" +
                        std::to_string(e.tid) + "/" + std::to_string(e.dur_ns));
          return {};
        });
    EXPECT_TRUE(st) << st.error().message;
    return out;
  };
  store::EventFilter all;
  auto rows = read(merged, all);
  ASSERT_EQ(rows.size(), 1000u);
  EXPECT_EQ(read(archived, all), rows);
  store::EventFilter window;
  window.from_ns = kBase + 123'500;
  window.to_ns = kBase + 377'000;
  auto in_window = read(merged, window);
  // Node 0: i = 124..377; node 1: the 84 multiples of 3 among them and the 169 others of
  // i = 123..376 (those start 500 ns later).
  EXPECT_EQ(in_window.size(), 254u + 253u);
  EXPECT_EQ(read(archived, window), in_window);
  store::EventFilter one = window;
  one.node = "node-1";
  one.pid = 101;
  EXPECT_EQ(read(archived, one), read(merged, one));
  EXPECT_EQ(read(archived, one).size(), 253u);
}

// A folded training loop: its runs archived too, every read as from the rows.
TEST(CallArchive, ArchivedRunsReadBackAsTheRuns) {
  using namespace store::tiers_fixture;
  std::string full = write_trace("loop-full.db", training_loop(200).calls);
  std::string rows = copy_of(full, "loop-rows.db"), archived = copy_of(full, "loop-archived.db");
  auto a = store::compact_trace(rows, 1, app::builtin_views(), false);
  auto b = store::compact_trace(archived, 1, app::builtin_views(), true);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->folded, a->folded);
  EXPECT_EQ(b->runs, a->runs);
  EXPECT_EQ(b->archived_runs, a->runs - 1);  // the newest run stays a row
  EXPECT_GT(b->archived_runs, 1000u);
  EXPECT_EQ(query_int(archived, "SELECT count(*) FROM main.call_runs"), 1);
  EXPECT_EQ(query_int(archived, "SELECT sum(calls) FROM main.run_blocks") +
                query_int(archived, "SELECT sum(calls) FROM main.call_runs"),
            int64_t(a->folded));
  for (std::vector<std::string> args :
       {std::vector<std::string>{"explain", "--json", "--db", "DB"},
        {"explain", "--json", "--since", "1500ms", "--db", "DB"},
        {"query", "--json", "--db", "DB", "SELECT * FROM call_runs ORDER BY timestamp, id"},
        {"query", "--json", "--db", "DB",
         "SELECT count(*), sum(calls) FROM call_runs WHERE timestamp > (SELECT min(timestamp) + "
         "1000000000 FROM call_runs)"}}) {
    auto with = [&](const std::string& db) {
      std::vector<std::string> v;
      for (const auto& x : args) v.push_back(x == "DB" ? db : x);
      auto r = run_ingero(v);
      EXPECT_EQ(r.rc, 0) << r.err;
      return replace_all(r.out, db, "DB");
    };
    std::string x = with(rows), y = with(archived);
    EXPECT_GT(x.size(), 30u);
    EXPECT_TRUE(x == y) << args[0] << " " << args[2] << "\n"
                        << x.substr(0, 300) << "\n"
                        << y.substr(0, 300);
  }
}

// A reader kept across requests (the MCP server's) opened on a file that can hold blocks and
// holds none reads the blocks a compact (or a live trace) archives since: its views are
// installed before the first block.
TEST(CallArchive, AReaderOpenedBeforeTheArchiveReadsIt) {
  const Pair& p = resnet_pair();
  std::string db = temp_path("later.db");
  std::filesystem::copy_file(p.rows, db);
  auto reader = store::TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(reader);
  EXPECT_TRUE((*reader)->archive_current());
  auto count = [](store::TraceReader& r) {
    auto n = r.db().query_int("SELECT count(*) FROM calls");
    return n && *n ? **n : -1;
  };
  EXPECT_EQ(count(**reader), 92678);
  {
    auto w = store::Db::open(db, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    auto a = store::archive_calls(**w);
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->rows, 92678u);
  }
  EXPECT_TRUE((*reader)->archive_current());
  EXPECT_EQ(count(**reader), 92678);  // it answered 0 when the views came with the first block
  auto again = store::TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(again);
  EXPECT_TRUE((*again)->archive_current());
  EXPECT_EQ(count(**again), 92678);
  // A reader opened once blocks exist (a live trace archives as it goes) reads the blocks
  // written after it: nothing to reopen.
  std::string live = temp_path("live.db");
  std::filesystem::copy_file(p.rows, live);
  auto archive = [&](store::ArchiveOptions o) {
    auto w = store::Db::open(live, store::Db::Mode::kReadWrite);
    if (!w) return uint64_t(0);
    auto a = store::archive_calls(**w, o);
    return a ? a->rows : 0;
  };
  uint64_t first = archive({.through_id = 50000});
  EXPECT_GT(first, 40000u);
  auto open_early = store::TraceReader::open(live, app::builtin_views());
  ASSERT_TRUE(open_early);
  EXPECT_EQ(count(**open_early), 92678);
  EXPECT_EQ(archive({}), 92678 - first);
  EXPECT_TRUE((*open_early)->archive_current());
  EXPECT_EQ(count(**open_early), 92678);
}

// A compact killed in the middle of a batch leaves its changes in the rollback journal. A
// reader says so and what to do; the next compact rolls it back and finishes the archive.
TEST(CallArchive, AnInterruptedCompactIsRolledBackAndFinishedByTheNext) {
  const Pair& p = resnet_pair();
  std::string db = temp_path("interrupted.db");
  std::filesystem::copy_file(p.rows, db);
  // A writer that dies inside its transaction, after SQLite spilled changed pages to the file.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sqlite3* h = nullptr;
    if (sqlite3_open(db.c_str(), &h) != SQLITE_OK) _exit(2);
    sqlite3_exec(h, "PRAGMA cache_size = 2; BEGIN IMMEDIATE; DELETE FROM events WHERE id < 60000",
                 nullptr, nullptr, nullptr);
    _exit(0);  // no COMMIT, no ROLLBACK, no close
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(std::filesystem::exists(db + "-journal"));
  auto e = run_ingero({"explain", "--db", db});
  EXPECT_EQ(e.rc, 1);
  EXPECT_NE(e.err.find(db + ": a write to it was interrupted and " + db +
                       "-journal holds what it changed; `ingero compact " + db + "` rolls it back"),
            std::string::npos)
      << e.err;
  auto c = run_ingero({"compact", db});
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("archived 92678 call rows in 23 blocks"), std::string::npos) << c.out;
  EXPECT_FALSE(std::filesystem::exists(db + "-journal"));
  auto a = run_ingero({"explain", "--json", "--db", p.archived});
  auto b = run_ingero({"explain", "--json", "--db", db});
  EXPECT_EQ(b.rc, 0) << b.err;
  EXPECT_TRUE(replace_all(a.out, p.archived, "DB") == replace_all(b.out, db, "DB"));
}

}  // namespace
}  // namespace ingero::test

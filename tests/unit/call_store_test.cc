// The call store of schema 10 (store/call_store.h): calls written once, into blocks, from the
// decoded event; readers of rows and the engine each read their form of them; a block folded
// for good; a damaged block named; a session killed mid-trace repaired by compact.
#include "store/call_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "app/builtin_backends.h"
#include "engine/analysis.h"
#include "engine/result_json.h"
#include "store/compact.h"
#include "store/plain_copy.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;
using hal::Event;
using hal::EventKind;
using test::query_int;
using test::query_rows;
using test::temp_path;

int64_t calls_in(const Loop& l) { return int64_t(l.launches + l.others); }

// The engine's whole answer, as `explain --json` gives it.
std::string explain_json(const std::string& path) {
  auto reader = TraceReader::open(path, app::builtin_views());
  EXPECT_TRUE(reader) << (reader ? "" : reader.error().message);
  if (!reader) return "";
  SqlTraceSource src(**reader);
  auto a = engine::analyze(src, engine::Window{});
  EXPECT_EQ(src.error(), "");
  return engine::report_json(a, engine::ReportHeader{}).dump();
}

TEST(CallStore, CallsAndHostEventsAreWrittenOnceIntoBlocksOfTheirOwn) {
  Loop l = training_loop(120);  // ~14,700 calls and ~1,200 host events
  std::string path = write_trace("blocks.db", l.calls, true);
  int64_t host = 0;
  for (const Event& e : l.calls) host += hal::is_host_kind(e.kind);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM host_rows"), host);
  EXPECT_EQ(query_int(path, "SELECT sum(events) FROM host_store"), host);
  EXPECT_EQ(query_int(path, "SELECT sum(calls) FROM call_store"), calls_in(l));
  // Whole blocks of 4,096 calls but the last, every one folded (no block is left filling).
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store WHERE calls <> 4096"), 1);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store WHERE kept IS NULL"), 0);
  // No table of call or host event rows: `events` and `host_rows` are views.
  EXPECT_EQ(query_int(path,
                      "SELECT count(*) FROM sqlite_master WHERE name IN ('events', 'host_rows') "
                      "AND type = 'view'"),
            2);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM events"), calls_in(l) + host);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM calls"), calls_in(l));
  EXPECT_EQ(query_int(path, "SELECT sum(calls) FROM call_summaries"), calls_in(l));
  // One id space: each id once, calls and host events alike.
  EXPECT_EQ(query_int(path, "SELECT count(DISTINCT id) FROM events"), calls_in(l) + host);
}

// A reader of a live trace sees the calls of the block still filling, as of the last commit.
TEST(CallStore, ALiveReaderSeesTheFillingBlockAsOfTheLastCommit) {
  std::string path = temp_path("live.db");
  auto w = begin_trace(path, true);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(w->add(launch(uint64_t(i) * 30 * kUs, 5 * kUs)));
  ASSERT_TRUE(w->commit());
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM calls"), 1000);
  for (int i = 1000; i < 1500; ++i) ASSERT_TRUE(w->add(launch(uint64_t(i) * 30 * kUs, 5 * kUs)));
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM calls"), 1000);  // not committed yet
  ASSERT_TRUE(w->commit());
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM calls"), 1500);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store"), 1);  // rewritten, one block
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource src(**reader);
  uint64_t n = 0;
  src.calls({}, [&](const Event&) { ++n; });
  EXPECT_EQ(n, 1500u);
  EXPECT_EQ(src.error(), "");
  ASSERT_TRUE(w->finish(SessionEnd{}));
}

// A writer fed faster than it is asked to commit (full rate: ~40 blocks between two 200 ms
// commits) does not hold every full block in memory until then: once full blocks hold 4 blocks'
// worth of events (16,384), it commits them on its own. Host events alike.
TEST(CallStore, AWriterFedFasterThanItCommitsWritesFullBlocksOnItsOwn) {
  std::string path = temp_path("full-rate.db");
  auto w = begin_trace(path, true);
  const int block = int(kCallBlockRows);
  for (int i = 0; i < 4 * block - 1; ++i)
    ASSERT_TRUE(w->add(launch(uint64_t(i) * 3 * kUs, 1 * kUs)));
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store"), 0);     // 3 full, none committed
  ASSERT_TRUE(w->add(launch(uint64_t(4 * block) * 3 * kUs, 1 * kUs)));  // the fourth fills
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store"), 4);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM calls"), 4 * block);
  for (int i = 0; i < 4 * block; ++i) {
    Event e =
        host_event(uint64_t(4 * block + i) * 3 * kUs, "sched_switch", EventKind::kSchedSwitch);
    ASSERT_TRUE(w->add(e));
  }
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM host_store"), 4);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM host_events"), 4 * block);
  ASSERT_TRUE(w->add(launch(uint64_t(9 * block) * 3 * kUs, 1 * kUs)));
  ASSERT_TRUE(w->finish(SessionEnd{}));
  EXPECT_EQ(w->written(), uint64_t(8 * block + 1));
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM calls"), 4 * block + 1);
  EXPECT_EQ(query_int(path, "SELECT count(DISTINCT id) FROM events"), 8 * block + 1);
}

// Folding a block for good drops its rows, not its calls: SQL sees each call once (a row, or
// in a run), the summaries count all, and the engine, which reads the folded form whatever the
// age, gives the same answer byte for byte.
TEST(CallStore, FoldingForGoodKeepsEveryCallOnceAndTheEnginesAnswer) {
  Loop l = training_loop(200);
  std::string path = write_trace("fold-for-good.db", l.calls, true);
  std::string before = explain_json(path);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM calls"), calls_in(l));
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_runs"), 0);
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w) << w.error().message;
    auto n = (*w)->fold_blocks(INT64_MAX);
    ASSERT_TRUE(n) << n.error().message;
    EXPECT_EQ(int64_t(*n), query_int(path, "SELECT sum(calls) FROM call_store WHERE folded > 0"));
  }
  int64_t rows = query_int(path, "SELECT count(*) FROM calls");
  int64_t in_runs = query_int(path, "SELECT sum(calls) FROM call_runs");
  EXPECT_LT(rows * 5, calls_in(l));  // most launches went into runs
  EXPECT_EQ(rows + in_runs, calls_in(l));
  EXPECT_EQ(query_int(path, "SELECT sum(calls) FROM call_summaries"), calls_in(l));
  EXPECT_EQ(explain_json(path), before);
}

// The tracer's shipper: calls not yet in ClickHouse keep their rows.
TEST(CallStore, BlocksAboveTheShippedIdKeepTheirRows) {
  Loop l = training_loop(200);
  std::string path = write_trace("fold-shipped.db", l.calls, true);
  int64_t through = query_int(path, "SELECT last_id FROM call_store ORDER BY id LIMIT 1 OFFSET 2");
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w);
  ASSERT_TRUE((*w)->fold_blocks(INT64_MAX, through));
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store WHERE full IS NULL AND last_id > " +
                                std::to_string(through)),
            0);
  EXPECT_EQ(query_int(path,
                      "SELECT count(*) FROM call_store WHERE full IS NOT NULL AND "
                      "folded > 0 AND last_id <= " +
                          std::to_string(through)),
            0);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM calls WHERE id > " + std::to_string(through)),
            query_int(path, "SELECT sum(calls) FROM call_store WHERE last_id > " +
                                std::to_string(through)));
}

// Seen at entry only: the count and arguments exact, no duration, no return.
TEST(CallStore, UntimedCallsHaveNoDurationNorReturnAndAreCounted) {
  std::vector<Event> calls;
  for (int i = 0; i < 300; ++i) {
    Event e = launch(uint64_t(i) * 40 * kUs, 0);
    e.timed = i % 30 == 0;  // one in 30 timed
    if (e.timed) e.dur_ns = 6 * kUs;
    e.has_ret = e.timed;
    e.set(hal::Field::kFunc, 0xabc0 + uint64_t(i % 3));
    calls.push_back(e);
  }
  std::string path = write_trace("untimed.db", calls, true);
  EXPECT_EQ(query_rows(path,
                       "SELECT status, count(*), count(dur_ns), count(ret), count(func) "
                       "FROM calls GROUP BY status ORDER BY status"),
            (std::vector<std::vector<std::string>>{{"ok", "10", "10", "10", "10"},
                                                   {"untimed", "290", "0", "0", "290"}}));
  EXPECT_EQ(query_rows(path, "SELECT sum(calls), sum(timed), sum(sum_ns) FROM call_summaries"),
            (std::vector<std::vector<std::string>>{{"300", "10", "60000"}}));
  EXPECT_EQ(query_int(path, "SELECT untimed FROM call_store"), 290);
}

TEST(CallStore, ADamagedBlockIsAnErrorNamingIt) {
  Loop l = training_loop(60);
  std::string path = write_trace("damaged-block.db", l.calls, true);
  {
    auto db = Db::open(path, Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    // One byte of the first block's calls flipped, in the middle of its compressed data.
    ASSERT_TRUE(
        (*db)->exec("UPDATE call_store SET full = substr(full, 1, length(full) / 2) || "
                    "x'5a' || substr(full, length(full) / 2 + 2) WHERE id = 1"));
  }
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  auto q = run_query(**reader, "SELECT count(*) FROM calls");
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("call block 1: damaged archive block"), std::string::npos)
      << q.error().message;
}

// Each reader reads its own form of a block and fails on that form's damage: SQL reads every
// call (`full`), the engine the folded form where there is one (`kept_data`, `run_data`). The
// engine's answer from an intact folded form is the intact trace's, whatever `full` holds.
TEST(CallStore, EachReaderFailsOnTheDamageOfTheFormItReads) {
  Loop l = training_loop(60);
  std::string intact = write_trace("form-intact.db", l.calls, true);
  ASSERT_GT(query_int(intact,
                      "SELECT count(*) FROM call_store WHERE kept_data IS NOT NULL AND "
                      "full IS NOT NULL AND id = 1"),
            0);
  const std::string flip_middle_of =
      "UPDATE call_store SET {c} = substr({c}, 1, length({c}) / 2) "
      "|| x'5a' || substr({c}, length({c}) / 2 + 2) WHERE id = 1";
  auto damage = [&](const std::string& name, const std::string& column) {
    std::string path = copy_of(intact, name);
    std::string sql = flip_middle_of;
    for (size_t at; (at = sql.find("{c}")) != std::string::npos;) sql.replace(at, 3, column);
    auto db = Db::open(path, Db::Mode::kReadWrite);
    EXPECT_TRUE(db);
    if (db) {
      EXPECT_TRUE((*db)->exec(sql));
    }
    return path;
  };
  std::string full = damage("form-full.db", "full");
  std::string kept = damage("form-kept.db", "kept_data");
  auto explain = [](const std::string& path) {
    std::string out, err;
    int rc = test::run_command({INGERO_BIN, "explain", "--db", path, "--json"}, &out, &err);
    return std::make_tuple(rc, out, err);
  };
  auto sql = [](const std::string& path) {
    std::string out, err;
    int rc = test::run_command({INGERO_BIN, "query", "--db", path, "SELECT count(*) FROM calls"},
                               &out, &err);
    return std::make_pair(rc, err);
  };
  auto [rc0, out0, err0] = explain(intact);
  ASSERT_EQ(rc0, 0) << err0;
  // `full` damaged: SQL fails naming the block; the engine, reading the folded form, answers
  // as on the intact file.
  EXPECT_EQ(sql(full).first, 1);
  EXPECT_NE(sql(full).second.find("call block 1: damaged archive block"), std::string::npos)
      << sql(full).second;
  auto [rc1, out1, err1] = explain(full);
  EXPECT_EQ(rc1, 0) << err1;
  // The same answer, but for the file's name.
  for (size_t at; (at = out1.find(full)) != std::string::npos;)
    out1.replace(at, full.size(), intact);
  EXPECT_EQ(out1, out0);
  // `kept_data` damaged: the engine fails naming the block and prints nothing; SQL, reading
  // `full`, counts every call.
  auto [rc2, out2, err2] = explain(kept);
  EXPECT_EQ(rc2, 1);
  EXPECT_NE(err2.find(kept + ": call block 1: damaged archive block"), std::string::npos) << err2;
  EXPECT_EQ(out2, "");
  EXPECT_EQ(sql(kept).first, 0) << sql(kept).second;
  EXPECT_EQ(query_int(kept, "SELECT count(*) FROM calls"), calls_in(l));
}

// A tracer killed in its first seconds leaves calls no per-second summary counts: the
// latency quantiles came from the summaries alone and read 0, and untimed launches read back
// with a mean of 0. Readers now take such calls into account in memory
// (store/unsummarised_calls.h): explain's figures on the killed file are those of the same
// file once compact has written its summaries.
TEST(CallStore, AKilledSessionReadsAsItWillOnceCompacted) {
  std::vector<Event> calls;
  for (int i = 0; i < 6000; ++i) {  // 0.6 s: killed before any second was summarised
    Event e = launch(uint64_t(i) * 100 * kUs, 0);
    e.timed = i % 4 == 0;
    if (e.timed) e.dur_ns = (5 + i % 7) * kUs;
    e.has_ret = e.timed;
    calls.push_back(e);
  }
  std::string path = temp_path("killed-early.db");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = begin_trace(path, true);
    size_t n = 0;
    for (const Event& e : calls) {
      if (!w->add(e)) _exit(2);
      if (++n % 1000 == 0 && !w->commit()) _exit(3);
    }
    _exit(0);  // as SIGKILL: no finish, no destructor
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(query_int(path, "SELECT count(*) FROM call_seconds"), 0);
  ASSERT_EQ(query_int(path, "SELECT sum(calls) FROM call_store"), 6000);
  auto stats_of = [](const std::string& db) {
    std::string out, err;
    EXPECT_EQ(test::run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0)
        << err;
    auto j = nlohmann::json::parse(out, nullptr, false);
    return j.is_object() ? j["stats"] : nlohmann::json();
  };
  std::string compacted = copy_of(path, "killed-early-compacted.db");
  if (std::filesystem::exists(path + "-wal"))  // what the killed writer had committed
    std::filesystem::copy_file(path + "-wal", compacted + "-wal",
                               std::filesystem::copy_options::overwrite_existing);
  auto c = compact_trace(compacted, kDefaultFullRowsNs, app::builtin_views());
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->repaired.calls_summarised, 6000u);
  nlohmann::json killed = stats_of(path), after = stats_of(compacted);
  ASSERT_EQ(killed.size(), 1u) << killed.dump();
  EXPECT_EQ(killed, after);
  // Timed launches took 5-11 us: so do the quantiles, and the untimed ones read back at the
  // timed ones' mean, as the average of all says.
  uint64_t sum = 0, timed = 0;
  for (const Event& e : calls)
    if (e.timed) sum += e.dur_ns, ++timed;
  EXPECT_EQ(killed[0]["calls"], 6000);
  EXPECT_EQ(killed[0]["min_ns"], 5000);
  EXPECT_EQ(killed[0]["max_ns"], 11000);
  EXPECT_GE(killed[0]["p50_ns"].get<int64_t>(), 5000) << killed.dump();
  EXPECT_LE(killed[0]["p99_ns"].get<int64_t>(), 11000) << killed.dump();
  EXPECT_EQ(killed[0]["avg_ns"], sum / timed) << killed.dump();
  // The file itself is not written: its summaries are still missing.
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_seconds"), 0);
}

// A tracer killed mid-trace leaves the block then filling (every call of the last commit, no
// folded form) and the last seconds unsummarised: compact folds the one and summarises the
// other, and the session reads as ended.
TEST(CallStore, CompactRepairsATraceWhoseTracerWasKilled) {
  Loop l = training_loop(100);
  std::string path = temp_path("killed.db");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = begin_trace(path, true);
    size_t n = 0;
    for (const Event& e : l.calls) {
      if (!w->add(e)) _exit(2);
      if (++n % 1000 == 0 && !w->commit()) _exit(3);
    }
    if (!w->commit()) _exit(4);
    _exit(0);  // as SIGKILL: no finish, no destructor
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store WHERE kept IS NULL"), 1);
  EXPECT_LT(query_int(path, "SELECT sum(calls) FROM call_summaries"), calls_in(l));
  EXPECT_EQ(query_int(path, "SELECT stopped_at FROM sessions"), 0);
  auto c = compact_trace(path, kDefaultFullRowsNs, app::builtin_views());
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->repaired.blocks_folded, 1u);
  EXPECT_GT(c->repaired.calls_summarised, 0u);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store WHERE kept IS NULL"), 0);
  EXPECT_EQ(query_int(path, "SELECT sum(calls) FROM call_summaries"), calls_in(l));
  EXPECT_GT(query_int(path, "SELECT stopped_at FROM sessions"), 0);
  EXPECT_EQ(query_rows(path, "SELECT exit_reason FROM sessions"),
            (std::vector<std::vector<std::string>>{{"unclean stop (repaired)"}}));
  // The events the killed session stored, as its blocks hold them: its own count was never
  // written (0), or written at a commit before the kill.
  EXPECT_EQ(query_int(path, "SELECT events_stored FROM sessions"), int64_t(l.calls.size()));
}

// 3,000 launches 40 us apart, one in 30 timed at 6 us, the rest seen at entry only (as the
// tracer's default launch timing leaves them).
std::vector<Event> launches_timed_one_in_30() {
  std::vector<Event> calls;
  for (int i = 0; i < 3000; ++i) {
    Event e = launch(uint64_t(i) * 40 * kUs, 0);
    e.timed = i % 30 == 0;
    if (e.timed) e.dur_ns = 6 * kUs;
    e.has_ret = e.timed;
    calls.push_back(e);
  }
  return calls;
}

// The sqlite3 shell has no ingero_calls: it cannot read a file of schema 10's calls, and reads
// every call of its plain copy (`ingero export --format sqlite`).
// Launches seen at entry only have no duration (NULL): the plain copy refused them
// ("NOT NULL constraint failed: events_plain.duration"), so `export --format sqlite` failed on
// every trace the tracer writes by default. The copy keeps them untimed, as the calls view
// shows them.
TEST(CallStore, ThePlainCopyKeepsUntimedCallsWithoutADuration) {
  std::vector<Event> calls = launches_timed_one_in_30();
  std::string path = write_trace("plain-untimed.db", calls, true);
  const std::string sql =
      "SELECT status, count(*), count(dur_ns), sum(dur_ns) FROM calls GROUP BY status ORDER BY "
      "status";
  auto want = query_rows(path, sql);
  ASSERT_EQ(want, (std::vector<std::vector<std::string>>{{"ok", "100", "100", "600000"},
                                                         {"untimed", "2900", "0", "NULL"}}));
  std::string dir = temp_path("plain-untimed");
  std::filesystem::create_directories(dir);
  std::string out, err;
  ASSERT_EQ(test::run_command(
                {INGERO_BIN, "export", "--format", "sqlite", "--db", path, "-o", dir + "/plain.db"},
                &out, &err),
            0)
      << err;
  EXPECT_EQ(query_rows(dir + "/plain.db", sql), want);
  EXPECT_EQ(query_int(dir + "/plain.db", "SELECT count(*) FROM events WHERE duration IS NULL"),
            2900);
}

// Found by a hostile-testing helper (helper-70): ingero read its own plain copy otherwise than
// the trace: every untimed launch at 0 ns (a launch's mean 392 ns read 12 ns, "12% of the step
// enqueueing" 0%), and every call of a folded run as timed and successful. The copy keeps the
// summaries and its runs' timed counts, and is read with them.
TEST(CallStore, ThePlainCopyOfUntimedAndFoldedLaunchesReadsAsTheTraceItWas) {
  std::vector<Event> calls = launches_timed_one_in_30();
  std::string path = write_trace("plain-folded.db", calls, true);
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->fold_blocks(INT64_MAX));
  }
  ASSERT_GT(query_int(path, "SELECT count(*) FROM call_runs"), 0);
  std::string copy = temp_path("plain-folded-copy.db");
  auto c = write_plain_copy(path, copy, app::builtin_views());
  ASSERT_TRUE(c) << c.error().message;
  const std::string want = explain_json(path);
  EXPECT_EQ(explain_json(copy), want);
  uint64_t avg = 0;
  const auto parsed = nlohmann::json::parse(want);
  for (const auto& s : parsed["stats"])
    if (s["op"] == "cudaLaunchKernel") avg = s["avg_ns"].get<uint64_t>();
  EXPECT_EQ(avg, 6 * kUs);  // the untimed launches at their timed mean
}

TEST(CallStore, ThePlainCopyGivesTheSqliteShellEveryCallAndHostEventAsARow) {
  Loop l = training_loop(120);
  std::string path = write_trace("plain-src.db", l.calls, true);
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->fold_blocks(INT64_MAX));  // folded for good: runs have no rows
  }
  int64_t rows = query_int(path, "SELECT count(*) FROM calls");
  int64_t runs = query_int(path, "SELECT count(*) FROM call_runs");
  ASSERT_GT(runs, 0);
  ASSERT_LT(rows, calls_in(l));
  auto shell = [](const std::string& db, const std::string& sql) {
    std::string out, err;
    int rc = test::run_command({"sqlite3", db, sql}, &out, &err);
    return std::to_string(rc) + ":" + out + err;
  };
  EXPECT_NE(shell(path, "SELECT count(*) FROM calls").find("no such table: main.ingero_calls"),
            std::string::npos);
  EXPECT_NE(shell(path, "SELECT count(*) FROM host_rows").find("no such table: main.ingero_host"),
            std::string::npos);
  const std::string host_sql = "SELECT * FROM host_events ORDER BY id";
  auto host = query_rows(path, host_sql);
  ASSERT_GT(host.size(), 1000u);
  std::string copy = temp_path("plain.db");
  auto c = write_plain_copy(path, copy, app::builtin_views());
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(int64_t(c->calls), rows);
  EXPECT_EQ(int64_t(c->runs), runs);
  EXPECT_EQ(c->host_events, host.size());
  EXPECT_EQ(shell(copy, "SELECT count(*) FROM host_events"),
            "0:" + std::to_string(host.size()) + "\n");
  EXPECT_EQ(query_rows(copy, host_sql), host);
  EXPECT_EQ(shell(copy, "SELECT count(*) FROM calls"), "0:" + std::to_string(rows) + "\n");
  EXPECT_EQ(shell(copy, "SELECT sum(calls) FROM call_runs"),
            "0:" + std::to_string(query_int(path, "SELECT sum(calls) FROM call_runs")) + "\n");
  EXPECT_EQ(shell(copy, "SELECT sum(calls) FROM call_summaries"),
            "0:" + std::to_string(calls_in(l)) + "\n");
  // ingero reads the copy as the trace it was.
  EXPECT_EQ(query_rows(copy, "SELECT op, count(*), sum(dur_ns) FROM calls GROUP BY op"),
            query_rows(path, "SELECT op, count(*), sum(dur_ns) FROM calls GROUP BY op"));
  EXPECT_EQ(explain_json(copy), explain_json(path));
}

}  // namespace
}  // namespace ingero::store

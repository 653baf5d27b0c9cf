// The wall clock steps while ingero traces (NTP correcting a drifted host, a VM resumed from a
// snapshot): the tracer stamps events with CLOCK_MONOTONIC shifted once to Unix time, and every
// other time it stores or compares with them (the session's end, the analysis window, the
// retention cut, the host snapshots) must be on that same clock, or a step splits them. A
// stand-in (LD_PRELOAD, tests/fake_vendor/clock_step.c) steps CLOCK_REALTIME by an hour once
// the planted training loop is done; the session must still hold every call, find the loop's
// hidden sync, and bound every row it stored.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "test_paths.h"
#include "tests/support/http_client.h"
#include "tests/support/otlp_receiver.h"
#include "tests/support/run_ingero.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

constexpr int64_t kHour = 3'600'000'000'000LL;

struct Stepped {
  std::string db;
  TraceRun run;
  int64_t decoded = -1;  // the calls the tracer says it decoded
};

// A per-row sync loop (40 steps: more calls than a block holds), 1.5 s idle, the step, then
// 2.5 s more: host snapshots, retention and folding passes and the live analysis run on both
// sides of it before the session ends.
Stepped trace_through_a_step(const std::string& name, int64_t step_ns,
                             const std::vector<std::string>& flags) {
  std::string dir = temp_path(name);
  std::filesystem::create_directories(dir);
  Stepped s{temp_path(name + ".db"), {}, -1};
  std::string script = "chrt -f 20 " + std::string(INGERO_STEP_FAULTS) +
                       " rowsync 40; sleep 1.5; touch " + dir + "/step; sleep 2.5";
  std::vector<std::string> extra = {"--prometheus", "127.0.0.1:0"};
  extra.insert(extra.end(), flags.begin(), flags.end());
  s.run = trace_command(s.db, {"/bin/sh", "-c", script}, extra,
                        {"LD_PRELOAD=" INGERO_CLOCK_STEP, "CLOCK_STEP_FILE=" + dir + "/step",
                         "CLOCK_STEP_NS=" + std::to_string(step_ns)});
  std::smatch m;
  if (std::regex_search(s.run.err, m, std::regex(R"(stopped \([^)]*\): (\d+) calls)")))
    s.decoded = std::stoll(m[1]);
  return s;
}

// Every call stored, every stored row within the session, the planted finding found.
void expect_one_clock(const Stepped& s) {
  ASSERT_EQ(s.run.rc, 0) << s.run.err;
  ASSERT_GT(s.decoded, 4096) << s.run.err;
  // Every call keeps its row: none is older than --full-rows.
  EXPECT_EQ(query_int(s.db, "SELECT count(*) FROM calls"), s.decoded);
  EXPECT_EQ(query_int(s.db, "SELECT coalesce(sum(calls), 0) FROM call_runs"), 0);
  for (const char* sql :
       {"SELECT count(*) FROM calls c, sessions s WHERE c.ts_ns NOT BETWEEN s.started_at AND "
        "s.stopped_at",
        "SELECT count(*) FROM system_snapshots x, sessions s WHERE x.timestamp NOT BETWEEN "
        "s.started_at AND s.stopped_at",
        "SELECT count(*) FROM process_stats x, sessions s WHERE x.timestamp NOT BETWEEN "
        "s.started_at AND s.stopped_at",
        "SELECT count(*) FROM causal_chains x, sessions s WHERE x.detected_at NOT BETWEEN "
        "s.started_at AND s.stopped_at"})
    EXPECT_EQ(query_int(s.db, sql), 0) << sql;
  // Nothing was old enough for retention, and nothing went (a cut an hour ahead leaves each
  // table its newest row): the per-second summaries count every call, and there is a snapshot
  // a second over the 4 s.
  EXPECT_EQ(query_rows(s.db, "SELECT retention_calls, retention_events FROM sessions"),
            (std::vector<std::vector<std::string>>{{"0", "0"}}));
  EXPECT_EQ(query_int(s.db, "SELECT sum(calls) FROM call_seconds"), s.decoded);
  EXPECT_GE(query_int(s.db, "SELECT count(*) FROM system_snapshots"), 4);
  // Every duration is the monotonic clock's: none is near the hour the wall clock stepped.
  EXPECT_LT(query_int(s.db, "SELECT max(dur_ns) FROM calls"), 60'000'000'000LL);
  // Without a GPU every call of the real runtime fails (failed_calls), before the finding. A
  // loaded machine (a CI VM whose host takes the core) may stall a few calls past a millisecond:
  // an op's tail with no host cause, which says nothing of the clocks, is left out.
  EXPECT_EQ(query_rows(s.db, "SELECT rule FROM causal_chains WHERE rule <> 'tail_latency'"),
            (std::vector<std::vector<std::string>>{{"failed_calls"}, {"hidden_sync"}}))
      << s.run.err;
}

TEST(ClockStep, AWallClockSteppedBackAnHourSplitsNothing) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  REQUIRE_FILE(INGERO_CLOCK_STEP);
  REQUIRE_FILE("/usr/bin/chrt");
  auto s = trace_through_a_step("back", -kHour, {});
  expect_one_clock(s);
}

// Forward, with a 10-minute retention and rows kept 10 minutes: cuts taken on the stepped clock
// would drop the full block of calls and fold the rest.
TEST(ClockStep, AWallClockSteppedForwardAnHourKeepsTheRetainedWindow) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  REQUIRE_FILE(INGERO_CLOCK_STEP);
  REQUIRE_FILE("/usr/bin/chrt");
  auto s = trace_through_a_step("forward", kHour, {"--retain", "10m", "--full-rows", "10m"});
  expect_one_clock(s);
}

// Forward, with rows kept 10 minutes and no retention: a fold cut on the stepped clock would take
// the rows of the full block of calls.
TEST(ClockStep, AWallClockSteppedForwardAnHourFoldsNoRecentCall) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  REQUIRE_FILE(INGERO_CLOCK_STEP);
  REQUIRE_FILE("/usr/bin/chrt");
  auto s = trace_through_a_step("fold", kHour, {"--full-rows", "10m"});
  expect_one_clock(s);
}

// With --otlp, after a step back: the session's chain goes out as a log record, and every metric
// point, on the session's clock: inside the session the file holds, or just past its end (the
// last export), not an hour before it.
TEST(ClockStep, OtlpRecordsAndPointsStayOnTheSessionsClock) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  REQUIRE_FILE(INGERO_CLOCK_STEP);
  REQUIRE_FILE("/usr/bin/chrt");
  OtlpReceiver rx;
  auto s = trace_through_a_step("otlp", -kHour, {"--otlp", rx.url(), "--otlp-interval", "1s"});
  expect_one_clock(s);
  auto session = query_rows(s.db, "SELECT started_at, stopped_at FROM sessions");
  ASSERT_EQ(session.size(), 1u);
  uint64_t from = std::stoull(session[0][0]), to = std::stoull(session[0][1]);
  std::vector<uint64_t> records, points;
  for (const auto& req : rx.logs())
    for (const auto& rl : req.resource_logs())
      for (const auto& sl : rl.scope_logs())
        for (const auto& r : sl.log_records()) records.push_back(r.time_unix_nano());
  for (const auto& req : rx.metrics())
    for (const auto& m : req.resource_metrics(0).scope_metrics(0).metrics())
      if (m.has_sum())
        for (const auto& p : m.sum().data_points()) points.push_back(p.time_unix_nano());
  // The session's chain (hidden_sync: from the live analysis, and again from the session's
  // final one where it changed), and the points of a metrics export a second over the ~5 s (and
  // one at the end).
  EXPECT_GE(records.size(), 1u) << s.run.err;
  EXPECT_GE(points.size(), 4u);
  // The chain's record and the last points go out after the session's stop, as it ends.
  uint64_t end = to + 60'000'000'000ULL;
  for (uint64_t t : records)
    EXPECT_TRUE(t >= from && t <= end) << t << " not in " << from << ".." << to;
  size_t outside = 0;
  for (uint64_t t : points) outside += t < from || t > end;
  EXPECT_EQ(outside, 0u) << points.size() << " points, session " << from << ".." << to;
}

// The live analysis (every 30 s, behind ingero_causal_chains_active) looks at the last 5
// minutes on the session's clock: after the wall clock went back an hour, the next one still
// finds the loop's hidden sync (HIGH) that ran just before the step, beside its failing calls
// (failed_calls, HIGH: without a GPU every call of the real runtime fails).
TEST(ClockStep, TheLiveAnalysisAfterAStepBackFindsTheRecentLoop) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  REQUIRE_FILE(INGERO_CLOCK_STEP);
  REQUIRE_FILE("/usr/bin/chrt");
  using namespace std::chrono_literals;
  std::string dir = temp_path("live");
  std::filesystem::create_directories(dir);
  std::string script = "chrt -f 20 " + std::string(INGERO_STEP_FAULTS) +
                       " rowsync 40 > /dev/null; touch " + dir + "/step; while [ ! -e " + dir +
                       "/stop ]; do sleep 0.1; done";
  int port = free_tcp_port();
  auto tracer = Subprocess::spawn(
      {INGERO_BIN, "trace", "--no-live", "--db", temp_path("live.db"), "--prometheus",
       "127.0.0.1:" + std::to_string(port), "--", "/bin/sh", "-c", script},
      {"LD_PRELOAD=" INGERO_CLOCK_STEP, "CLOCK_STEP_FILE=" + dir + "/step",
       "CLOCK_STEP_NS=" + std::to_string(-kHour)});
  std::string high;
  std::regex gauge("\\ningero_causal_chains_active\\{severity=\"HIGH\"\\} ([0-9]+)");
  for (auto until = std::chrono::steady_clock::now() + 50s;
       high != "2" && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(500ms);
    HttpResponse m = http_get("127.0.0.1", port, "/metrics");
    std::smatch g;
    if (m.status == 200 && std::regex_search(m.body, g, gauge)) high = g[1];
  }
  EXPECT_EQ(high, "2") << tracer.err();
  std::ofstream(dir + "/stop") << "";
  EXPECT_EQ(tracer.wait(60s), 0) << tracer.err();
}

// `ingero status` on a live trace whose tracer's wall clock was an hour behind when it started
// (the host's clock has been stepped since): a sync hung for a few seconds has been hung for a
// few seconds, not an hour and a few seconds.
TEST(ClockStep, StatusCountsAWaitOnTheSessionsClock) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CLOCK_STEP);
  REQUIRE_FILE(INGERO_HANG_SYNC);
  using namespace std::chrono_literals;
  std::string dir = temp_path("status");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/step") << "";
  std::string db = temp_path("status.db");
  auto tracer =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--inflight-after", "1s"},
                        {"LD_PRELOAD=" INGERO_CLOCK_STEP, "CLOCK_STEP_FILE=" + dir + "/step",
                         "CLOCK_STEP_NS=" + std::to_string(-kHour), "VIRTUAL_ENV=" INGERO_FAKE_VENV,
                         "CUDA_HOME=" INGERO_FAKE_CUDA_HOME});
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", 60s)) << tracer.err();
  auto hung = Subprocess::spawn({INGERO_HANG_SYNC, INGERO_FAKE_CUDART},
                                {"VIRTUAL_ENV=" INGERO_FAKE_VENV,
                                 "CUDA_HOME=" INGERO_FAKE_CUDA_HOME, "INGERO_FAKE_SYNC_FD=0"});
  ASSERT_TRUE(hung.wait_stdout_line("entering", 20s));
  auto entered = std::chrono::steady_clock::now();
  // Its row, once the tracer has reported it (after 1 s in the sync).
  for (auto until = entered + 30s; std::chrono::steady_clock::now() < until &&
                                   query_rows(db, "SELECT 1 FROM inflight").empty();)
    std::this_thread::sleep_for(200ms);
  auto st = run_ingero({"status", "--db", db});
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - entered).count();
  ASSERT_EQ(st.rc, 0) << st.err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(st.out, m, std::regex("inside `cudaStreamSynchronize` for ([0-9.]+) s")))
      << st.out;
  // Between the report's 1 s and the time since the sync began here (+1 s of rounding).
  EXPECT_GE(std::stod(m[1]), 1.0) << st.out;
  EXPECT_LE(std::stod(m[1]), waited + 1.0) << st.out;
  hung.write_stdin("x");
  EXPECT_TRUE(hung.wait_stdout_line("returned 0", 20s));
  tracer.signal(SIGINT);
  EXPECT_EQ(tracer.wait(60s), 0) << tracer.err();
}

}  // namespace
}  // namespace ingero::test

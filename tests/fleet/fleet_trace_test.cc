// Agents tracing for real (root, BPF, the real libnccl and libcudart) and shipping to
// ClickHouse servers the test starts:
//  - three agents, two shards, a 4-rank job: one rank next to a CPU hog, one node's clock 50 ms
//    off; explain over the Distributed tables names the straggler, its node and the hog, on
//    corrected clocks (checked against the job's own clock);
//  - a ClickHouse server stopped for 20 s in the middle of a trace: every row arrives once;
//  - tiered retention while ClickHouse is away: no call is folded before it was shipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/exposition.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/http_client.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const char* kNccl = INGERO_CUDA_ROOT "/lib64/libnccl.so.2";
const char* kCudart = INGERO_CUDA_ROOT "/lib64/libcudart.so.13";

#define REQUIRE_FLEET_TRACE()                                                       \
  do {                                                                              \
    REQUIRE_BPF();                                                                  \
    REQUIRE_CLICKHOUSE();                                                           \
    REQUIRE_FILE(kNccl);                                                            \
    REQUIRE_FILE(kCudart);                                                          \
    REQUIRE_FILE("/usr/bin/chrt");                                                  \
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "*** needs 2 CPUs *** "; \
  } while (0)

std::string barrier_file() {
  std::string p = temp_path("barrier");
  std::ofstream(p) << std::string(4096, '\0');
  return p;
}

// "rank R arrivals T0,T1,..." from a job's output.
std::vector<int64_t> arrivals(const std::string& out, int rank) {
  std::istringstream in(out);
  std::string prefix = "rank " + std::to_string(rank) + " arrivals ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::vector<int64_t> v;
    std::istringstream ls(line.substr(prefix.size()));
    for (std::string t; std::getline(ls, t, ',');) v.push_back(std::stoll(t));
    return v;
  }
  return {};
}

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return INT64_MIN;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// `flags`: more of trace's, before the command.
Subprocess agent(const std::string& node, const std::string& db, const std::string& url,
                 const std::vector<std::string>& job, const std::vector<std::string>& env = {},
                 const std::vector<std::string>& flags = {}) {
  std::vector<std::string> argv = {INGERO_BIN, "trace", "--no-live",    "--node", node,
                                   "--db",     db,      "--clickhouse", url};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), job.begin(), job.end());
  return Subprocess::spawn(argv, env);
}

TEST(FleetTrace, ThreeAgentsTwoShardsNameTheStragglerItsNodeAndTheHog) {
  REQUIRE_FLEET_TRACE();
  ClickHouseServers ch;
  std::string why, out, err;
  ASSERT_TRUE(ch.start(2, &why)) << why;
  // Reads go through Distributed tables in `fleet` over the shards' `ingero` tables.
  ASSERT_EQ(
      run_command({INGERO_BIN, "ship", "--ddl", "--clickhouse", ch.url(0, "fleet"), "--cluster",
                   ClickHouseServers::kClusterName, "--shard-db", "ingero", "--create"},
                  &out, &err),
      0)
      << err;
  std::string bar = barrier_file();
  // The hog shares CPU 1 with rank 3 at a higher priority (nice -10: ~10% of the CPU is left
  // for rank 3, so its 1.5 ms of work per step takes ~15 ms or more). Ranks 0-2 run SCHED_FIFO
  // on CPU 0, out of reach of other load.
  Subprocess hog =
      Subprocess::spawn({"nice", "-n", "-10", INGERO_CPU_HOG, "1", "300", "fleet_hog"});
  std::string hog_line;
  ASSERT_TRUE(hog.wait_stdout_line("hog ", std::chrono::seconds(10), &hog_line));
  std::string hog_pid = hog_line.substr(4);
  const std::string steps = "60", work = "1500";
  auto job = [&](const std::string& ranks, const std::string& cpu, bool fifo) {
    std::vector<std::string> j;
    if (fifo) j = {"chrt", "-f", "10"};
    for (const std::string& a : {std::string(INGERO_FLEET_RANKS), bar, std::string("4"), ranks,
                                 steps, work, std::string(kNccl), std::string(kCudart), cpu})
      j.push_back(a);
    return j;
  };
  std::string d1 = temp_path("node-1.db"), d2 = temp_path("node-2.db"), d3 = temp_path("node-3.db");
  std::vector<Subprocess> agents;
  agents.push_back(agent("node-1", d1, ch.url(0, "ingero"), job("0,1", "0", true)));
  agents.push_back(agent("node-2", d2, ch.url(0, "ingero"), job("2", "0", true),
                         {"INGERO_TEST_CLOCK_SKEW_NS=50000000"}));
  agents.push_back(agent("node-3", d3, ch.url(1, "ingero"), job("3", "1", false)));
  for (auto& a : agents) {
    EXPECT_EQ(a.wait(std::chrono::seconds(180)), 0) << a.err();
    EXPECT_NE(a.err().find("nothing left to ship"), std::string::npos) << a.err();
  }
  hog.signal(SIGKILL);
  hog.wait();
  for (int r : {0, 1, 2, 3})
    ASSERT_EQ(arrivals(agents[r < 2 ? 0 : r - 1].out(), r).size(), 60u) << r;

  ASSERT_EQ(
      run_command({INGERO_BIN, "explain", "--source", ch.source(0, "fleet"), "--json"}, &out, &err),
      0)
      << err;
  auto report = nlohmann::json::parse(out);
  const auto& fleet = report["fleet"];
  EXPECT_EQ(fleet["nodes"], nlohmann::json({"node-1", "node-2", "node-3"}));
  std::map<std::string, nlohmann::json> clocks;
  for (const auto& c : fleet["clocks"]) clocks[c["node"]] = c;
  // Collective completions line up within microseconds: the planted skew is found to 2 ms.
  EXPECT_NEAR(clocks["node-2"]["offset_ns"].get<double>(), 50e6, 2e6) << fleet["clocks"];
  EXPECT_NEAR(clocks["node-1"]["offset_ns"].get<double>(), 0, 2e6) << fleet["clocks"];
  EXPECT_NEAR(clocks["node-3"]["offset_ns"].get<double>(), 0, 2e6) << fleet["clocks"];
  for (auto& [n, c] : clocks) {
    EXPECT_EQ(c["samples"], 60) << n;
    EXPECT_LT(c["error_ns"].get<int64_t>(), 2'000'000) << n;
  }
  nlohmann::json straggler;
  for (const auto& c : fleet["chains"])
    if (c["rule"] == "fleet_straggler") straggler = c;
  ASSERT_FALSE(straggler.is_null()) << fleet.dump(2);
  EXPECT_EQ(straggler["node"], "node-3");
  std::string summary = straggler["summary"], cause = straggler["root_cause"];
  std::string rank3_pid;
  {
    std::string line;
    std::istringstream in3(agents[2].out());
    while (std::getline(in3, line))
      if (line.rfind("rank 3 pid ", 0) == 0) rank3_pid = line.substr(11);
  }
  EXPECT_NE(summary.find("rank 3 on node-3 ("), std::string::npos) << summary;
  EXPECT_NE(summary.find("pid " + rank3_pid + ") arrives last in"), std::string::npos) << summary;
  EXPECT_NE(summary.find("4 ranks on 3 nodes"), std::string::npos) << summary;
  EXPECT_NE(cause.find("runnable but preempted"), std::string::npos) << cause;
  EXPECT_NE(cause.find("fleet_hog (pid " + hog_pid + ")"), std::string::npos) << cause;
  EXPECT_NE(std::string(straggler["explanation"]).find("node-2 +5"), std::string::npos);

  // Corrected timestamps: node-2's stored times are 50 ms ahead of the job's own clock; less
  // the estimated offset they match it (a call starts microseconds after the job stamps it).
  std::vector<int64_t> truth = arrivals(agents[1].out(), 2), raw_d, fixed_d;
  std::string rows = ch.query(0,
                              "SELECT ts_ns FROM fleet.events WHERE node = 'node-2' AND op = "
                              "'ncclAllReduce' ORDER BY ts_ns");
  std::istringstream in(rows);
  int64_t off = clocks["node-2"]["offset_ns"], ts;
  for (size_t i = 0; in >> ts && i < truth.size(); ++i) {
    raw_d.push_back(ts - truth[i]);
    fixed_d.push_back(ts - off - truth[i]);
  }
  ASSERT_EQ(raw_d.size(), 60u);
  EXPECT_NEAR(double(median(raw_d)), 50e6, 1e6);
  EXPECT_NEAR(double(median(fixed_d)), 0, 2e6);
  // The straggler's window, on the reference clock, runs from the first arrival at the first
  // collective to rank 3's arrival at the last one: as the job's own clock saw them.
  int64_t first = INT64_MAX;
  for (int r : {0, 1, 2, 3})
    first = std::min(first, arrivals(agents[r < 2 ? 0 : r - 1].out(), r)[0]);
  EXPECT_NEAR(double(straggler["window_start_ns"].get<int64_t>() - first), 0, 2e6);
  EXPECT_NEAR(
      double(straggler["window_end_ns"].get<int64_t>() - arrivals(agents[2].out(), 3).back()), 0,
      2e6);

  // Every row of every file, once, on its shard.
  for (auto [file, node, shard] :
       {std::tuple{d1, "node-1", 0}, std::tuple{d2, "node-2", 0}, std::tuple{d3, "node-3", 1}})
    for (const auto& [table, c] : compare_counts(ch, size_t(shard), "ingero", file, node)) {
      EXPECT_EQ(c.rows, c.file) << node << " " << table;
      EXPECT_EQ(c.duplicates, 0) << node << " " << table;
    }
  EXPECT_EQ(ch.query(0,
                     "SELECT node, count() FROM fleet.calls WHERE op = 'ncclAllReduce' "
                     "GROUP BY node ORDER BY node"),
            "node-1\t120\nnode-2\t60\nnode-3\t60\n");

  // `ingero merge` of the same three files: the same fleet findings from one file.
  std::string merged = temp_path("merged.db");
  ASSERT_EQ(run_command({INGERO_BIN, "merge", d1, d2, d3, "-o", merged}, &out, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", merged, "--json"}, &out, &err), 0) << err;
  auto m = nlohmann::json::parse(out)["fleet"];
  EXPECT_EQ(m["clocks"], fleet["clocks"]);
  ASSERT_FALSE(m["chains"].empty());
  EXPECT_EQ(m["chains"][0]["rule"], "fleet_straggler");
  EXPECT_EQ(m["chains"][0]["node"], "node-3");
  EXPECT_EQ(m["chains"][0]["summary"], straggler["summary"]);
}

// Polls `done` every 100 ms for up to `seconds`.
template <typename F>
bool eventually(F done, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

TEST(FleetTrace, ClickHouseDownFor20sLosesAndDuplicatesNothing) {
  REQUIRE_FLEET_TRACE();
  ClickHouseServers ch;
  std::string why;
  ASSERT_TRUE(ch.start(1, &why)) << why;
  std::string db = temp_path("node-x.db"), bar = barrier_file();
  const int metrics_port = free_tcp_port();
  Subprocess a = agent("node-x", db, ch.url(0, "ingero"),
                       {INGERO_FLEET_RANKS, bar, "1", "0", "40s", "2000", kNccl, kCudart}, {},
                       {"--prometheus", "127.0.0.1:" + std::to_string(metrics_port)});
  ASSERT_TRUE(a.wait_stderr_line("ingero: shipping", std::chrono::seconds(60)));
  // The shipper's state on /metrics (docs/metrics.md): up, then down through the outage.
  auto up = [&] {
    auto r = http_get("127.0.0.1", metrics_port, "/metrics");
    return r.status == 200 && r.body.find("\ningero_clickhouse_up ") != std::string::npos
               ? int(sample(r.body, "ingero_clickhouse_up"))
               : -1;
  };
  // Some rows arrive before the outage.
  long long before = 0;
  for (int i = 0; i < 300 && before <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto r = http_request("127.0.0.1", ch.http_port(0), "POST", "/",
                          "SELECT count() FROM ingero.events");
    if (r.status == 200) before = std::stoll(r.body);
  }
  ASSERT_GT(before, 0);
  EXPECT_TRUE(eventually([&] { return up() == 1; }, 10));
  const auto down_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(ch.stop(0));
  EXPECT_TRUE(eventually([&] { return up() == 0; }, 15));
  std::this_thread::sleep_until(down_at + std::chrono::seconds(20));
  ASSERT_TRUE(ch.restart(0, &why)) << why;
  EXPECT_EQ(a.wait(std::chrono::seconds(180)), 0) << a.err();
  EXPECT_NE(a.err().find(ch.url(0, "ingero") + ": cannot connect"), std::string::npos) << a.err();
  EXPECT_NE(a.err().find("is back: shipping resumed"), std::string::npos) << a.err();
  EXPECT_NE(a.err().find("nothing left to ship"), std::string::npos) << a.err();
  long long events = 0;
  for (const auto& [table, c] : compare_counts(ch, 0, "ingero", db)) {
    EXPECT_EQ(c.rows, c.file) << table;
    EXPECT_EQ(c.duplicates, 0) << table;
    if (table == "events") events = c.file;
  }
  // The trace went on through the outage: far more rows than before it.
  EXPECT_GT(events, before * 2);
  EXPECT_EQ(ch.query(0, "SELECT count() = max(src_id), min(src_id) FROM ingero.events"), "1\t1\n");
}

// ClickHouse receives rows, not runs: while it is away the tracer folds no row it does not
// have (--full-rows 2s would fold the launches 3 s after they ran), so every call arrives once
// it is back, and folding catches up after that.
TEST(FleetTrace, FoldingWaitsForClickHouseSoEveryCallArrives) {
  REQUIRE_FLEET_TRACE();
  ClickHouseServers ch;
  std::string why;
  ASSERT_TRUE(ch.start(1, &why)) << why;
  ASSERT_TRUE(ch.stop(0));
  std::string db = temp_path("node-f.db"), gate = temp_path("gate");
  std::filesystem::remove(gate);
  // 300 steps of 16 launches and a sync, then idle until the test opens the gate.
  std::string script = std::string(INGERO_FAKE_CALLS) +
                       " steps " INGERO_FAKE_CUDART " 300; while [ ! -e " + gate +
                       " ]; do sleep 0.1; done";
  Subprocess a = Subprocess::spawn(
      {INGERO_BIN, "trace", "--no-live", "--node", "node-f", "--db", db, "--clickhouse",
       ch.url(0, "ingero"), "--full-rows", "2s", "--no-stack", "--", "/bin/sh", "-c", script},
      {"VIRTUAL_ENV=" INGERO_FAKE_VENV});
  ASSERT_TRUE(a.wait_stderr_line("ingero: shipping", std::chrono::seconds(60))) << a.err();
  const std::string calls = "SELECT coalesce(sum(calls), 0) FROM call_seconds";
  const std::string folded = "SELECT coalesce(sum(calls), 0) FROM call_runs";
  // Every call summarised (2 s behind the clock), then 5 s more: past the fold's cut.
  ASSERT_TRUE(eventually([&] { return query_int(db, calls) == 300 * 17; }, 60)) << a.err();
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_EQ(query_int(db, folded), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 300 * 17);
  ASSERT_TRUE(ch.restart(0, &why)) << why;
  const std::string launches =
      "SELECT count(), uniqExact(src_id) FROM ingero.events WHERE kind = 'launch'";
  // Until the shipper has created the database, ClickHouse answers 404.
  auto answer = [&](const std::string& sql) {
    auto r = http_request("127.0.0.1", ch.http_port(0), "POST", "/", sql);
    return r.status == 200 ? r.body : "";
  };
  EXPECT_TRUE(eventually([&] { return answer(launches) == "4800\t4800\n"; }, 90))
      << answer(launches) << a.err();
  // Shipped: folding goes on.
  EXPECT_TRUE(eventually([&] { return query_int(db, folded) > 0; }, 30)) << a.err();
  std::ofstream(gate).put('\n');
  EXPECT_EQ(a.wait(std::chrono::seconds(60)), 0) << a.err();
  EXPECT_NE(a.err().find("nothing left to ship"), std::string::npos) << a.err();
  EXPECT_EQ(a.err().find("before they were shipped"), std::string::npos) << a.err();
  // Every call once in ClickHouse; in the file each launch is a row or in a run.
  EXPECT_EQ(ch.query(0, launches), "4800\t4800\n");
  EXPECT_EQ(ch.query(0, "SELECT count() FROM ingero.events WHERE kind = 'sync'"), "300\n");
  EXPECT_EQ(
      query_int(db, "SELECT count(*) FROM calls WHERE kind = 'launch'") + query_int(db, folded),
      4800);
}

// Issue 37, item 6, through `ingero trace`: an endpoint that answers every request with 200
// and an empty body (a proxy, a health page) made the tracer fold launches that existed
// nowhere as rows. Nothing such an endpoint says counts: no call is folded, every call keeps
// its row, and the tracer says why, while tracing and at exit.
TEST(FleetTrace, AnEndpointThatStoresNothingGetsNothingFolded) {
  REQUIRE_FLEET_TRACE();
  FakeHttpServer ok([](const std::string&, const std::string&) { return std::string(); });
  std::string db = temp_path("node-g.db"), gate = temp_path("gate-g");
  std::filesystem::remove(gate);
  std::string script = std::string(INGERO_FAKE_CALLS) +
                       " steps " INGERO_FAKE_CUDART " 300; while [ ! -e " + gate +
                       " ]; do sleep 0.1; done";
  Subprocess a =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--node", "node-g", "--db", db,
                         "--clickhouse", ok.url("ingero"), "--full-rows", "2s", "--no-stack",
                         "--clickhouse-exit-timeout", "3s", "--", "/bin/sh", "-c", script},
                        {"VIRTUAL_ENV=" INGERO_FAKE_VENV});
  ASSERT_TRUE(a.wait_stderr_line("ingero: shipping", std::chrono::seconds(60))) << a.err();
  const std::string calls = "SELECT coalesce(sum(calls), 0) FROM call_seconds";
  const std::string folded = "SELECT coalesce(sum(calls), 0) FROM call_runs";
  ASSERT_TRUE(eventually([&] { return query_int(db, calls) == 300 * 17; }, 60)) << a.err();
  std::this_thread::sleep_for(std::chrono::seconds(5));  // past the fold's cut (2 s)
  EXPECT_EQ(query_int(db, folded), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 300 * 17);
  std::ofstream(gate).put('\n');
  EXPECT_EQ(a.wait(std::chrono::seconds(60)), 0) << a.err();
  const std::string why = "ingero: ClickHouse at " + ok.url("ingero") +
                          " lists no column of the tables it was just asked to create (its "
                          "answer to the read of system.columns was empty): nothing it says "
                          "about what it stores can be trusted (is this a ClickHouse server, or "
                          "something in front of it that does not pass answers?); the rows stay "
                          "in " +
                          db + " and are retried\n";
  EXPECT_NE(a.err().find(why), std::string::npos) << a.err();
  EXPECT_NE(a.err().find(" are not in ClickHouse at " + ok.url("ingero") + " yet (ClickHouse at " +
                         ok.url("ingero") + " lists no column"),
            std::string::npos)
      << a.err();
  EXPECT_EQ(a.err().find("nothing left to ship"), std::string::npos) << a.err();
  EXPECT_EQ(ok.inserts(), 0u);
  // Every call still a row after exit: the file is whole for the next `ingero ship`.
  EXPECT_EQ(query_int(db, folded), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE kind = 'launch'"), 4800);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 300 * 17);
}

// --max-db-size holds while ClickHouse is away: the oldest rows go, shipped or not. The tracer
// says how many of them ClickHouse never had, and that count is exact: with what ClickHouse
// has once the file is shipped, it adds up to every row the shipped tables ever held.
TEST(FleetTrace, RowsDeletedBeforeTheyWereShippedAreCountedExactly) {
  REQUIRE_FLEET_TRACE();
  ClickHouseServers ch;
  std::string why;
  ASSERT_TRUE(ch.start(1, &why)) << why;
  ASSERT_TRUE(ch.stop(0));
  std::string db = temp_path("node-r.db");
  std::string out, err;
  int rc = run_command({INGERO_BIN, "trace", "--no-live", "--node", "node-r", "--db", db,
                        "--clickhouse", ch.url(0, "ingero"), "--max-db-size", "1MiB", "--no-stack",
                        "--", INGERO_FAKE_CALLS, "steps", INGERO_FAKE_CUDART, "8000"},
                       &out, &err, {"VIRTUAL_ENV=" INGERO_FAKE_VENV}, std::chrono::seconds(120));
  ASSERT_EQ(rc, 0) << err;
  const std::string said = " of them before ClickHouse had them";
  auto at = err.find(said);
  ASSERT_NE(at, std::string::npos) << err;
  auto from = err.rfind(", ", at);
  ASSERT_NE(from, std::string::npos) << err;
  long long unshipped = std::stoll(err.substr(from + 2, at - from - 2));
  EXPECT_GT(unshipped, 0) << err;
  ASSERT_TRUE(ch.restart(0, &why)) << why;
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  long long in_clickhouse = 0, ever = 0;
  for (const char* t : {"events", "system_snapshots", "process_stats", "device_counters"}) {
    in_clickhouse += ch.query_int(0, std::string("SELECT count() FROM ingero.") + t);
    ever += query_int(db, std::string("SELECT coalesce(max(id), 0) FROM ") + t);
  }
  EXPECT_EQ(in_clickhouse + unshipped, ever);
  // The events table's newest row stayed: ids were never given twice.
  EXPECT_EQ(ch.query(0, "SELECT count() = uniqExact(src_id) FROM ingero.events"), "1\n");
}

}  // namespace
}  // namespace ingero::test

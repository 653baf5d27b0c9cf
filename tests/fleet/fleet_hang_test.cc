// Stuck ranks across the fleet (issue 40): a 4-rank job on the stand-in NCCL
// (tests/fake_vendor/fake_nccl.c, whose ncclAllReduce waits for every rank) under two agents,
// `ingero trace --node` shipping to a real ClickHouse. Ranks 0-2 enter ncclAllReduce #49 (the
// 50th) and wait there; rank 3 never calls it: it sleeps in wait_for_input(). While they
// hang (each step below waits for a state it can observe, never for a fixed time):
//  - each node's `ingero status` names its waiting ranks, their call and seconds;
//  - `explain --source clickhouse://` names the hang: ranks 0-2 inside, rank 3 never entered,
//    with its node and pid and what its thread does;
//  - each agent's ingero_collective_hang is its own node's waiting ranks (2 and 1).
// Then the ranks are killed: the calls are unfinished in each file and the in-flight rows say
// so, in the files and, as their latest version, in ClickHouse; explain over ClickHouse names
// the hang as it ended and mismatched_collectives the divergence at #49.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/http_client.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// Polls `done` every 200 ms until it holds or `limit` passes.
bool eventually(const std::function<bool()>& done, seconds limit = seconds(90)) {
  auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(200));
  }
  return done();
}

// Reads what the agent's job printed so far (without consuming lines out of order).
bool printed(Subprocess& agent, const std::vector<std::string>& lines, seconds limit) {
  return eventually(
      [&] {
        agent.wait_stdout_line("\x01", milliseconds(100));  // pumps; never matches
        for (const auto& l : lines)
          if (agent.out().find(l + "\n") == std::string::npos) return false;
        return true;
      },
      limit);
}

std::string pid_of_rank(const Subprocess& agent, int rank) {
  std::smatch m;
  std::regex re("rank " + std::to_string(rank) + " pid ([0-9]+)\n");
  return std::regex_search(agent.out(), m, re) ? m[1].str() : "";
}

std::string metric(const std::string& exposition, const std::string& name) {
  std::smatch m;
  std::regex re("(^|\\n)" + name + " ([^\\n]+)");
  return std::regex_search(exposition, m, re) ? m[2].str() : "";
}

TEST(FleetTrace, CollectiveHangIsNamedAcrossNodesWhileItLasts) {
  REQUIRE_BPF();
  REQUIRE_CLICKHOUSE();
  ClickHouseServers ch;
  std::string why, out, err;
  ASSERT_TRUE(ch.start(1, &why)) << why;
  std::string bar = temp_path("hang-barrier");
  std::ofstream(bar) << std::string(4096, '\0');
  const std::string da = temp_path("hang-a.db"), db = temp_path("hang-b.db");
  const int pa = free_tcp_port(), pb = free_tcp_port();
  auto agent = [&](const std::string& node, const std::string& file, int port,
                   const std::string& ranks) {
    return Subprocess::spawn({INGERO_BIN,
                              "trace",
                              "--no-live",
                              "--node",
                              node,
                              "--db",
                              file,
                              "--clickhouse",
                              ch.url(0, "ingero"),
                              "--inflight-after",
                              "2s",
                              "--prometheus",
                              "127.0.0.1:" + std::to_string(port),
                              "--",
                              INGERO_HANG_RANKS,
                              INGERO_FAKE_NCCL,
                              bar,
                              "4",
                              ranks,
                              "50",
                              "3"},
                             {"NCCL_HOME=" INGERO_FAKE_NCCL_HOME});
  };
  Subprocess a = agent("node-a", da, pa, "0,1");
  Subprocess b = agent("node-b", db, pb, "2,3");
  ASSERT_TRUE(printed(a, {"rank 0 entering 50", "rank 1 entering 50"}, seconds(120))) << a.err();
  ASSERT_TRUE(printed(b, {"rank 2 entering 50", "rank 3 waiting"}, seconds(120))) << b.err();
  const std::string r0 = pid_of_rank(a, 0), r1 = pid_of_rank(a, 1), r2 = pid_of_rank(b, 2),
                    r3 = pid_of_rank(b, 3);
  ASSERT_FALSE(r0.empty() || r1.empty() || r2.empty() || r3.empty()) << a.out() << b.out();

  // Each node's file: its ranks inside the 50th collective (49 completed before it), rank 3's
  // thread idle; reported once past --inflight-after.
  const std::string rows_sql =
      "SELECT what, status, pid, op, seq, rank FROM inflight WHERE status = 'in_flight' "
      "ORDER BY rank";
  using Rows = std::vector<std::vector<std::string>>;
  const Rows want_a = {{"call", "in_flight", r0, "ncclAllReduce", "49", "0"},
                       {"call", "in_flight", r1, "ncclAllReduce", "49", "1"}};
  const Rows want_b = {{"call", "in_flight", r2, "ncclAllReduce", "49", "2"},
                       {"idle", "in_flight", r3, "", "49", "3"}};
  EXPECT_TRUE(eventually([&] { return query_rows(da, rows_sql) == want_a; }))
      << ::testing::PrintToString(query_rows(da, rows_sql));
  EXPECT_TRUE(eventually([&] { return query_rows(db, rows_sql) == want_b; }))
      << ::testing::PrintToString(query_rows(db, rows_sql));

  // `ingero status` on each node, while the tracers write: the waiting ranks, their call,
  // seconds, line and arguments.
  const int call_line = line_of(INGERO_HANG_RANKS_SRC, "HANG_RANKS_CALL");
  ASSERT_GT(call_line, 0);
  for (auto [file, pids] : {std::pair{da, std::vector{r0, r1}}, std::pair{db, std::vector{r2}}}) {
    auto st = run_command({INGERO_BIN, "status", "--db", file}, &out, &err);
    ASSERT_EQ(st, 0) << err;
    EXPECT_NE(out.find(file + ": being traced now (calls in flight longer than 2.0 s are "
                              "reported)\n"),
              std::string::npos)
        << out;
    for (size_t i = 0; i < pids.size(); ++i) {
      std::regex line("hang_ranks \\(pid " + pids[i] +
                      "\\) has been inside `ncclAllReduce` #49 for [0-9.]+ s at run_rank at "
                      "hang_ranks\\.c:" +
                      std::to_string(call_line) +
                      " \\(asleep\\); it has no other thread\n    args: bytes=0x40 stream=0xabc "
                      "count=0x10 datatype=0x7 reduce_op=0 rank=(0x)?" +
                      std::to_string(file == da ? i : 2) + " nranks=0x4 ");
      EXPECT_TRUE(std::regex_search(out, line)) << pids[i] << "\n" << out;
    }
    // Node b's rank 3, which never entered the collective: idle since its 49th.
    if (file == db) {
      EXPECT_TRUE(std::regex_search(
          out, std::regex("hang_ranks \\(pid " + r3 +
                          "\\) has made no GPU call for [0-9.]+ s after 49 collectives; it is "
                          "asleep; it has no other thread\n    args: rank=0x3 nranks=0x4 ")))
          << out;
    }
  }

  // ClickHouse: every rank's 49 completed collectives and the four stuck threads, shipped.
  const std::string stuck_sql =
      "SELECT count() FROM (SELECT node, tid, entered_at, what, argMax(status, src_id) AS s FROM "
      "ingero.inflight GROUP BY node, session_start, tid, entered_at, what) WHERE s = "
      "'in_flight'";
  EXPECT_TRUE(eventually([&] {
    return ch.query_int(0, stuck_sql) == 4 &&
           ch.query_int(0, "SELECT count() FROM ingero.calls WHERE op = 'ncclAllReduce'") == 4 * 49;
  })) << ch.query(0, "SELECT node, pid, what, status, op, seq FROM ingero.inflight");

  // explain over ClickHouse names the hang, rank 3, its node and what it does.
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"}, &out,
                        &err),
            0)
      << err;
  auto report = nlohmann::json::parse(out);
  nlohmann::json hang;
  for (const auto& c : report["fleet"]["chains"])
    if (c["rule"] == "collective_hang") hang = c;
  ASSERT_FALSE(hang.is_null()) << report["fleet"].dump(2);
  const std::string summary = hang["summary"], cause = hang["root_cause"];
  EXPECT_TRUE(std::regex_search(
      summary, std::regex("^Collective hang: ranks 0, 1 and 2 have waited [0-9.]+ s inside "
                          "ncclAllReduce #49 \\(the 50th collective on communicator 0x[0-9a-f]+, "
                          "4 ranks\\); rank 3 never entered it$")))
      << summary;
  EXPECT_EQ(hang["node"], "node-b");
  EXPECT_TRUE(std::regex_search(
      cause, std::regex("^rank 3 \\(hang_ranks, pid " + r3 +
                        " on node-b\\) never entered ncclAllReduce #49: it completed 49 "
                        "collectives on the communicator; its thread has made no GPU call for "
                        "[0-9.]+ s and is asleep")))
      << cause;

  // Prometheus: each agent's own ranks waiting inside the collective.
  EXPECT_EQ(metric(http_get("127.0.0.1", pa, "/metrics").body, "ingero_collective_hang"), "2");
  EXPECT_EQ(metric(http_get("127.0.0.1", pb, "/metrics").body, "ingero_collective_hang"), "1");

  // The job dies: each agent sees its command end, stores and ships what was left.
  for (const std::string& p : {r0, r1, r2, r3}) kill(pid_t(std::stoi(p)), SIGKILL);
  a.wait(seconds(120));
  b.wait(seconds(120));
  EXPECT_NE(a.err().find("nothing left to ship"), std::string::npos) << a.err();
  EXPECT_NE(b.err().find("nothing left to ship"), std::string::npos) << b.err();
  const std::string calls_sql =
      "SELECT pid, status FROM calls WHERE op = 'ncclAllReduce' AND status != 'ok' ORDER BY pid";
  EXPECT_EQ(query_rows(da, calls_sql),
            (Rows{{std::min(r0, r1), "unfinished"}, {std::max(r0, r1), "unfinished"}}));
  EXPECT_EQ(query_rows(db, calls_sql), (Rows{{r2, "unfinished"}}));
  const std::string ended_sql = "SELECT what, status, pid FROM inflight ORDER BY rank";
  EXPECT_EQ(query_rows(da, ended_sql),
            (Rows{{"call", "unfinished", r0}, {"call", "unfinished", r1}}));
  EXPECT_EQ(query_rows(db, ended_sql),
            (Rows{{"call", "unfinished", r2}, {"idle", "unfinished", r3}}));
  // ClickHouse holds every version; the latest of each is the file's.
  EXPECT_EQ(ch.query(0,
                     "SELECT node, what, argMax(status, src_id) FROM ingero.inflight GROUP BY "
                     "node, session_start, tid, entered_at, what ORDER BY node, what"),
            "node-a\tcall\tunfinished\nnode-a\tcall\tunfinished\nnode-b\tcall\tunfinished\n"
            "node-b\tidle\tunfinished\n");
  // After the job: explain over ClickHouse still tells what happened.
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"}, &out,
                        &err),
            0)
      << err;
  // The hang, as it ended (rank 3's thread gone), and the divergence the stored calls show.
  std::map<std::string, nlohmann::json> after;
  const auto ended = nlohmann::json::parse(out);
  for (const auto& c : ended["fleet"]["chains"]) after[c["rule"].get<std::string>()] = c;
  ASSERT_EQ(after.size(), 2u) << out;
  EXPECT_TRUE(std::regex_search(
      after["collective_hang"]["summary"].get<std::string>(),
      std::regex("^Collective hang: ranks 0, 1 and 2 waited [0-9.]+ s inside ncclAllReduce #49 "
                 "\\(the 50th collective on communicator 0x[0-9a-f]+, 4 ranks\\); rank 3 "
                 "never entered it$")))
      << after["collective_hang"];
  EXPECT_TRUE(std::regex_search(
      after["collective_hang"]["root_cause"].get<std::string>(),
      std::regex("^rank 3 \\(hang_ranks, pid " + r3 +
                 " on node-b\\) never entered ncclAllReduce #49: it completed 49 collectives on "
                 "the communicator; its thread has made no GPU call for [0-9.]+ s and is gone$")))
      << after["collective_hang"];
  EXPECT_TRUE(std::regex_search(
      after["mismatched_collectives"]["summary"].get<std::string>(),
      std::regex("^Collective #49 on communicator [0-9a-f]+ diverges: ranks 0 \\(node-a\\), 1 "
                 "\\(node-a\\), 2 \\(node-b\\) issued ncclAllReduce count 16 datatype 7; "
                 "rank 3 \\(node-b\\) never issued it although its trace goes on$")))
      << after["mismatched_collectives"];
  for (auto [file, node] : {std::pair{da, "node-a"}, std::pair{db, "node-b"}})
    for (const auto& [table, c] : compare_counts(ch, 0, "ingero", file, node)) {
      EXPECT_EQ(c.rows, c.file) << node << " " << table;
      EXPECT_EQ(c.duplicates, 0) << node << " " << table;
    }
}

}  // namespace
}  // namespace ingero::test

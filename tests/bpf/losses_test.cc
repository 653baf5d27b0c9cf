// Losses are reported wherever a user reads the trace: a calls ring too small for a burst
// (the reader held back by the test-only INGERO_TEST_READ_PAUSE_MS, so the overflow does not
// depend on machine speed) drops call records, and the exact number missing appears in the
// session row, on stderr under -q, on the first line of `explain` and in its JSON, in MCP
// get_trace_stats and in the HTML report's data. (The Prometheus counter is checked in
// tests/unit/metrics_test.cc (Metrics.LossesAreCountedByKind) from the same SessionCounters.)
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/chain.h"
#include "test_paths.h"
#include "tests/support/mcp_stdio.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const std::vector<std::string> kFakeEnv = {"VIRTUAL_ENV=" INGERO_FAKE_VENV,
                                           "CUDA_HOME=" INGERO_FAKE_CUDA_HOME};

// Two threads, each 20,000 cudaMalloc and one cudaDeviceSynchronize (its driver call is folded).
constexpr int64_t kMade = 2 * (20000 + 1);

std::string run_ingero(const std::vector<std::string>& args, int* rc) {
  std::vector<std::string> argv = {INGERO_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  *rc = run_command(argv, &out);
  return out;
}

TEST(Losses, AnOverflowingCallsRingIsReportedInEveryPlace) {
  REQUIRE_BPF();
  std::string db = temp_path("losses.db");
  auto env = kFakeEnv;
  env.push_back("INGERO_TEST_READ_PAUSE_MS=3000");
  auto run = trace_command(db, {INGERO_FAKE_CALLS, "threads", INGERO_FAKE_CUDART, "2", "20000"},
                           {"-q", "--ringbuf-mb", "1", "--no-stack"}, env);
  ASSERT_EQ(run.rc, 0) << run.err;
  int64_t stored = query_int(db, "SELECT count(*) FROM calls");
  int64_t lost = kMade - stored;
  ASSERT_GT(lost, 0) << "a 1 MiB ring held " << stored << " calls";
  // 1. The session row: exactly the missing calls, and nothing else lost.
  EXPECT_EQ(query_rows(db,
                       "SELECT call_drops, lost_calls, calls_lost_at_exit, ringbuf_drops >= "
                       "call_drops FROM sessions"),
            (std::vector<std::vector<std::string>>{{std::to_string(lost), "0", "0", "1"}}));
  // 2. stderr, even with -q, worded as explain words it.
  std::string n = engine::format_count(uint64_t(lost));
  EXPECT_NE(run.err.find("ingero: " + n + " calls lost (" + n +
                         " ring buffer full): figures are lower bounds\n"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("raise --ringbuf-mb"), std::string::npos) << run.err;
  // 3. The first line of explain, and its JSON.
  int rc = 0;
  std::string text = run_ingero({"explain", "--db", db}, &rc);
  ASSERT_EQ(rc, 0) << text;
  EXPECT_EQ(text.substr(0, text.find('\n')),
            n + " calls lost (" + n + " ring buffer full): figures are lower bounds")
      << text;
  auto j = nlohmann::json::parse(run_ingero({"explain", "--db", db, "--json"}, &rc));
  EXPECT_EQ(j["losses"]["calls_lost"], lost);
  EXPECT_EQ(j["losses"]["call_drops"], lost);
  EXPECT_EQ(j["losses"]["lower_bounds"], true);
  // 4. MCP get_trace_stats: structured and in the text the agent reads first.
  auto r = mcp_tool_over_stdio(db, "get_trace_stats", nlohmann::json::object());
  ASSERT_EQ(r["result"]["isError"], false) << r.dump();
  EXPECT_EQ(r["result"]["structuredContent"]["losses"]["calls_lost"], lost) << r.dump();
  std::string first = r["result"]["content"][0]["text"];
  EXPECT_EQ(first.substr(0, first.find('\n')),
            n + " calls lost (" + n + " ring buffer full): figures are lower bounds");
  // 5. The report's header data: the loss and a loud warning.
  std::string html = temp_path("losses.html");
  run_ingero({"report", "--db", db, "-o", html}, &rc);
  ASSERT_EQ(rc, 0);
  std::ifstream in(html);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find(R"("call_drops":)" + std::to_string(lost)), std::string::npos);
  // Worded as explain words it (engine/loss_notes.h).
  EXPECT_NE(page.find(n + " calls lost (" + n + " ring buffer full): figures are lower bounds"),
            std::string::npos);
}

// Launches go to the ring in batches of ~33 (bpf/launch_batch.h): a batch the full ring refuses
// is counted launch by launch, so what was stored and what was refused still add up to what the
// program made, and the batches were the launches' way to the ring.
TEST(Losses, LaunchesRefusedInBatchesAreCountedOneByOne) {
  REQUIRE_BPF();
  std::string db = temp_path("launch-losses.db");
  auto env = kFakeEnv;
  env.push_back("INGERO_TEST_READ_PAUSE_MS=3000");
  constexpr int64_t kLaunches = 60000;  // cuLaunchKernel from the program: one record each
  auto run = trace_command(
      db, {INGERO_FAKE_CALLS, "launches", INGERO_FAKE_CUDART, "0", std::to_string(kLaunches)},
      {"-q", "--ringbuf-mb", "1", "--no-stack"}, env);
  ASSERT_EQ(run.rc, 0) << run.err;
  int64_t stored = query_int(db, "SELECT count(*) FROM calls WHERE op = 'cuLaunchKernel'");
  int64_t refused = query_int(db, "SELECT call_drops FROM sessions");
  ASSERT_GT(refused, 0) << "a 1 MiB ring held " << stored << " launches";
  EXPECT_EQ(stored + refused, kLaunches);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), stored);
  EXPECT_EQ(query_rows(db, "SELECT lost_calls, calls_lost_at_exit FROM sessions"),
            (std::vector<std::vector<std::string>>{{"0", "0"}}));
  auto stats = nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
  // Stored in batches of many (a batch is counted when the ring takes it).
  int64_t batches = stats["launch_batches"].get<int64_t>();
  EXPECT_GT(batches, 0) << stats.dump();
  EXPECT_GT(stored, 10 * batches) << stats.dump();
}

// At the highest rate 16 threads reach (about 190,000 calls/s on 2 cores), every call is
// accounted for: stored, or counted in the session row as a call the full ring refused and
// then said on stderr. Whether any is refused depends on the host's load (the tracer needs
// about half a CPU here, at nice -10 against 16 busy threads); that none goes unsaid does not.
// The rate of loss at full rate is a bench figure (bench/run_benchmarks.sh, "memory at full
// rate"; docs/performance.md, "calls lost"). The command keeps the priority ingero started with.
TEST(Losses, SixteenThreadsAtFullRateAccountForEveryCall) {
  REQUIRE_BPF();
  std::string db = temp_path("full-rate.db");
  auto run = trace_command(
      db, {INGERO_FAKE_CALLS, "threads", INGERO_CUDA_ROOT "/lib64/libcudart.so.13", "16", "12500"},
      {"-q"});
  ASSERT_EQ(run.rc, 0) << run.err;
  constexpr int64_t kMadeAtFullRate = 16 * (12500 + 1);
  int64_t stored = query_int(db, "SELECT count(*) FROM calls");
  int64_t refused = query_int(db, "SELECT call_drops FROM sessions");
  EXPECT_EQ(stored + refused, kMadeAtFullRate);
  EXPECT_EQ(query_rows(db, "SELECT lost_calls, calls_lost_at_exit FROM sessions"),
            (std::vector<std::vector<std::string>>{{"0", "0"}}));
  if (query_int(db, "SELECT ringbuf_drops FROM sessions") == 0) {
    EXPECT_EQ(refused, 0);
    EXPECT_EQ(run.err, "");
  } else if (refused > 0) {
    std::string n = engine::format_count(uint64_t(refused));
    EXPECT_NE(run.err.find("ingero: " + n + " calls lost (" + n +
                           " ring buffer full): figures are lower bounds\n"),
              std::string::npos)
        << run.err;
  }
  std::string niceness = temp_path("nice.out");
  ASSERT_EQ(trace_command(temp_path("nice.db"), {"/bin/sh", "-c", "nice > " + niceness}).rc, 0);
  std::ifstream in(niceness);
  int got = 99;
  in >> got;
  errno = 0;
  EXPECT_EQ(got, getpriority(PRIO_PROCESS, 0));
}

// Without losses, no line claims any: the report starts with its title.
TEST(Losses, ACompleteTraceSaysNothingAboutLosses) {
  REQUIRE_BPF();
  std::string db = temp_path("complete.db");
  auto run = trace_command(db, {INGERO_FAKE_CALLS, "threads", INGERO_FAKE_CUDART, "2", "200"},
                           {"-q"}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 402);
  EXPECT_EQ(run.err.find("lost"), std::string::npos) << run.err;
  int rc = 0;
  std::string text = run_ingero({"explain", "--db", db}, &rc);
  EXPECT_EQ(text.rfind("INGERO INCIDENT REPORT", 0), 0u) << text;
  auto j = nlohmann::json::parse(run_ingero({"explain", "--db", db, "--json"}, &rc));
  EXPECT_EQ(j["losses"]["calls_lost"], 0);
  EXPECT_EQ(j["losses"]["lower_bounds"], false);
}

}  // namespace
}  // namespace ingero::test

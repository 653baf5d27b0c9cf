// `ingero check` as a user runs it: every backend's libraries, opt-in ones included, and the
// probe-cost self-measurement (--bench) with exact hit counts. Real libraries, real probes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

nlohmann::json check_json(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {INGERO_BIN, "check", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string out;
  int rc = run_command(args, &out);
  EXPECT_EQ(rc, 0) << out;
  return nlohmann::json::parse(out);
}

TEST(CheckAudit, ListsLibibverbsAsOptInWithVersionAndCoverage) {
  REQUIRE_BPF();
  REQUIRE_FILE("/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
  auto j = check_json({"--backends", "rdma"});
  nlohmann::json rdma;
  for (auto& c : j["checks"])
    if (c["name"] == "backend:rdma") rdma = c;
  ASSERT_FALSE(rdma.is_null()) << j.dump(2);
  EXPECT_EQ(rdma["status"], "pass");
  EXPECT_EQ(rdma["value"], "1 libraries, opt-in");
  EXPECT_NE(rdma["detail"].get<std::string>().find("traced only with `ingero trace --rdma-verbs`"),
            std::string::npos);
  ASSERT_EQ(j["libraries"].size(), 1u) << j["libraries"].dump(2);
  const auto& lib = j["libraries"][0];
  EXPECT_EQ(lib["backend"], "rdma");
  EXPECT_EQ(lib["api"], "ibverbs");
  EXPECT_EQ(lib["soname"], "libibverbs.so.1");
  // Debian 12's libibverbs1 is rdma-core 44: libibverbs.so.1.14.44.0.
  EXPECT_EQ(lib["version"].get<std::string>().rfind("1.14.", 0), 0u) << lib["version"];
  EXPECT_EQ(lib["probes_total"], 1);
  EXPECT_EQ(lib["probes_resolved"], 1);
  EXPECT_EQ(lib["opt_in"], "--rdma-verbs");
}

TEST(CheckAudit, BenchCountsEveryProbeHitExactly) {
  REQUIRE_BPF();
  auto j = check_json({"--backends", "cuda", "--bench"});
  ASSERT_TRUE(j.contains("probe_cost")) << j.dump(2);
  const auto& p = j["probe_cost"];
  // Four copies timed in turns of 1000 calls, at least 5 turns: the same count for each.
  uint64_t calls = p["untraced_calls"];
  EXPECT_GE(calls, 5000u);
  EXPECT_EQ(calls % 1000, 0u);
  EXPECT_EQ(p["min_calls"], calls);
  EXPECT_EQ(p["min_entries"], calls);
  EXPECT_EQ(p["min_returns"], calls);
  EXPECT_EQ(p["ingero_calls"], calls);
  EXPECT_EQ(p["ingero_records"], calls);
  EXPECT_EQ(p["stacks_calls"], calls);
  EXPECT_EQ(p["stacks_records"], calls);
  EXPECT_EQ(p["exact"], true);
  // Both attach the same way, so the ratio compares like with like.
  EXPECT_EQ(p["uprobe_multi"], p["min_pair_uprobe_multi"]);
  // A probed call costs more than an unprobed one (a trap per call: microseconds against
  // nanoseconds on any kernel), and the prediction is that cost times the rate.
  EXPECT_GT(p["min_pair_ns"].get<double>(), 10 * p["untraced_ns"].get<double>());
  const auto& pred = p["predicted"];
  ASSERT_EQ(pred.size(), 3u);
  EXPECT_EQ(pred[0]["calls_per_s"], 10000.0);
  double added = p["ingero_ns"].get<double>() - p["untraced_ns"].get<double>();
  EXPECT_DOUBLE_EQ(pred[0]["cpu_share_no_stack"].get<double>(), 10000.0 * added * 1e-9);
  EXPECT_LT(p["seconds"].get<double>(), 10.0);
}

}  // namespace
}  // namespace ingero::test

// Fleet metrics: VictoriaMetrics scrapes three `ingero trace --prometheus` agents (a `node`
// label per target, as docs/fleet.md configures it) and the documented PromQL ranks the nodes
// by kernel-launch latency p99. The agents trace the fake CUDA runtime, whose launches sleep
// as long as INGERO_FAKE_LAUNCH_US says: 200 ms on node-2, 20 ms on node-3, 50 us on node-1
// (a factor 10 and more apart: scheduling delays on a loaded host cannot swap them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_paths.h"
#include "tests/support/http_client.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const char* kVictoria = "/usr/bin/victoria-metrics";

// docs/fleet.md, "Fleet metrics".
const char* kRankByLaunchP99 =
    "sort_desc(histogram_quantile(0.99, sum by (node, le) "
    "(rate(ingero_gpu_api_call_duration_seconds_bucket{kind=\"launch\",api=\"cuda_runtime\"}"
    "[1m]))))";

TEST(FleetMetrics, VictoriaMetricsRanksNodesByLaunchLatencyP99) {
  REQUIRE_BPF();
  if (access(kVictoria, X_OK) != 0) {
    if (running_in_ci())
      FAIL() << "CI=true but " << kVictoria << " is missing (Debian package victoria-metrics)";
    GTEST_SKIP() << "*** SKIPPED: " << kVictoria << " not installed ***";
  }
  struct Node {
    std::string name, launch_us;
    int port = 0;
    Subprocess agent;
  };
  std::vector<Node> nodes(3);
  const char* kLaunchUs[] = {"50", "200000", "20000"};
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].name = "node-" + std::to_string(i + 1);
    nodes[i].launch_us = kLaunchUs[i];
  }
  // Each job launches for 20 s, then the agent stops with it.
  std::string job = "end=$(($(date +%s) + 20)); while [ $(date +%s) -lt $end ]; do " +
                    std::string(INGERO_FAKE_CALLS) + " steps " + INGERO_FAKE_CUDART +
                    " 1 >/dev/null; sleep 0.2; done";
  for (Node& n : nodes) {
    n.port = free_tcp_port();
    n.agent =
        Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--no-stack", "--node", n.name, "--db",
                           temp_path(n.name + ".db"), "--prometheus",
                           "127.0.0.1:" + std::to_string(n.port), "--", "/bin/sh", "-c", job},
                          {"VIRTUAL_ENV=" INGERO_FAKE_VENV, "CUDA_HOME=" INGERO_FAKE_CUDA_HOME,
                           "INGERO_FAKE_LAUNCH_US=" + n.launch_us});
    ASSERT_TRUE(n.agent.wait_stderr_line("serving Prometheus metrics", std::chrono::seconds(60)))
        << n.agent.err();
  }
  std::string dir = temp_path("victoria");
  std::filesystem::create_directories(dir + "/data");
  {
    std::ofstream cfg(dir + "/scrape.yml");
    cfg << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ingero\n"
           "    static_configs:\n";
    for (const Node& n : nodes)
      cfg << "      - targets: ['127.0.0.1:" << n.port << "']\n        labels: {node: " << n.name
          << "}\n";
  }
  // A port found free can be taken by a test running beside this one before the server binds it
  // (it then exits at once): a new port, again.
  int vm_port = 0;
  Subprocess vm;
  for (int attempt = 0; attempt < 3; ++attempt) {
    vm_port = free_tcp_port();
    vm = Subprocess::spawn({kVictoria, "-promscrape.config=" + dir + "/scrape.yml",
                            "-storageDataPath=" + dir + "/data",
                            "-httpListenAddr=127.0.0.1:" + std::to_string(vm_port),
                            "-search.latencyOffset=0s", "-loggerLevel=ERROR"});
    if (vm.wait(std::chrono::milliseconds(500)) == -1 ||
        vm.err().find("address already in use") == std::string::npos)
      break;
  }
  std::vector<std::pair<std::string, double>> ranking;
  for (int i = 0; i < 300 && ranking.size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto r = http_get("127.0.0.1", vm_port, "/api/v1/query?query=" + url_encode(kRankByLaunchP99));
    if (r.status != 200) continue;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || j["status"] != "success") continue;
    std::vector<std::pair<std::string, double>> v;
    for (const auto& s : j["data"]["result"]) {
      double x = std::stod(s["value"][1].get<std::string>());
      if (s["metric"].contains("node") && x == x) v.emplace_back(s["metric"]["node"], x);
    }
    if (v.size() == 3) ranking = v;
  }
  for (Node& n : nodes) EXPECT_EQ(n.agent.wait(std::chrono::seconds(120)), 0) << n.agent.err();
  vm.signal(SIGTERM);
  vm.wait(std::chrono::seconds(20));
  ASSERT_EQ(ranking.size(), 3u) << vm.err();
  EXPECT_EQ(ranking[0].first, "node-2");
  EXPECT_EQ(ranking[1].first, "node-3");
  EXPECT_EQ(ranking[2].first, "node-1");
  // A launch never takes less than its sleep: each p99 is at least the lower edge of the
  // bucket holding it (tails above depend on the host's load, and are not asserted).
  EXPECT_GE(ranking[0].second, 0.1);
  EXPECT_GE(ranking[1].second, 0.01);
  EXPECT_GE(ranking[2].second, 0.000025);
}

}  // namespace
}  // namespace ingero::test

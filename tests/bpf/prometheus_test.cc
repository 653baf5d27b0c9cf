// `ingero trace --prometheus` scraped by a real Prometheus server: the series it stored match
// the calls the workloads made on the real CUDA and HIP libraries, and the counters of a fake
// InfiniBand sysfs tree, including one the test raises between scrapes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/http_client.h"
#include "tests/support/prometheus_server.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const char* kHip = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

using Json = nlohmann::json;

// op -> calls, from the workloads' "<op> <tid> <ret>" lines.
std::map<std::string, int> count_ops(const std::string& path) {
  std::map<std::string, int> m;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string op;
    int tid, ret;
    if (ls >> op && op != "pid" && ls >> tid >> ret) ++m[op];
  }
  return m;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_ib_tree(const std::string& root, uint64_t rcv_errors) {
  std::string port = root + "/class/infiniband/mlx5_0/ports/1";
  std::filesystem::create_directories(port + "/counters");
  std::filesystem::create_directories(port + "/hw_counters");
  std::ofstream(port + "/link_layer") << "InfiniBand\n";
  std::ofstream(port + "/state") << "4: ACTIVE\n";
  std::ofstream(port + "/counters/port_rcv_data") << "1000\n";
  std::ofstream(port + "/counters/port_xmit_data") << "250\n";
  std::ofstream(port + "/counters/symbol_error") << "0\n";
  std::ofstream(port + "/counters/link_downed") << "1\n";
  std::ofstream(port + "/counters/port_rcv_errors") << rcv_errors << "\n";
  std::ofstream(port + "/hw_counters/out_of_buffer") << "7\n";
}

TEST(Prometheus, RealServerScrapesCallsAndInfinibandCounters) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_CALLS);
  REQUIRE_FILE(kStub);
  REQUIRE_FILE(kHip);
  REQUIRE_PROMETHEUS();
  std::string sys = temp_path("sys");
  write_ib_tree(sys, 3);
  std::string dir = temp_path("work");
  std::filesystem::create_directories(dir);
  // The command runs both workloads, then idles until the test lets it finish.
  std::string script = std::string(INGERO_CUDA_CALLS) + " " + kStub + " > " + dir + "/cuda.out; " +
                       INGERO_HIP_CALLS + " " + kHip + " > " + dir + "/hip.out; touch " + dir +
                       "/done; while [ ! -e " + dir + "/stop ]; do sleep 0.1; done";
  int metrics_port = free_tcp_port();
  std::string db = temp_path("prom.db");
  // Every launch timed through its return (by default one in 32 per thread is), so that each
  // has its error and its duration.
  auto tracer = Subprocess::spawn(
      {INGERO_BIN, "trace", "--no-live", "--db", db, "--sysfs-root", sys, "--launch-timing", "1",
       "--prometheus", "127.0.0.1:" + std::to_string(metrics_port), "--", "/bin/sh", "-c", script});
  ASSERT_TRUE(tracer.wait_stderr_line("serving Prometheus metrics", std::chrono::seconds(30)))
      << tracer.err();
  PrometheusServer prom;
  std::string why;
  ASSERT_TRUE(prom.start(metrics_port, &why)) << why;

  for (int i = 0; i < 600 && !std::filesystem::exists(dir + "/done"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(std::filesystem::exists(dir + "/done")) << tracer.err();
  auto cuda = count_ops(dir + "/cuda.out");
  auto hip = count_ops(dir + "/hip.out");
  ASSERT_FALSE(cuda.empty()) << slurp(dir + "/cuda.out");
  ASSERT_EQ(hip.size(), 8u) << slurp(dir + "/hip.out");
  std::map<std::string, int> want = cuda;
  for (const auto& [op, n] : hip) want[op] += n;

  // Per-op call counts as Prometheus stored them: exactly the workloads' calls.
  auto to_map = [](const std::vector<std::pair<Json, double>>& v) {
    std::map<std::string, int> m;
    for (const auto& [labels, value] : v) m[labels["op"].get<std::string>()] += int(value);
    return m;
  };
  auto got =
      prom.wait_for("ingero_gpu_api_calls_total", [&](const auto& v) { return to_map(v) == want; });
  EXPECT_EQ(to_map(got), want);
  for (const auto& [labels, value] : got) {
    EXPECT_FALSE(labels.contains("pid")) << labels.dump();
    std::string op = labels["op"];
    EXPECT_EQ(labels["vendor"], op.rfind("hip", 0) == 0 ? "amd" : "nvidia") << op;
  }
  // Every HIP call failed (no GPU): the error counters per op match the calls.
  auto errs = prom.query("sum by (op) (ingero_gpu_api_errors_total{vendor=\"amd\"})");
  EXPECT_EQ(to_map(errs), hip);
  // Histogram counts agree with the counters.
  EXPECT_EQ(to_map(prom.query("ingero_gpu_api_call_duration_seconds_count")), want);

  // The fake HCA, word counters in bytes.
  auto one = [&](const std::string& q) {
    auto v = prom.query(q);
    EXPECT_EQ(v.size(), 1u) << q;
    return v.empty() ? -1.0 : v[0].second;
  };
  const std::string sel = "{rdma_device=\"mlx5_0\",rdma_port=\"1\",rdma_transport=\"InfiniBand\"}";
  EXPECT_EQ(one("ingero_rdma_port_rcv_errors_total" + sel), 3);
  EXPECT_EQ(one("ingero_rdma_port_rcv_data_bytes_total" + sel), 4000);
  EXPECT_EQ(one("ingero_rdma_port_xmit_data_bytes_total" + sel), 1000);
  EXPECT_EQ(one("ingero_rdma_link_downed_total" + sel), 1);
  EXPECT_EQ(one("ingero_rdma_symbol_error_total" + sel), 0);
  EXPECT_EQ(one("ingero_rdma_hw_out_of_buffer_total" + sel), 7);

  // The fabric degrades while Prometheus watches: 3 -> 11 receive errors.
  write_ib_tree(sys, 11);
  auto after = prom.wait_for("ingero_rdma_port_rcv_errors_total" + sel,
                             [](const auto& v) { return v.size() == 1 && v[0].second == 11; });
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].second, 11);
  // Both values were scraped: the increase over the window is the 8 new errors.
  auto range =
      prom.query("max_over_time(ingero_rdma_port_rcv_errors_total" + sel +
                 "[5m]) - min_over_time(ingero_rdma_port_rcv_errors_total" + sel + "[5m])");
  ASSERT_EQ(range.size(), 1u);
  EXPECT_EQ(range[0].second, 8);

  EXPECT_EQ(one("up{job=\"ingero\"}"), 1);
  EXPECT_EQ(one("ingero_build_info"), 1);
  EXPECT_GE(one("ingero_attached_probes{backend=\"cuda\"}"), 1);
  EXPECT_EQ(one("ingero_ringbuf_drops_total"), 0);

  // Clean shutdown: the command finishes, the tracer exits 0 and the port is free again.
  std::ofstream(dir + "/stop") << "";
  EXPECT_EQ(tracer.wait(std::chrono::seconds(60)), 0) << tracer.err();
  EXPECT_EQ(http_get("127.0.0.1", metrics_port, "/metrics").status, 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), [&] {
    int n = 0;
    for (const auto& [op, c] : want) n += c;
    return n;
  }());
}

TEST(Prometheus, FiftyShortLivedProcessesKeepLabelsBounded) {
  REQUIRE_BPF();
  REQUIRE_FILE(kHip);
  std::string dir = temp_path("fifty");
  std::filesystem::create_directories(dir);
  std::string script = "for i in $(seq 50); do " + std::string(INGERO_HIP_CALLS) + " " + kHip +
                       " > " + dir + "/$i.out; done; touch " + dir + "/done; while [ ! -e " + dir +
                       "/stop ]; do sleep 0.1; done";
  int port = free_tcp_port();
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", temp_path("fifty.db"),
                                   "--prometheus", "127.0.0.1:" + std::to_string(port), "--",
                                   "/bin/sh", "-c", script});
  for (int i = 0; i < 1200 && !std::filesystem::exists(dir + "/done"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(std::filesystem::exists(dir + "/done")) << tracer.err();
  auto per_run = count_ops(dir + "/1.out");
  ASSERT_EQ(per_run.size(), 8u);
  std::set<int> pids;
  for (int i = 1; i <= 50; ++i) {
    std::ifstream in(dir + "/" + std::to_string(i) + ".out");
    std::string word;
    int pid = 0;
    in >> word >> pid;
    pids.insert(pid);
    EXPECT_EQ(count_ops(dir + "/" + std::to_string(i) + ".out"), per_run) << i;
  }
  ASSERT_EQ(pids.size(), 50u);
  // The tracer flushes events every 200 ms; the last process's calls arrive within a second.
  std::map<std::string, int> series;
  std::string text;
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto r = http_get("127.0.0.1", port, "/metrics");
    ASSERT_EQ(r.status, 200) << r.error;
    text = r.body;
    series.clear();
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("ingero_gpu_api_calls_total{", 0) != 0) continue;
      auto op_at = line.find("op=\"") + 4;
      series[line.substr(op_at, line.find('"', op_at) - op_at)] =
          std::stoi(line.substr(line.rfind(' ') + 1));
    }
    bool complete = series.size() == per_run.size();
    for (const auto& [op, n] : per_run) complete = complete && series[op] == 50 * n;
    if (complete) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // One series per op, however many processes made the calls; counts are the sums.
  ASSERT_EQ(series.size(), per_run.size()) << text;
  for (const auto& [op, n] : per_run) EXPECT_EQ(series[op], 50 * n) << op;
  for (int pid : pids)
    EXPECT_EQ(text.find("\"" + std::to_string(pid) + "\""), std::string::npos) << pid;
  std::ofstream(dir + "/stop") << "";
  EXPECT_EQ(tracer.wait(std::chrono::seconds(60)), 0) << tracer.err();
}

TEST(Prometheus, PortInUseRefusesToStartBeforeAttaching) {
  REQUIRE_BPF();
  int port = free_tcp_port();
  auto first = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", temp_path("a.db"),
                                  "--prometheus", "127.0.0.1:" + std::to_string(port)});
  ASSERT_TRUE(first.wait_stderr_line("tracing", std::chrono::seconds(30))) << first.err();
  std::string out, err;
  std::string db = temp_path("b.db");
  int rc = run_command({INGERO_BIN, "trace", "--no-live", "--db", db, "--prometheus",
                        "127.0.0.1:" + std::to_string(port), "--", "/bin/true"},
                       &out, &err);
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("cannot serve Prometheus metrics on 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("attached"), std::string::npos) << err;  // nothing was attached
  EXPECT_FALSE(std::filesystem::exists(db));                  // and no trace file was started
  first.signal(SIGINT);
  EXPECT_EQ(first.wait(std::chrono::seconds(30)), 0) << first.err();
}

// Found by a hostile client: the command `ingero trace --prometheus PORT -- CMD` ran held the
// listening socket (Asio opens sockets without close-on-exec), and kept the port, unanswered,
// after the tracer ended. The command gets exactly the descriptors ingero was started with:
// here fd 7, opened by the shell that starts ingero, and none of ingero's own.
TEST(Prometheus, TheTracedCommandInheritsWhatIngeroWasGivenNotItsSocket) {
  REQUIRE_BPF();
  std::string given = temp_path("given.txt"), db = temp_path("fds.db");
  // The same lister for both: what a process started by this shell gets (ingero, with fd 7
  // the shell opened), and what ingero's command gets.
  const std::string list =
      "import os; print(chr(10).join(sorted(os.listdir('/proc/self/fd'), key=int)))";
  int port = free_tcp_port();
  std::string out, err;
  int rc = run_command(
      {"sh", "-c",
       "exec 7</dev/null; python3 -c \"" + list + "\" > " + given + "; exec \"$0\" \"$@\"",
       INGERO_BIN, "trace", "--no-live", "--db", db, "--prometheus",
       "127.0.0.1:" + std::to_string(port), "--", "python3", "-c", list},
      &out, &err);
  ASSERT_EQ(rc, 0) << err;
  std::ifstream g(given);
  std::stringstream ingero_got;
  ingero_got << g.rdbuf();
  EXPECT_NE(ingero_got.str().find("\n7\n"), std::string::npos) << ingero_got.str();
  EXPECT_EQ(out, ingero_got.str());
}

}  // namespace
}  // namespace ingero::test

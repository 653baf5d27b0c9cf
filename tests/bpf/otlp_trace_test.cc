// `ingero trace --otlp` on the real CUDA runtime, against a loopback receiver that decodes
// every request with the exporter's own .proto definitions: the metrics are the series
// /metrics serves, with the same values once the workload is done; the session's causal
// chains arrive as log records; a collector that never answers holds neither the trace nor
// its exit, and what it cost is counted in the session row, on stderr and in `ingero check`.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/http_client.h"
#include "tests/support/otlp_receiver.h"
#include "tests/support/otlp_series.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using namespace std::chrono_literals;

std::map<std::string, std::string> keyed(const std::string& path) {
  std::map<std::string, std::string> m;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string k, v;
    if (ls >> k >> v) m[k] = v;
  }
  return m;
}

void wait_file(const std::string& path, std::chrono::seconds limit) {
  for (auto until = std::chrono::steady_clock::now() + limit;
       !std::filesystem::exists(path) && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(100ms);
}

nlohmann::json session_stats(const std::string& db) {
  return nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
}

// The metrics request that arrived last, once it arrived after `after`.
const opentelemetry::proto::metrics::v1::ScopeMetrics* latest(
    const std::vector<otlp_col::metrics::v1::ExportMetricsServiceRequest>& reqs) {
  if (reqs.empty()) return nullptr;
  return &reqs.back().resource_metrics(0).scope_metrics(0);
}

TEST(OtlpTrace, TheSeriesOfMetricsAndTheSessionsChainsAsLogRecords) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  REQUIRE_FILE("/usr/bin/chrt");
  OtlpReceiver rx;
  std::string dir = temp_path("work");
  std::filesystem::create_directories(dir);
  // A per-row sync in a training loop (a hidden_sync chain; at SCHED_FIFO, as the faults
  // tests run it, so that other load cannot change what is found), then idle until told to
  // stop.
  std::string script = "chrt -f 20 " + std::string(INGERO_STEP_FAULTS) + " rowsync 30 > " + dir +
                       "/faults.out; touch " + dir + "/done; while [ ! -e " + dir +
                       "/stop ]; do sleep 0.1; done";
  int port = free_tcp_port();
  std::string db = temp_path("otlp.db");
  auto tracer =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--node", "gpu-07",
                         "--prometheus", "127.0.0.1:" + std::to_string(port), "--otlp", rx.url(),
                         "--otlp-interval", "1s", "--", "/bin/sh", "-c", script});
  ASSERT_TRUE(tracer.wait_stderr_line("exporting OTLP to " + rx.url(), 30s)) << tracer.err();
  wait_file(dir + "/done", 120s);
  ASSERT_TRUE(std::filesystem::exists(dir + "/done")) << tracer.err();
  EXPECT_EQ(keyed(dir + "/faults.out")["steps"], "30");
  // /metrics, the next OTLP export, /metrics again: the GPU API families no longer change (the
  // workload is done), so they are equal series for series. The agent's own families may
  // appear in between (the live analysis adds the step histograms when it first sees steps):
  // the first scrape's names are in the export, and the export's in the second scrape.
  std::this_thread::sleep_for(1500ms);
  size_t before = rx.metrics().size();
  HttpResponse first = http_get("127.0.0.1", port, "/metrics");
  ASSERT_EQ(first.status, 200) << first.error;
  ASSERT_TRUE(rx.wait_for([&] { return rx.metrics().size() > before; }, 10s));
  HttpResponse second = http_get("127.0.0.1", port, "/metrics");
  ASSERT_EQ(second.status, 200) << second.error;
  auto reqs = rx.metrics();
  auto otlp = otlp_series(*latest(reqs));
  auto prom = exposition_series(second.body);
  for (const char* family : {"ingero_gpu_api_", "ingero_build_info", "ingero_collective"}) {
    auto want = with_prefix(prom, family);
    if (std::string(family) == "ingero_gpu_api_") {
      EXPECT_GT(want.size(), 50u) << second.body;
    }
    EXPECT_EQ(series_diff(with_prefix(exposition_series(first.body), family), want), "") << family;
    EXPECT_EQ(series_diff(with_prefix(otlp, family), want), "") << family;
  }
  auto names = [](const std::map<std::string, double>& s) {
    std::set<std::string> n;
    for (const auto& [k, v] : s) n.insert(k.substr(0, k.find('{')));
    return n;
  };
  auto n1 = names(exposition_series(first.body)), n_otlp = names(otlp), n2 = names(prom);
  EXPECT_TRUE(std::includes(n_otlp.begin(), n_otlp.end(), n1.begin(), n1.end()));
  EXPECT_TRUE(std::includes(n2.begin(), n2.end(), n_otlp.begin(), n_otlp.end()));
  EXPECT_GE(n1.size(), 15u);
  // The resource: this host's agent.
  std::map<std::string, std::string> res;
  for (const auto& a : reqs.back().resource_metrics(0).resource().attributes())
    res[a.key()] = a.value().string_value();
  EXPECT_EQ(res["service.name"], "ingero");
  EXPECT_EQ(res["ingero.node"], "gpu-07");
  EXPECT_FALSE(res["host.name"].empty());

  std::ofstream(dir + "/stop") << "";
  EXPECT_EQ(tracer.wait(120s), 0) << tracer.err();
  // The session's chains as the trace stored them, each as a log record (the live analysis
  // may have sent a chain earlier; a chain is sent again only at another severity).
  auto stored = query_rows(db, "SELECT id, severity, rule FROM causal_chains ORDER BY id");
  ASSERT_FALSE(stored.empty()) << tracer.err();
  std::set<std::string> records, rules;
  size_t n = 0;
  for (const auto& r : rx.logs())
    for (const auto& rl : r.resource_logs())
      for (const auto& sl : rl.scope_logs())
        for (const auto& lr : sl.log_records()) {
          ++n;
          std::string id, rule;
          for (const auto& a : lr.attributes()) {
            if (a.key() == "ingero.chain.id") id = a.value().string_value();
            if (a.key() == "ingero.chain.rule") rule = a.value().string_value();
          }
          records.insert("gpu-07:" + id + " " + lr.severity_text());
          rules.insert(rule);
          EXPECT_EQ(lr.event_name(), "ingero.causal_chain");
          EXPECT_FALSE(lr.body().string_value().empty());
        }
  for (const auto& row : stored) EXPECT_TRUE(records.count(row[0] + " " + row[1])) << row[0];
  EXPECT_TRUE(rules.count("hidden_sync")) << n;
  auto s = session_stats(db);
  EXPECT_EQ(s["otlp_log_records_sent"], n);
  EXPECT_EQ(s["otlp_metric_points_dropped"], 0);
  EXPECT_EQ(s["otlp_metric_points_sent"], s["otlp_metric_points_queued"]);
  EXPECT_EQ(rx.undecodable(), 0u);
}

// A file reused for a second session (a restarted unit keeps its --db) holds the first one's
// chains: the second session's live analysis sends its own chains, never the first's again.
TEST(OtlpTrace, ASessionSendsNoChainOfTheSessionsBeforeIt) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  REQUIRE_FILE("/usr/bin/chrt");
  std::string db = temp_path("reused.db");
  auto first = Subprocess::spawn({INGERO_BIN, "trace", "-q", "--no-live", "--db", db, "--", "chrt",
                                  "-f", "20", INGERO_STEP_FAULTS, "rowsync", "30"});
  ASSERT_EQ(first.wait(180s), 0) << first.err();
  ASSERT_FALSE(query_rows(db, "SELECT id FROM causal_chains").empty()) << first.err();
  OtlpReceiver rx;
  auto second = Subprocess::spawn({INGERO_BIN, "trace", "-q", "--no-live", "--db", db, "--otlp",
                                   rx.url(), "--otlp-interval", "1s", "--", "sleep", "5"});
  ASSERT_EQ(second.wait(120s), 0) << second.err();
  EXPECT_EQ(query_rows(db, "SELECT count(*) FROM causal_chains WHERE session_id = 2")[0][0], "0");
  size_t records = 0;
  for (const auto& r : rx.logs())
    for (const auto& rl : r.resource_logs())
      for (const auto& sl : rl.scope_logs()) records += size_t(sl.log_records_size());
  EXPECT_EQ(records, 0u);
  EXPECT_FALSE(rx.metrics().empty());  // the exporter did send: the live analysis had its turn
  auto stats = query_rows(db, "SELECT bpf_stats FROM sessions ORDER BY id DESC LIMIT 1");
  EXPECT_EQ(nlohmann::json::parse(stats[0][0])["otlp_log_records_sent"], 0);
}

TEST(OtlpTrace, ACollectorThatNeverAnswersHoldsNeitherTheTraceNorItsExit) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_CALLS);
  REQUIRE_FILE(kStub);
  SilentReceiver rx;
  std::string dir = temp_path("silent");
  std::filesystem::create_directories(dir);
  std::string db = temp_path("silent.db");
  std::string script = std::string(INGERO_CUDA_CALLS) + " " + kStub + " 3 > " + dir +
                       "/cuda.out; touch " + dir + "/done; sleep 3";
  // Each request would wait 30 s for an answer; the exit deadline is 2 s.
  auto tracer = Subprocess::spawn(
      {INGERO_BIN, "trace", "--no-live", "--db", db, "--otlp", rx.url(), "--otlp-interval", "500ms",
       "--otlp-exit-timeout", "2s", "--", "/bin/sh", "-c", script},
      {"OTEL_EXPORTER_OTLP_TIMEOUT=30000"});
  wait_file(dir + "/done", 120s);
  ASSERT_TRUE(std::filesystem::exists(dir + "/done")) << tracer.err();
  auto done = std::chrono::steady_clock::now();
  EXPECT_EQ(tracer.wait(120s), 0) << tracer.err();
  // 3 s of sleep, the 2 s deadline, the session's analysis: far below one 30 s request.
  EXPECT_LT(std::chrono::steady_clock::now() - done, 25s) << tracer.err();
  EXPECT_GE(rx.connections(), 1u);
  // Every call was traced and stored: the exporter's stall cost the trace nothing.
  auto k = keyed(dir + "/cuda.out");
  std::ifstream in(dir + "/cuda.out");
  int calls = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("pid ", 0) != 0 && !line.empty()) ++calls;
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE pid = " + k["pid"]), calls);
  auto s = session_stats(db);
  EXPECT_EQ(s["otlp_metric_points_sent"], 0);
  EXPECT_GT(s["otlp_metric_points_queued"].get<uint64_t>(), 0u);
  EXPECT_EQ(s["otlp_metric_points_dropped"], s["otlp_metric_points_queued"]);
  EXPECT_EQ(
      s["otlp_dropped_at_exit"].get<uint64_t>() + s["otlp_dropped_queue_full"].get<uint64_t>() +
          s["otlp_dropped_expired"].get<uint64_t>() + s["otlp_dropped_rejected"].get<uint64_t>(),
      s["otlp_metric_points_dropped"].get<uint64_t>() +
          s["otlp_log_records_dropped"].get<uint64_t>() + s["otlp_spans_dropped"].get<uint64_t>());
  EXPECT_NE(tracer.err().find("ingero: OTLP dropped " +
                              std::to_string(s["otlp_metric_points_dropped"].get<uint64_t>()) +
                              " metric points"),
            std::string::npos)
      << tracer.err();
  // ingero check reports the session's drops.
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "check", "--json", "--db", db}, &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  bool found = false;
  for (const auto& c : j["checks"])
    if (c["name"] == "otlp_delivery") {
      found = true;
      EXPECT_EQ(c["status"], "optional");
      EXPECT_EQ(c["value"], std::to_string(s["otlp_metric_points_dropped"].get<uint64_t>() +
                                           s["otlp_log_records_dropped"].get<uint64_t>()) +
                                " dropped");
    }
  EXPECT_TRUE(found) << out;
}

}  // namespace
}  // namespace ingero::test

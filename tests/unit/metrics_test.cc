// Prometheus exposition: exact values, promtool's verdict on the text format, label bounds.
#include "serve/metrics/metrics.h"

#include <gtest/gtest.h>
#include <prometheus/histogram.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "backends/rdma/rdma_backend.h"
#include "kernelside/host_decoder.h"
#include "tests/support/exposition.h"
#include "tests/support/sink_inputs.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::serve {
namespace {

// Names the RDMA asynchronous events, as the tracer's registry does.
const hal::BackendRegistry& rdma_registry() {
  static const hal::BackendRegistry r = [] {
    hal::BackendRegistry reg;
    reg.add(backends::make_rdma_backend(false));
    return reg;
  }();
  return r;
}

using test::call;
using test::sample;
using test::series_count;

void feed_workload(Metrics& m) {
  using K = hal::EventKind;
  for (int i = 0; i < 3; ++i)
    m.observe(call("nvidia", "cuda_runtime", K::kLaunch, "cudaLaunchKernel", 4'000, 0));
  auto sync = call("nvidia", "cuda_runtime", K::kSync, "cudaStreamSynchronize", 2'000'000, 0);
  sync.off_cpu_ns = 1'500'000;
  sync.preempts = 2;
  m.observe(sync);
  m.observe(call("amd", "hip", K::kMemcpy, "hipMemcpy", 30'000, 101));
  m.observe(call("amd", "hip", K::kMemcpy, "hipMemcpy", 30'000, 101));
  auto ar = call("nvidia", "nccl", K::kCollective, "ncclAllReduce", 50'000, 0);
  ar.set(hal::Field::kBytes, 4096);
  ar.set(hal::Field::kStream, 7);
  m.observe(ar);
  auto wait = call("nvidia", "cuda_runtime", K::kSync, "cudaStreamSynchronize", 3'000'000, 0);
  wait.set(hal::Field::kStream, 7);
  m.observe(wait);
  hal::Event sw;
  sw.kind = K::kSchedSwitch;
  sw.set(hal::Field::kFlags, 1);
  m.observe(sw);
  // Block requests as the host decoder makes them from the kernel's records (REQ_OP_READ 0,
  // REQ_OP_WRITE 1, REQ_OP_FLUSH 2, REQ_OP_DISCARD 3, and one it has no name for).
  for (uint32_t op : {0u, 1u, 1u, 2u, 3u, 9u}) {
    ingero_block_rec rec{};
    rec.type = INGERO_REC_BLOCK;
    rec.op = op;
    rec.issue_ns = 1'000'000;
    rec.complete_ns = 3'000'000;
    hal::Event blk;
    ASSERT_TRUE(kernelside::decode_host_record(&rec, sizeof(rec), blk));
    m.observe(blk);
  }
  auto async = call("rdma", "ibverbs", K::kRdmaAsyncEvent, "ibv_get_async_event", 1'000, 0);
  async.set(hal::Field::kRdmaEvent, 10);  // IBV_EVENT_PORT_ERR
  async.set(hal::Field::kFabricError, 1);
  m.observe(async);
  hal::Event tcp;
  tcp.kind = K::kTcpRetransmit;
  m.observe(tcp);
  hal::ProcessStats ps;
  ps.pid = 100;
  ps.page_allocs = 10;
  ps.page_bytes = 40960;
  EXPECT_TRUE(m.on_process_stats(0, 0, {ps}));
  backends::RdmaPortSample p;
  p.device = "mlx5_0";
  p.port = 1;
  p.transport = "InfiniBand";
  p.counters = {{"port_rcv_data", 1000}, {"port_rcv_errors", 3}, {"symbol_error", 0}};
  p.hw_counters = {{"out_of_buffer", 7}};
  EXPECT_TRUE(m.on_device_counters(0, "rdma", {backends::to_device_sample(p)}));
  p.counters["port_rcv_errors"] = 5;
  p.counters["port_rcv_data"] = 1500;
  EXPECT_TRUE(m.on_device_counters(0, "rdma", {backends::to_device_sample(p)}));
  EXPECT_TRUE(m.on_agent_stats(
      test::agent_stats(12, 12.5, hal::SessionCounters{}, 0, {{"cuda", 40}, {"hip", 30}}, 65536)));
  EXPECT_TRUE(m.on_chains(test::chains_of({{"HIGH", 1}}), 0));
}

// A call still in progress (a nonblocking communicator's ncclInProgress, classed not ready by
// its backend) is an answer: no error series; a failure of the same op is one.
TEST(Metrics, ACallStillInProgressIsNoError) {
  Metrics m(false, &rdma_registry());
  auto busy = call("nvidia", "nccl", hal::EventKind::kCollective, "ncclAllReduce", 5'000, 7);
  busy.set(hal::Field::kErrClass, uint64_t(hal::ErrorClass::kNotReady));
  m.observe(busy);
  EXPECT_EQ(series_count(m.exposition(), "ingero_gpu_api_errors_total"), 0u);
  auto failed = call("nvidia", "nccl", hal::EventKind::kCollective, "ncclAllReduce", 5'000, 2);
  failed.set(hal::Field::kErrClass, uint64_t(hal::ErrorClass::kOther));
  m.observe(failed);
  std::string t = m.exposition();
  EXPECT_EQ(series_count(t, "ingero_gpu_api_errors_total"), 1u);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_errors_total{api="nccl",code="2",op="ncclAllReduce",vendor="nvidia"})"),
      1);
}

TEST(Metrics, ExactValuesForAKnownWorkload) {
  Metrics m(false, &rdma_registry());
  feed_workload(m);
  std::string t = m.exposition();
  const std::string l =
      R"({api="cuda_runtime",kind="launch",op="cudaLaunchKernel",vendor="nvidia"})";
  EXPECT_EQ(sample(t, "ingero_gpu_api_calls_total" + l), 3);
  EXPECT_EQ(sample(t, "ingero_gpu_api_call_duration_seconds_count" + l), 3);
  EXPECT_DOUBLE_EQ(sample(t, "ingero_gpu_api_call_duration_seconds_sum" + l), 12e-6);
  // 4 us falls in the 5 us bucket, not the 2.5 us one.
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_call_duration_seconds_bucket{api="cuda_runtime",kind="launch",op="cudaLaunchKernel",vendor="nvidia",le="2.5e-06"})"),
      0);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_call_duration_seconds_bucket{api="cuda_runtime",kind="launch",op="cudaLaunchKernel",vendor="nvidia",le="5e-06"})"),
      3);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_calls_total{api="cuda_runtime",kind="sync",op="cudaStreamSynchronize",vendor="nvidia"})"),
      2);
  EXPECT_EQ(
      sample(t, R"(ingero_gpu_api_errors_total{api="hip",code="101",op="hipMemcpy",vendor="amd"})"),
      2);
  EXPECT_EQ(series_count(t, "ingero_gpu_api_errors_total"), 1u);
  EXPECT_DOUBLE_EQ(
      sample(
          t,
          R"(ingero_gpu_api_off_cpu_seconds_total{api="cuda_runtime",op="cudaStreamSynchronize",vendor="nvidia"})"),
      0.0015);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_preempted_calls_total{api="cuda_runtime",op="cudaStreamSynchronize",vendor="nvidia"})"),
      1);
  EXPECT_EQ(sample(t, R"(ingero_collectives_total{op="ncclAllReduce",vendor="nvidia"})"), 1);
  EXPECT_EQ(sample(t, R"(ingero_collective_bytes_total{op="ncclAllReduce",vendor="nvidia"})"),
            4096);
  // The enqueue call's host-side duration (50 us), in its own histogram.
  EXPECT_EQ(
      sample(t, R"(ingero_collective_duration_seconds_count{op="ncclAllReduce",vendor="nvidia"})"),
      1);
  EXPECT_DOUBLE_EQ(
      sample(t, R"(ingero_collective_duration_seconds_sum{op="ncclAllReduce",vendor="nvidia"})"),
      50e-6);
  // Only the sync on the collective's stream is barrier wait; the earlier one is not.
  EXPECT_DOUBLE_EQ(
      sample(t,
             R"(ingero_collective_barrier_wait_seconds_total{op="ncclAllReduce",vendor="nvidia"})"),
      0.003);
  EXPECT_EQ(sample(t, R"(ingero_gpu_thread_context_switches_total{preempted="true"})"), 1);
  // metrics.md: op read, write, flush, discard, io.
  EXPECT_EQ(sample(t, R"(ingero_block_io_duration_seconds_count{op="read"})"), 1);
  EXPECT_EQ(sample(t, R"(ingero_block_io_duration_seconds_count{op="write"})"), 2);
  EXPECT_EQ(sample(t, R"(ingero_block_io_duration_seconds_count{op="flush"})"), 1);
  EXPECT_EQ(sample(t, R"(ingero_block_io_duration_seconds_count{op="discard"})"), 1);
  EXPECT_EQ(sample(t, R"(ingero_block_io_duration_seconds_count{op="io"})"), 1);
  EXPECT_DOUBLE_EQ(sample(t, R"(ingero_block_io_duration_seconds_sum{op="write"})"), 0.004);
  EXPECT_EQ(series_count(t, "ingero_block_io_duration_seconds_count"), 5u);
  EXPECT_EQ(sample(t, "ingero_tcp_retransmits_total"), 1);
  EXPECT_EQ(sample(t, "ingero_page_allocations_total"), 10);
  EXPECT_EQ(sample(t, "ingero_page_allocated_bytes_total"), 40960);
  const std::string port = R"({rdma_device="mlx5_0",rdma_port="1",rdma_transport="InfiniBand"})";
  // Words to bytes; the second read adds only the increase.
  EXPECT_EQ(sample(t, "ingero_rdma_port_rcv_data_bytes_total" + port), 6000);
  EXPECT_EQ(sample(t, "ingero_rdma_port_rcv_errors_total" + port), 5);
  EXPECT_EQ(sample(t, "ingero_rdma_symbol_error_total" + port), 0);
  EXPECT_EQ(sample(t, "ingero_rdma_hw_out_of_buffer_total" + port), 7);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_rdma_async_event_total{rdma_event_type="IBV_EVENT_PORT_ERR",rdma_fabric_error="true"})"),
      1);
  EXPECT_EQ(sample(t, R"(ingero_causal_chains_active{severity="HIGH"})"), 1);
  EXPECT_EQ(sample(t, R"(ingero_causal_chains_active{severity="LOW"})"), 0);
  EXPECT_EQ(sample(t, "ingero_events_total"), 12);
  EXPECT_EQ(sample(t, "ingero_events_per_second"), 12.5);
  EXPECT_EQ(sample(t, "ingero_ringbuf_drops_total"), 0);
  EXPECT_EQ(sample(t, R"(ingero_attached_probes{backend="hip"})"), 30);
  EXPECT_EQ(sample(t, "ingero_db_bytes"), 65536);
  EXPECT_EQ(sample(t, "ingero_build_info{version=\"" INGERO_VERSION "\"}"), 1);
  // No pid or tid label anywhere by default.
  EXPECT_EQ(t.find("pid="), std::string::npos);
  EXPECT_EQ(t.find("tid="), std::string::npos);
}

// A launch seen at its entry only (--launch-timing: one in 32 per thread is timed) counts as a
// call, and neither as a duration nor as an error: it has neither.
TEST(Metrics, UntimedLaunchesCountAsCallsWithoutADuration) {
  Metrics m(false);
  using K = hal::EventKind;
  m.observe(call("nvidia", "cuda_runtime", K::kLaunch, "cudaLaunchKernel", 4'000, 0));
  for (int i = 0; i < 4; ++i) {
    auto e = call("nvidia", "cuda_runtime", K::kLaunch, "cudaLaunchKernel", 0, 0);
    e.timed = false;
    e.has_ret = false;
    m.observe(e);
  }
  std::string t = m.exposition();
  const std::string l =
      R"({api="cuda_runtime",kind="launch",op="cudaLaunchKernel",vendor="nvidia"})";
  EXPECT_EQ(sample(t, "ingero_gpu_api_calls_total" + l), 5);
  EXPECT_EQ(sample(t, "ingero_gpu_api_call_duration_seconds_count" + l), 1);
  EXPECT_DOUBLE_EQ(sample(t, "ingero_gpu_api_call_duration_seconds_sum" + l), 4e-6);
  EXPECT_EQ(series_count(t, "ingero_gpu_api_errors_total"), 0u);
}

TEST(Metrics, RdmaCounterResetRestartsFromTheNewValue) {
  Metrics m(false);
  backends::RdmaPortSample p;
  p.device = "mlx5_1";
  p.port = 2;
  p.transport = "Ethernet";
  p.counters = {{"link_downed", 4}, {"VL15_dropped", 2}};
  EXPECT_TRUE(m.on_device_counters(0, "rdma", {backends::to_device_sample(p)}));
  p.counters["link_downed"] = 1;  // the HCA was reset
  EXPECT_TRUE(m.on_device_counters(0, "rdma", {backends::to_device_sample(p)}));
  std::string t = m.exposition();
  const std::string l = R"({rdma_device="mlx5_1",rdma_port="2",rdma_transport="Ethernet"})";
  EXPECT_EQ(sample(t, "ingero_rdma_link_downed_total" + l), 5);
  EXPECT_EQ(sample(t, "ingero_rdma_vl15_dropped_total" + l), 2);  // names are lower-case
}

constexpr const char* kPromtool = "/usr/bin/promtool";

#define REQUIRE_PROMTOOL()                                                                    \
  do {                                                                                        \
    if (access(kPromtool, X_OK) != 0) {                                                       \
      if (test::running_in_ci())                                                              \
        FAIL() << "CI=true but promtool is missing (Debian package prometheus)";              \
      GTEST_SKIP() << "*** SKIPPED: promtool not installed (apt-get install prometheus) ***"; \
    }                                                                                         \
  } while (0)

// What `promtool check metrics` says of `text` (file `name`): "rc=0\n" and nothing more where
// it passes without a lint finding.
std::string promtool_says(const std::string& text, const std::string& name) {
  std::string path = test::temp_path(name);
  std::ofstream(path) << text;
  std::string out, err;
  int rc = test::run_command({"/bin/sh", "-c", std::string(kPromtool) + " check metrics < " + path},
                             &out, &err);
  return "rc=" + std::to_string(rc) + "\n" + out + err;
}

TEST(Metrics, ExpositionPassesPromtool) {
  REQUIRE_PROMTOOL();
  for (bool per_process : {false, true}) {
    Metrics m(per_process, &rdma_registry());
    feed_workload(m);
    // promtool prints lint findings (naming, units, help) even when it exits 0: none allowed.
    EXPECT_EQ(promtool_says(m.exposition(), per_process ? "pp.prom" : "metrics.prom"), "rc=0\n")
        << "per_process=" << per_process;
  }
}

// Any process may name itself any bytes: one comm that is not UTF-8 must not make Prometheus
// refuse every series of the scrape. Its invalid bytes read as U+FFFD; quotes, backslashes and
// newlines are escaped.
TEST(Metrics, ACommThatIsNotUtf8LeavesTheScrapeValid) {
  REQUIRE_PROMTOOL();
  Metrics m(true, &rdma_registry());
  hal::Event bad =
      call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 1000, 0, 41);
  bad.set_comm(
      "\xff\xfe"
      "bad");
  hal::Event odd =
      call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 1000, 0, 42);
  odd.set_comm("q\"b\\s\nn");
  ASSERT_TRUE(m.on_event(bad));
  ASSERT_TRUE(m.on_event(odd));
  std::string text = m.exposition();
  EXPECT_EQ(sample(text,
                   "ingero_gpu_api_calls_total{api=\"cuda_runtime\",comm=\""
                   "\xEF\xBF\xBD\xEF\xBF\xBD"
                   "bad\",kind=\"launch\",op=\"cudaLaunchKernel\",pid=\"41\","
                   "vendor=\"nvidia\"}"),
            1);
  EXPECT_EQ(
      sample(
          text,
          R"(ingero_gpu_api_calls_total{api="cuda_runtime",comm="q\"b\\s\nn",kind="launch",op="cudaLaunchKernel",pid="42",vendor="nvidia"})"),
      1);
  EXPECT_EQ(promtool_says(text, "bad-comm.prom"), "rc=0\n");
}

// Found by a hostile-testing helper (helper-78): nothing on /metrics said a node's shipper was
// failing or behind, so a stalled shipper could not be alerted on. The shipper's series: rows
// and failed passes as counters, whether it succeeds now, and the events not in ClickHouse yet;
// none without a shipper.
TEST(Metrics, TheClickHouseShippersProgressAndFailures) {
  Metrics m(false);
  hal::AgentStats a = test::agent_stats(100, 0, hal::SessionCounters{}, 0, {}, 0);
  EXPECT_TRUE(m.on_agent_stats(a));
  EXPECT_EQ(series_count(m.exposition(), "ingero_clickhouse_up"), 0u);
  a.shipping = hal::AgentStats::Shipping{5000, 0, false, 120};
  EXPECT_TRUE(m.on_agent_stats(a));
  a.shipping = hal::AgentStats::Shipping{5000, 3, true, 9000};  // ClickHouse away
  EXPECT_TRUE(m.on_agent_stats(a));
  std::string t = m.exposition();
  EXPECT_EQ(sample(t, "ingero_clickhouse_shipped_rows_total"), 5000);
  EXPECT_EQ(sample(t, "ingero_clickhouse_ship_failures_total"), 3);
  EXPECT_EQ(sample(t, "ingero_clickhouse_up"), 0);
  EXPECT_EQ(sample(t, "ingero_clickhouse_unshipped_events"), 9000);
  a.shipping = hal::AgentStats::Shipping{14000, 3, false, 0};  // back, caught up
  EXPECT_TRUE(m.on_agent_stats(a));
  t = m.exposition();
  EXPECT_EQ(sample(t, "ingero_clickhouse_shipped_rows_total"), 14000);
  EXPECT_EQ(sample(t, "ingero_clickhouse_up"), 1);
  EXPECT_EQ(sample(t, "ingero_clickhouse_unshipped_events"), 0);
}

// Losses by kind, from the tracer's cumulative session counters: each kind grows by what it
// grew, the total is their sum, and counters never go down when a figure is re-published.
TEST(Metrics, LossesAreCountedByKind) {
  Metrics m(false);
  hal::SessionCounters c;
  c.call_drops = 1200;
  c.stack_drops = 30;
  c.host_drops = 4;
  c.sample_drops = 2;
  c.lost_calls = 7;
  EXPECT_TRUE(m.on_agent_stats(test::agent_stats(100, 0, c, 3, {}, 0)));
  c.call_drops = 1500;
  EXPECT_TRUE(m.on_agent_stats(test::agent_stats(100, 0, c, 3, {}, 0)));
  EXPECT_TRUE(m.on_agent_stats(test::agent_stats(100, 0, hal::SessionCounters{}, 0, {}, 0)));
  std::string t = m.exposition();
  EXPECT_EQ(sample(t, R"(ingero_dropped_records_total{kind="calls"})"), 1500);
  EXPECT_EQ(sample(t, R"(ingero_dropped_records_total{kind="stacks"})"), 30);
  EXPECT_EQ(sample(t, R"(ingero_dropped_records_total{kind="host"})"), 4);
  EXPECT_EQ(sample(t, R"(ingero_dropped_records_total{kind="samples"})"), 2);
  EXPECT_EQ(sample(t, "ingero_ringbuf_drops_total"), 1536);
  EXPECT_EQ(sample(t, "ingero_untraced_calls_total"), 7);
  EXPECT_EQ(sample(t, "ingero_store_errors_total"), 3);
}

TEST(Metrics, StepHistograms) {
  Metrics m(false);
  EXPECT_TRUE(m.on_steps({{0.016, 0.8}, {0.016, 0.85}, {0.040, 0.05}}));
  EXPECT_TRUE(m.on_steps({}));
  std::string t = m.exposition();
  EXPECT_EQ(sample(t, "ingero_step_duration_seconds_count"), 3);
  EXPECT_DOUBLE_EQ(sample(t, "ingero_step_duration_seconds_sum"), 0.072);
  EXPECT_EQ(sample(t, R"(ingero_step_duration_seconds_bucket{le="0.016"})"), 2);
  EXPECT_EQ(sample(t, R"(ingero_step_duration_seconds_bucket{le="0.032"})"), 2);
  EXPECT_EQ(sample(t, R"(ingero_step_duration_seconds_bucket{le="0.064"})"), 3);
  EXPECT_EQ(sample(t, R"(ingero_step_gpu_idle_ratio_bucket{le="0.1"})"), 1);
  EXPECT_EQ(sample(t, R"(ingero_step_gpu_idle_ratio_bucket{le="0.8"})"), 2);
  EXPECT_EQ(sample(t, R"(ingero_step_gpu_idle_ratio_bucket{le="0.9"})"), 3);
}

TEST(Metrics, ErrorCodesAreBounded) {
  Metrics m(false);
  for (int code = 1; code <= int(Metrics::kMaxCodes) + 20; ++code)
    m.observe(
        call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 1'000, code));
  std::string t = m.exposition();
  EXPECT_EQ(series_count(t, "ingero_gpu_api_errors_total"), Metrics::kMaxCodes + 1);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_gpu_api_errors_total{api="cuda_runtime",code="other",op="cudaLaunchKernel",vendor="nvidia"})"),
      20);
}

// A call's counts wait in plain integers between collections and are in every collection, by
// /metrics (exposition) or by an exporter (collectable): the same totals, and the same buckets
// as prometheus-cpp's own Observe gives the same durations, bounds included.
TEST(Metrics, CountsWaitingBetweenCollectionsAreInEveryCollection) {
  Metrics m(false);
  using K = hal::EventKind;
  const auto& bounds = Metrics::latency_buckets();
  prometheus::Histogram reference(bounds);
  auto timed = [&](uint64_t ns) {
    m.observe(call("nvidia", "cuda_runtime", K::kSync, "cudaStreamSynchronize", ns, 0));
    reference.Observe(double(ns) / 1e9);
  };
  for (double b : bounds) timed(uint64_t(b * 1e9 + 0.5));  // on each bound
  for (uint64_t ns : {1ull, 999ull, 1'001ull, 3'000'000ull, 20'000'000'000ull}) timed(ns);
  auto untimed = call("nvidia", "cuda_runtime", K::kLaunch, "cudaLaunchKernel", 0, 0);
  untimed.timed = false;
  untimed.has_ret = false;
  for (int i = 0; i < 1000; ++i) m.observe(untimed);
  const std::string launches =
      R"(ingero_gpu_api_calls_total{api="cuda_runtime",kind="launch",op="cudaLaunchKernel",vendor="nvidia"})";
  const std::string sync =
      R"({api="cuda_runtime",kind="sync",op="cudaStreamSynchronize",vendor="nvidia")";
  // The exporter's path first: everything observed so far.
  auto exported = m.collectable()->Collect();
  double calls = -1;
  for (const auto& f : exported)
    if (f.name == "ingero_gpu_api_calls_total")
      for (const auto& c : f.metric)
        for (const auto& l : c.label)
          if (l.name == "op" && l.value == "cudaLaunchKernel") calls = c.counter.value;
  EXPECT_EQ(calls, 1000);
  for (int i = 0; i < 24; ++i) m.observe(untimed);
  std::string t = m.exposition();
  EXPECT_EQ(sample(t, launches), 1024);
  EXPECT_EQ(sample(t, "ingero_gpu_api_calls_total" + sync + "}"), double(bounds.size() + 5));
  auto want = reference.Collect().histogram;
  EXPECT_EQ(sample(t, "ingero_gpu_api_call_duration_seconds_count" + sync + "}"),
            double(want.sample_count));
  EXPECT_NEAR(sample(t, "ingero_gpu_api_call_duration_seconds_sum" + sync + "}"), want.sample_sum,
              1e-9);
  for (const auto& b : want.bucket) {
    std::ostringstream le;
    le << b.upper_bound;
    std::string bound = std::isinf(b.upper_bound) ? "+Inf" : le.str();
    EXPECT_EQ(
        sample(t, "ingero_gpu_api_call_duration_seconds_bucket" + sync + ",le=\"" + bound + "\"}"),
        double(b.cumulative_count))
        << bound;
  }
}

// Scraped while calls arrive (the HTTP workers collect while the reader observes): no count is
// lost or counted twice, and every scrape's count only grows.
TEST(Metrics, ScrapesWhileCallsArriveLoseAndRepeatNothing) {
  Metrics m(false);
  auto e = call("nvidia", "cuda_runtime", hal::EventKind::kSync, "cudaStreamSynchronize", 5'000, 0);
  const std::string labels =
      R"({api="cuda_runtime",kind="sync",op="cudaStreamSynchronize",vendor="nvidia"})";
  const std::string calls = "ingero_gpu_api_calls_total" + labels;
  constexpr int kChunks = 20, kChunk = 10'000;
  std::atomic<bool> done{false};
  std::atomic<int> scrapes{0};
  std::vector<double> seen;
  std::thread scraper([&] {
    auto exporter = m.collectable();
    while (!done.load()) {
      std::string t = m.exposition();
      if (t.find(calls) != std::string::npos) seen.push_back(sample(t, calls));
      exporter->Collect();
      ++scrapes;
    }
  });
  // Each chunk of calls is followed by at least one whole scrape, some begun during the chunk.
  for (int c = 0; c < kChunks; ++c) {
    int before = scrapes.load();
    for (int i = 0; i < kChunk; ++i) m.observe(e);
    while (scrapes.load() < before + 2) std::this_thread::yield();
  }
  done = true;
  scraper.join();
  ASSERT_GE(seen.size(), size_t(kChunks));
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::set<double>(seen.begin(), seen.end()).size() >= size_t(kChunks), true);
  std::string t = m.exposition();
  EXPECT_EQ(sample(t, calls), kChunks * kChunk);
  EXPECT_EQ(sample(t, "ingero_gpu_api_call_duration_seconds_count" + labels), kChunks * kChunk);
}

TEST(Metrics, BusyPortIsAClearError) {
  Metrics first(false), second(false);
  int port = 0;
  for (int p = 39100; p < 39200 && !port; ++p)
    if (first.serve("127.0.0.1:" + std::to_string(p))) port = p;
  ASSERT_NE(port, 0);
  auto st = second.serve("127.0.0.1:" + std::to_string(port));
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("cannot serve Prometheus metrics on 127.0.0.1:" +
                                    std::to_string(port)),
            std::string::npos)
      << st.error().message;
}

}  // namespace
}  // namespace ingero::serve

// The OTLP exporter against a loopback receiver that decodes every request with the same
// .proto definitions: the Prometheus registry's series with exact values, causal chains as
// log records, slow calls as spans; delivery through 503s, a receiver that never answers, a
// full queue, refused and partially accepted requests; TLS, headers and gzip; and one request
// decoded by protoc, a tool the project did not write.
#include <gtest/gtest.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "serve/metrics/metrics.h"
#include "serve/otlp/exporter.h"
#include "test_paths.h"
#include "tests/support/otlp_receiver.h"
#include "tests/support/otlp_series.h"
#include "tests/support/sink_inputs.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::serve::otlp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace pm = opentelemetry::proto::metrics::v1;
namespace pl = opentelemetry::proto::logs::v1;
namespace pt = opentelemetry::proto::trace::v1;
namespace pc = opentelemetry::proto::common::v1;

ExporterConfig config_for(const std::string& url, std::map<std::string, std::string> vars = {}) {
  auto c = resolve_config(url, [vars](const char* n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return c ? *c : ExporterConfig{};
}

ExporterOptions fast_options() {
  ExporterOptions o;
  o.interval = 100ms;
  o.flush = 50ms;
  o.start_ns = 1'700'000'000'000'000'000;
  o.node = "gpu-07";
  o.resource = {{"service.name", "ingero"}, {"host.name", "gpu-07"}};
  o.delivery.initial_backoff = 20ms;
  o.delivery.max_backoff = 200ms;
  return o;
}

hal::Event call(std::string_view api, hal::EventKind kind, std::string_view op, uint64_t dur_ns,
                int64_t ret = 0, uint32_t pid = 100) {
  hal::Event e;
  e.vendor = api == "nccl" ? "nvidia" : (api == "hip" ? "amd" : "nvidia");
  e.api = api;
  e.kind = kind;
  e.op = op;
  e.dur_ns = dur_ns;
  e.ret = ret;
  e.has_ret = true;
  e.pid = pid;
  e.tid = pid + 1;
  e.set_comm("train.py");
  return e;
}

void feed(Metrics& m) {
  using K = hal::EventKind;
  for (int i = 0; i < 5; ++i)
    m.observe(call("cuda_runtime", K::kLaunch, "cudaLaunchKernel", 4'000 + 1'000 * i));
  auto sync = call("cuda_runtime", K::kSync, "cudaStreamSynchronize", 2'345'678);
  sync.off_cpu_ns = 1'234'567;
  sync.preempts = 2;
  m.observe(sync);
  m.observe(call("hip", K::kMemcpy, "hipMemcpy", 30'001, 101));
  m.observe(call("hip", K::kMemcpy, "hipMemcpy", 70'003, 101));
  auto ar = call("nccl", K::kCollective, "ncclAllReduce", 50'000);
  ar.set(hal::Field::kBytes, 4096);
  m.observe(ar);
  hal::Event io;
  io.kind = K::kBlockIo;
  io.op = "read";
  io.dur_ns = 3'000'000;
  m.observe(io);
  EXPECT_TRUE(m.on_chains(test::chains_of({{"HIGH", 1}, {"LOW", 3}}), 0));
  EXPECT_TRUE(m.on_steps({{0.25, 0.5}, {0.125, 0.75}}));
  hal::SessionCounters lost;
  lost.call_drops = 7;
  EXPECT_TRUE(m.on_agent_stats(test::agent_stats(123, 45.5, lost, 2, {{"cuda", 40}}, 1 << 20)));
}

std::map<std::string, std::string> attrs(
    const google::protobuf::RepeatedPtrField<pc::KeyValue>& kv) {
  std::map<std::string, std::string> m;
  for (const auto& a : kv) m[a.key()] = a.value().string_value();
  return m;
}

const pm::Metric* find_metric(const pm::ScopeMetrics& sm, const std::string& name) {
  for (const auto& m : sm.metrics())
    if (m.name() == name) return &m;
  return nullptr;
}

TEST(OtlpExport, EveryPrometheusSeriesWithTheSameNamesLabelsAndValues) {
  Metrics m(false);
  feed(m);
  test::OtlpReceiver rx;
  Exporter e(config_for(rx.url()), fast_options(), m.registry());
  ASSERT_TRUE(rx.wait_for([&] { return !rx.metrics().empty(); }, 20s));
  // Nothing changes the registry after feed(): this is /metrics "in the same second".
  const std::string text = m.exposition();
  e.finish(Clock::now() + 5s);
  auto req = rx.metrics().front();
  ASSERT_EQ(req.resource_metrics_size(), 1);
  const auto& rm = req.resource_metrics(0);
  EXPECT_EQ(
      attrs(rm.resource().attributes()),
      (std::map<std::string, std::string>{{"service.name", "ingero"}, {"host.name", "gpu-07"}}));
  ASSERT_EQ(rm.scope_metrics_size(), 1);
  const auto& sm = rm.scope_metrics(0);
  EXPECT_EQ(sm.scope().name(), "ingero");
  auto want = test::exposition_series(text), got = test::otlp_series(sm);
  EXPECT_GT(want.size(), 100u);
  EXPECT_EQ(test::series_diff(got, want), "");
  // A few by hand: what a collector sees.
  const pm::Metric* calls = find_metric(sm, "ingero_gpu_api_calls_total");
  ASSERT_TRUE(calls && calls->has_sum());
  EXPECT_TRUE(calls->sum().is_monotonic());
  EXPECT_EQ(calls->sum().aggregation_temporality(), pm::AGGREGATION_TEMPORALITY_CUMULATIVE);
  EXPECT_EQ(calls->description(), "Traced GPU API calls");
  EXPECT_EQ(calls->unit(), "");
  EXPECT_EQ(calls->sum().data_points(0).start_time_unix_nano(), 1'700'000'000'000'000'000u);
  const pm::Metric* dur = find_metric(sm, "ingero_gpu_api_call_duration_seconds");
  ASSERT_TRUE(dur && dur->has_histogram());
  EXPECT_EQ(dur->unit(), "s");
  EXPECT_EQ(dur->histogram().data_points(0).explicit_bounds_size(), 22);
  EXPECT_EQ(dur->histogram().data_points(0).bucket_counts_size(), 23);
  EXPECT_EQ(find_metric(sm, "ingero_db_bytes")->unit(), "By");
  EXPECT_TRUE(find_metric(sm, "ingero_db_bytes")->has_gauge());
  EXPECT_EQ(find_metric(sm, "ingero_step_gpu_idle_ratio")->unit(), "1");
  EXPECT_EQ(find_metric(sm, "ingero_gpu_api_off_cpu_seconds_total")->unit(), "s");
  auto s = e.stats();
  const auto& ms = s.delivery.of(Signal::kMetrics);
  EXPECT_EQ(ms.queued, ms.sent + ms.dropped);
  EXPECT_EQ(ms.dropped, 0u);
  EXPECT_EQ(ms.requests, rx.metrics().size());
  EXPECT_EQ(s.metric_exports, rx.metrics().size());  // the last one at finish() included
  EXPECT_EQ(rx.undecodable(), 0u);
}

engine::Chain chain(const std::string& rule, engine::Severity sev, uint32_t pid,
                    const std::string& op) {
  engine::Chain c = engine::new_chain(rule, "nvidia", "cuda_runtime", op, {pid, pid + 1},
                                      1'700'000'000'000'000'000, 1'700'000'005'000'000'000);
  c.id = rule + ":" + std::to_string(pid) + ":" + op;
  c.severity = sev;
  c.summary = op + " p99 is 12x p50 in train.py (pid " + std::to_string(pid) + ")";
  c.root_cause = "CPU contention";
  c.explanation = "The thread was preempted for 41% of the slow calls' time.";
  c.fixes = {"pin the training process", "move the noisy job"};
  c.timeline = {{"CUDA", op, "p99=5.1ms p50=410us", 5'100},
                {"HOST", "sched_switch", "preempted 1,203 times", 0}};
  c.p50_ns = 410'000;
  c.p99_ns = 5'100'000;
  c.tail_ratio = 12.4;
  engine::ChainStack cs;
  cs.frames = {"[Python] train.py:41 in step()", "[Python] train.py:90 in main()"};
  c.stacks = {cs};
  return c;
}

std::vector<pl::LogRecord> all_records(const test::OtlpReceiver& rx) {
  std::vector<pl::LogRecord> out;
  for (const auto& r : rx.logs())
    for (const auto& rl : r.resource_logs())
      for (const auto& sl : rl.scope_logs())
        for (const auto& lr : sl.log_records()) out.push_back(lr);
  return out;
}

std::map<std::string, pc::AnyValue> attr_values(const pl::LogRecord& r) {
  std::map<std::string, pc::AnyValue> m;
  for (const auto& a : r.attributes()) m[a.key()] = a.value();
  return m;
}

// The session's clock: its events' CLOCK_MONOTONIC plus the offset measured at its start. Here
// the wall clock was stepped an hour forward since: the points stay on the session's clock,
// with its spans and records, not the wall's.
TEST(OtlpExport, MetricPointsAreStampedOnTheSessionsClock) {
  Metrics m(false);
  feed(m);
  test::OtlpReceiver rx;
  auto ns = [](auto t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  auto o = fast_options();
  o.mono_to_wall_ns = ns(std::chrono::system_clock::now()) - ns(Clock::now()) - 3'600'000'000'000LL;
  int64_t lo = ns(Clock::now()) + o.mono_to_wall_ns;
  Exporter e(config_for(rx.url()), o, m.registry());
  ASSERT_TRUE(rx.wait_for([&] { return !rx.metrics().empty(); }, 20s));
  int64_t hi = ns(Clock::now()) + o.mono_to_wall_ns;
  e.finish(Clock::now() + 5s);
  auto reqs = rx.metrics();
  const auto& sm = reqs.front().resource_metrics(0).scope_metrics(0);
  const pm::Metric* calls = find_metric(sm, "ingero_gpu_api_calls_total");
  ASSERT_TRUE(calls && calls->has_sum());
  int64_t t = int64_t(calls->sum().data_points(0).time_unix_nano());
  EXPECT_GE(t, lo);
  EXPECT_LE(t, hi);
  const pm::Metric* dur = find_metric(sm, "ingero_gpu_api_call_duration_seconds");
  ASSERT_TRUE(dur && dur->has_histogram());
  EXPECT_EQ(int64_t(dur->histogram().data_points(0).time_unix_nano()), t);
}

TEST(OtlpExport, ChainsBecomeLogRecordsOnceEachUntilTheyChange) {
  test::OtlpReceiver rx;
  Exporter e(config_for(rx.url()), fast_options(), nullptr);
  std::vector<engine::Chain> first = {
      chain("cpu_contention", engine::Severity::kHigh, 4242, "cudaStreamSynchronize"),
      chain("repeated_sync", engine::Severity::kMedium, 4242, "cudaMemcpy"),
      chain("tail_latency", engine::Severity::kLow, 7, "cudaLaunchKernel")};
  const int64_t t0 = 1'700'000'010'000'000'000;
  EXPECT_TRUE(e.on_chains(first, t0));
  EXPECT_TRUE(e.on_chains(first, t0 + 30'000'000'000));  // found again 30 s later: not news
  std::vector<engine::Chain> second = first;
  second[2].severity = engine::Severity::kMedium;  // a change of severity is
  EXPECT_TRUE(e.on_chains(second, t0 + 60'000'000'000));
  EXPECT_TRUE(
      e.on_chains(second, t0 + 60'000'000'000 + ChainTracker::kForgetNs));  // gone 10 min: again
  e.finish(Clock::now() + 5s);
  auto recs = all_records(rx);
  ASSERT_EQ(recs.size(), 3u + 1u + 3u);
  const pl::LogRecord& r = recs[0];
  EXPECT_EQ(r.severity_number(), pl::SEVERITY_NUMBER_ERROR);
  EXPECT_EQ(r.severity_text(), "HIGH");
  EXPECT_EQ(r.body().string_value(), "cudaStreamSynchronize p99 is 12x p50 in train.py (pid 4242)");
  EXPECT_EQ(r.event_name(), "ingero.causal_chain");
  EXPECT_EQ(r.time_unix_nano(), uint64_t(t0));
  auto a = attr_values(r);
  EXPECT_EQ(a["ingero.chain.rule"].string_value(), "cpu_contention");
  EXPECT_EQ(a["ingero.chain.id"].string_value(), "cpu_contention:4242:cudaStreamSynchronize");
  EXPECT_EQ(a["ingero.chain.op"].string_value(), "cudaStreamSynchronize");
  EXPECT_EQ(a["process.pid"].int_value(), 4242);
  ASSERT_EQ(a["ingero.chain.pids"].array_value().values_size(), 2);
  EXPECT_EQ(a["ingero.chain.pids"].array_value().values(1).int_value(), 4243);
  EXPECT_EQ(a["ingero.node"].string_value(), "gpu-07");
  EXPECT_EQ(a["ingero.chain.root_cause"].string_value(), "CPU contention");
  ASSERT_EQ(a["ingero.chain.evidence"].array_value().values_size(), 2);
  EXPECT_EQ(a["ingero.chain.evidence"].array_value().values(0).string_value(),
            "CUDA cudaStreamSynchronize: p99=5.1ms p50=410us");
  EXPECT_EQ(a["ingero.chain.evidence"].array_value().values(1).string_value(),
            "HOST sched_switch: preempted 1,203 times");
  EXPECT_EQ(a["ingero.chain.fixes"].array_value().values(1).string_value(), "move the noisy job");
  EXPECT_EQ(a["ingero.chain.stack"].array_value().values(0).string_value(),
            "[Python] train.py:41 in step()");
  EXPECT_EQ(a["ingero.chain.p99_ns"].int_value(), 5'100'000);
  EXPECT_EQ(a["ingero.chain.window_end_ns"].int_value(), 1'700'000'005'000'000'000);
  EXPECT_DOUBLE_EQ(a["ingero.chain.tail_ratio"].double_value(), 12.4);
  EXPECT_EQ(recs[1].severity_number(), pl::SEVERITY_NUMBER_WARN);
  EXPECT_EQ(recs[2].severity_number(), pl::SEVERITY_NUMBER_INFO);
  EXPECT_EQ(recs[3].severity_text(), "MEDIUM");
  EXPECT_EQ(attr_values(recs[3])["ingero.chain.rule"].string_value(), "tail_latency");
  auto s = e.stats();
  EXPECT_EQ(s.chain_records, 7u);
  EXPECT_EQ(s.delivery.of(Signal::kLogs).sent, 7u);
  EXPECT_EQ(s.delivery.of(Signal::kLogs).dropped, 0u);
}

TEST(OtlpExport, AReceiverAnswering503ThenOkLosesNothing) {
  test::OtlpReceiverOptions ro;
  ro.statuses = {503, 503, 429, 503};
  test::OtlpReceiver rx(ro);
  Metrics m(false);
  feed(m);
  Exporter e(config_for(rx.url()), fast_options(), m.registry());
  std::vector<engine::Chain> chains;
  for (uint32_t i = 0; i < 6; ++i)
    chains.push_back(chain("tail_latency", engine::Severity::kLow, 100 + i, "cudaMalloc"));
  EXPECT_TRUE(e.on_chains(chains, 1'700'000'010'000'000'000));
  ASSERT_TRUE(
      rx.wait_for([&] { return all_records(rx).size() == 6 && rx.metrics().size() >= 2; }, 30s));
  e.finish(Clock::now() + 10s);
  auto s = e.stats();
  for (Signal sig : {Signal::kMetrics, Signal::kLogs}) {
    const auto& x = s.delivery.of(sig);
    EXPECT_EQ(x.dropped, 0u) << signal_name(sig);
    EXPECT_EQ(x.sent, x.queued) << signal_name(sig);
  }
  // Every record arrived once: refused requests were sent again, accepted ones never.
  auto recs = all_records(rx);
  std::set<int64_t> pids;
  for (const auto& r : recs) pids.insert(attr_values(r)["process.pid"].int_value());
  EXPECT_EQ(recs.size(), 6u);
  EXPECT_EQ(pids.size(), 6u);
  EXPECT_EQ(s.delivery.failures, 4u);
  EXPECT_EQ(s.delivery.attempts, rx.requests());
  EXPECT_EQ(s.delivery.attempts, s.delivery.failures + s.delivery.of(Signal::kMetrics).requests +
                                     s.delivery.of(Signal::kLogs).requests);
  EXPECT_NE(s.delivery.last_error.find("HTTP 503"), std::string::npos) << s.delivery.last_error;
}

TEST(OtlpExport, RetryAfterIsWaitedFor) {
  test::OtlpReceiverOptions ro;
  ro.statuses = {503};
  ro.retry_after = 1;
  test::OtlpReceiver rx(ro);
  Exporter e(config_for(rx.url()), fast_options(), nullptr);
  EXPECT_TRUE(e.on_chains({chain("tail_latency", engine::Severity::kLow, 1, "cudaFree")}, 1));
  ASSERT_TRUE(rx.wait_for([&] { return all_records(rx).size() == 1; }, 20s));
  auto at = rx.arrivals();
  ASSERT_EQ(at.size(), 2u);
  EXPECT_GE(at[1] - at[0], 1s);  // the server's Retry-After, over the 20 ms backoff
  e.finish(Clock::now() + 5s);
}

TEST(OtlpExport, AReceiverThatNeverAnswersHoldsNothingAndEveryDropIsCounted) {
  test::SilentReceiver rx;
  Metrics m(false);
  feed(m);
  auto o = fast_options();
  Exporter e(config_for(rx.url(), {{"OTEL_EXPORTER_OTLP_TIMEOUT", "300"}}), o, m.registry());
  // The tracer's side returns at once whatever the network does.
  auto t0 = Clock::now();
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(
        e.on_chains({chain("tail_latency", engine::Severity::kLow, uint32_t(i), "cudaFree")}, i));
  }
  EXPECT_LT(Clock::now() - t0, 5s);
  std::this_thread::sleep_for(700ms);
  auto f0 = Clock::now();
  e.finish(f0 + 1s);
  EXPECT_LT(Clock::now() - f0, 1s + 3s);  // the deadline, and libcurl's once-a-second check
  auto s = e.stats();
  EXPECT_GE(rx.connections(), 1u);
  for (Signal sig : {Signal::kMetrics, Signal::kLogs}) {
    const auto& x = s.delivery.of(sig);
    EXPECT_EQ(x.sent, 0u) << signal_name(sig);
    EXPECT_GT(x.queued, 0u) << signal_name(sig);
    EXPECT_EQ(x.dropped, x.queued) << signal_name(sig);
    EXPECT_EQ(x.dropped, x.queue_full + x.rejected + x.expired + x.at_exit) << signal_name(sig);
  }
  EXPECT_EQ(s.delivery.of(Signal::kLogs).queued, 1000u);
  EXPECT_GT(s.delivery.failures, 0u);
  EXPECT_NE(s.delivery.last_error.find("no answer within 300 ms"), std::string::npos)
      << s.delivery.last_error;
}

TEST(OtlpDelivery, AFullQueueDropsTheOldestRequests) {
  test::SilentReceiver rx;
  DeliveryOptions o;
  o.max_queue_requests = 2;
  Delivery d(config_for(rx.url(), {{"OTEL_EXPORTER_OTLP_TIMEOUT", "60000"}}), o);
  d.enqueue(Signal::kLogs, "a", 1);
  for (int i = 0; i < 500 && rx.connections() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(rx.connections(), 1u);  // the first request is in flight, out of the queue
  for (int i = 0; i < 9; ++i) d.enqueue(Signal::kLogs, "b", 10);
  auto s = d.stats().of(Signal::kLogs);
  EXPECT_EQ(s.queue_full, 70u);  // 9 queued behind it, 2 kept
  d.finish(Clock::now());
  s = d.stats().of(Signal::kLogs);
  EXPECT_EQ(s.queued, 91u);
  EXPECT_EQ(s.at_exit, 21u);  // the one in flight (cut) and the two kept
  EXPECT_EQ(s.dropped, 91u);
  EXPECT_EQ(s.sent, 0u);
}

TEST(OtlpDelivery, ARefusedRequestIsNotRetriedAndAPartialSuccessCountsItsRejections) {
  test::OtlpReceiverOptions ro;
  ro.statuses = {400};
  test::OtlpReceiver refusing(ro);
  {
    Delivery d(config_for(refusing.url()));
    d.enqueue(Signal::kTraces, "", 5);
    ASSERT_TRUE(refusing.wait_for([&] { return refusing.requests() == 1; }, 10s));
    d.finish(Clock::now() + 5s);
    auto s = d.stats();
    EXPECT_EQ(s.of(Signal::kTraces).rejected, 5u);
    EXPECT_EQ(s.of(Signal::kTraces).dropped, 5u);
    EXPECT_EQ(s.attempts, 1u);
    EXPECT_EQ(s.retries, 0u);
    EXPECT_EQ(s.last_error, "traces: HTTP 400");
  }
  test::OtlpReceiverOptions po;
  po.partial_reject = 2;
  test::OtlpReceiver partial(po);
  Delivery d(config_for(partial.url()));
  d.enqueue(Signal::kLogs, "", 5);
  d.enqueue(Signal::kLogs, "", 4);
  d.finish(Clock::now() + 10s);
  auto s = d.stats().of(Signal::kLogs);
  EXPECT_EQ(s.sent, 7u);
  EXPECT_EQ(s.rejected, 2u);
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.requests, 2u);
}

// A self-signed certificate for 127.0.0.1 in `dir`.
void make_cert(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::string err;
  ASSERT_EQ(
      test::run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                         "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem"},
                        nullptr, &err),
      0)
      << err;
}

TEST(OtlpExport, TlsWithTheCaFromTheEnvironmentHeadersAndGzip) {
  std::string dir = test::temp_path("tls");
  make_cert(dir);
  test::OtlpReceiverOptions ro;
  ro.tls_cert = dir + "/cert.pem";
  ro.tls_key = dir + "/key.pem";
  test::OtlpReceiver rx(ro);
  ASSERT_EQ(rx.url().rfind("https://127.0.0.1:", 0), 0u) << rx.url();
  Metrics m(false);
  feed(m);
  {
    Exporter e(config_for(rx.url(), {{"OTEL_EXPORTER_OTLP_CERTIFICATE", dir + "/cert.pem"},
                                     {"OTEL_EXPORTER_OTLP_HEADERS", "x-scope-orgid=team%20a"},
                                     {"INGERO_OTLP_HEADERS", "Authorization=Bearer%20s3cr%3Dt"},
                                     {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"}}),
               fast_options(), m.registry());
    ASSERT_TRUE(rx.wait_for([&] { return !rx.metrics().empty(); }, 20s));
    e.finish(Clock::now() + 5s);
    EXPECT_EQ(e.stats().delivery.of(Signal::kMetrics).dropped, 0u);
  }
  EXPECT_EQ(rx.header("Authorization").front(), "Bearer s3cr=t");
  EXPECT_EQ(rx.header("X-Scope-OrgID").front(), "team a");
  EXPECT_EQ(rx.header("Content-Encoding").front(), "gzip");
  EXPECT_EQ(rx.header("Content-Type").front(), "application/x-protobuf");
  EXPECT_EQ(rx.undecodable(), 0u);
  EXPECT_EQ(test::series_diff(
                test::otlp_series(rx.metrics().front().resource_metrics(0).scope_metrics(0)),
                test::exposition_series(m.exposition())),
            "");
  // Without the CA the certificate does not verify: nothing is sent, everything is counted.
  size_t before = rx.metrics().size();
  Exporter e(config_for(rx.url()), fast_options(), m.registry());
  std::this_thread::sleep_for(400ms);
  e.finish(Clock::now() + 1s);
  auto s = e.stats();
  EXPECT_EQ(rx.metrics().size(), before);
  EXPECT_EQ(s.delivery.of(Signal::kMetrics).sent, 0u);
  EXPECT_EQ(s.delivery.of(Signal::kMetrics).dropped, s.delivery.of(Signal::kMetrics).queued);
  EXPECT_NE(s.delivery.last_error.find("certificate"), std::string::npos) << s.delivery.last_error;
}

TEST(OtlpExport, SlowCallsAndCollectivesBecomeSpansBoundedPerSecond) {
  test::OtlpReceiver rx;
  auto o = fast_options();
  o.spans = true;
  o.span_threshold_ns = 1'000'000;
  o.spans_per_second = 4;
  o.mono_to_wall_ns = 1'700'000'000'000'000'000;
  Exporter e(config_for(rx.url()), o, nullptr);
  hal::StackFrame py;
  py.python = true;
  py.function = "step";
  py.file = "train.py";
  py.line = 41;
  hal::StackFrame native;
  native.module = "/usr/lib/libtorch.so";
  native.module_offset = 0x1a2b;
  native.function = "at::sync";
  ASSERT_TRUE(e.on_stack(0x77, {native, py}));
  using K = hal::EventKind;
  uint64_t sec = 5'000'000'000;
  auto slow = call("cuda_runtime", K::kSync, "cudaStreamSynchronize", 2'000'000, 0, 4242);
  slow.ts_ns = sec;
  slow.stack_id = 0x77;
  slow.off_cpu_ns = 500'000;
  ASSERT_TRUE(e.on_event(slow));
  auto fast = call("cuda_runtime", K::kLaunch, "cudaLaunchKernel", 999'999);
  fast.ts_ns = sec + 1;
  ASSERT_TRUE(e.on_event(fast));  // under the threshold: no span
  auto ar = call("nccl", K::kCollective, "ncclAllReduce", 20'000, 0, 4242);
  ar.ts_ns = sec + 2;
  ar.set(hal::Field::kCount, 1024);
  ar.set(hal::Field::kRank, 3);
  ar.set(hal::Field::kNranks, 8);
  ar.set(hal::Field::kCommHash, 0xabcdef);
  ASSERT_TRUE(e.on_event(ar));  // a collective, however fast
  auto failed = call("cuda_runtime", K::kMemcpy, "cudaMemcpy", 5'000'000, 700);
  for (int i = 0; i < 5; ++i) {  // two left of this second's four: three over the rate
    failed.ts_ns = sec + 10 + uint64_t(i);
    ASSERT_TRUE(e.on_event(failed));
  }
  failed.ts_ns = 2 * sec;  // the next second
  ASSERT_TRUE(e.on_event(failed));
  hal::Event host;
  host.kind = K::kBlockIo;
  host.dur_ns = 50'000'000;
  ASSERT_TRUE(e.on_event(host));  // host events never
  e.finish(Clock::now() + 5s);
  std::vector<pt::Span> spans;
  for (const auto& r : rx.traces())
    for (const auto& rs : r.resource_spans())
      for (const auto& ss : rs.scope_spans())
        for (const auto& sp : ss.spans()) spans.push_back(sp);
  ASSERT_EQ(spans.size(), 5u);
  auto s = e.stats();
  EXPECT_EQ(s.spans_over_rate, 3u);
  EXPECT_EQ(s.delivery.of(Signal::kTraces).sent, 5u);
  const pt::Span& a = spans[0];
  EXPECT_EQ(a.name(), "cudaStreamSynchronize");
  EXPECT_EQ(a.trace_id().size(), 16u);
  EXPECT_EQ(a.span_id().size(), 8u);
  EXPECT_EQ(a.kind(), pt::Span::SPAN_KIND_INTERNAL);
  EXPECT_EQ(a.start_time_unix_nano(), 1'700'000'005'000'000'000u);
  EXPECT_EQ(a.end_time_unix_nano(), 1'700'000'005'002'000'000u);
  EXPECT_EQ(a.status().code(), pt::Status::STATUS_CODE_UNSET);
  std::map<std::string, pc::AnyValue> at;
  for (const auto& kv : a.attributes()) at[kv.key()] = kv.value();
  EXPECT_EQ(at["process.pid"].int_value(), 4242);
  EXPECT_EQ(at["thread.id"].int_value(), 4243);
  EXPECT_EQ(at["process.executable.name"].string_value(), "train.py");
  EXPECT_EQ(at["ingero.kind"].string_value(), "sync");
  EXPECT_EQ(at["ingero.off_cpu_ns"].int_value(), 500'000);
  EXPECT_EQ(at["code.stacktrace"].string_value(),
            "at::sync (/usr/lib/libtorch.so+0x1a2b)\n[Python] train.py:41 in step()");
  at.clear();
  for (const auto& kv : spans[1].attributes()) at[kv.key()] = kv.value();
  EXPECT_EQ(spans[1].name(), "ncclAllReduce");
  EXPECT_EQ(at["ingero.collective.rank"].int_value(), 3);
  EXPECT_EQ(at["ingero.collective.nranks"].int_value(), 8);
  EXPECT_EQ(at["ingero.collective.comm_hash"].string_value(), "0000000000abcdef");
  EXPECT_EQ(spans[2].status().code(), pt::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(spans[2].status().message(), "returned 700");
  EXPECT_EQ(spans[4].start_time_unix_nano(), 1'700'000'010'000'000'000u);
}

// The wire format checked by protoc, with our definitions (--decode) and with none at all
// (--decode_raw: the field numbers themselves).
TEST(OtlpWire, ProtocDecodesARequest) {
  if (access(INGERO_PROTOC, X_OK) != 0) {
    if (test::running_in_ci()) FAIL() << "CI=true but protoc is missing: " INGERO_PROTOC;
    GTEST_SKIP() << "*** SKIPPED: no protoc at '" INGERO_PROTOC "' (protobuf-compiler) ***";
  }
  Metrics m(false);
  m.observe(call("cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel", 4'000));
  test::OtlpReceiver rx;
  Exporter e(config_for(rx.url()), fast_options(), m.registry());
  ASSERT_TRUE(rx.wait_for([&] { return !rx.raw_metrics().empty(); }, 20s));
  e.finish(Clock::now() + 5s);
  std::string body = test::temp_path("metrics.pb");
  std::ofstream(body, std::ios::binary) << rx.raw_metrics().front();
  std::string root = INGERO_OTLP_PROTO_ROOT, out, err;
  ASSERT_EQ(test::run_command(
                {"/bin/sh", "-c",
                 std::string(INGERO_PROTOC) +
                     " --decode=opentelemetry.proto.collector.metrics.v1."
                     "ExportMetricsServiceRequest -I " +
                     root + " " + root +
                     "/opentelemetry/proto/collector/metrics/v1/metrics_service.proto < " + body},
                &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("key: \"service.name\"\n      value {\n        string_value: \"ingero\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("name: \"ingero_gpu_api_calls_total\"\n      description: \"Traced GPU API "
                     "calls\"\n      sum {\n        data_points {\n          start_time_unix_nano: "
                     "1700000000000000000\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("aggregation_temporality: AGGREGATION_TEMPORALITY_CUMULATIVE\n        "
                     "is_monotonic: true"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("as_double: 1\n"), std::string::npos) << out;
  ASSERT_EQ(
      test::run_command({"/bin/sh", "-c", std::string(INGERO_PROTOC) + " --decode_raw < " + body},
                        &out, &err),
      0)
      << err;
  // ExportMetricsServiceRequest.resource_metrics = 1 > ResourceMetrics.resource = 1 >
  // Resource.attributes = 1 > KeyValue.key = 1; then ResourceMetrics.scope_metrics = 2 >
  // ScopeMetrics.scope = 1 > InstrumentationScope.name = 1.
  EXPECT_EQ(out.rfind("1 {\n  1 {\n    1 {\n      1: \"service.name\"\n      2 {\n        1: "
                      "\"ingero\"\n      }\n    }\n",
                      0),
            0u)
      << out;
  EXPECT_NE(out.find("  2 {\n    1 {\n      1: \"ingero\"\n"), std::string::npos) << out;
  // Metric.name = 1 and Metric.sum = 7 > Sum.data_points = 1 > NumberDataPoint.as_double = 4
  // (fixed64 0x3ff0000000000000: 1.0), Sum.aggregation_temporality = 2, is_monotonic = 3.
  EXPECT_NE(out.find("1: \"ingero_gpu_api_calls_total\""), std::string::npos) << out;
  EXPECT_NE(out.find("4: 0x3ff0000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("\n        2: 2\n        3: 1\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace ingero::serve::otlp

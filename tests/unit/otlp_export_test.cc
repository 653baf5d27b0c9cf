// The OTLP exporter against a loopback receiver that decodes every request with the same
// .proto definitions: the Prometheus registry's series with exact values, on the session's
// clock, causal chains as log records, slow calls as spans, and one request decoded by protoc,
// a tool the project did not write. Delivery and TLS: otlp_delivery_test.cc.
#include <gtest/gtest.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "app/builtin_backends.h"
#include "serve/metrics/metrics.h"
#include "serve/otlp/exporter.h"
#include "test_paths.h"
#include "tests/support/otlp_receiver.h"
#include "tests/support/otlp_series.h"
#include "tests/support/sink_inputs.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/otlp_fixture.h"

namespace ingero::serve::otlp {
namespace {

using namespace fixture;

TEST(OtlpExport, EveryPrometheusSeriesWithTheSameNamesLabelsAndValues) {
  Metrics m(false);
  feed(m);
  test::OtlpReceiver rx;
  Exporter e(config_for(rx.url()), fast_options(), m.collectable());
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
  Exporter e(config_for(rx.url()), o, m.collectable());
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

// Every span the receiver decoded, in arrival order.
std::vector<pt::Span> all_spans(const test::OtlpReceiver& rx) {
  std::vector<pt::Span> spans;
  for (const auto& r : rx.traces())
    for (const auto& rs : r.resource_spans())
      for (const auto& ss : rs.scope_spans())
        for (const auto& sp : ss.spans()) spans.push_back(sp);
  return spans;
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
  std::vector<pt::Span> spans = all_spans(rx);
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

// With the backends' names, a failed call's span says which error; a call in progress is no
// error at all.
TEST(OtlpExport, AFailedCallsSpanNamesItsCode) {
  test::OtlpReceiver rx;
  auto o = fast_options();
  o.spans = true;
  o.span_threshold_ns = 1'000'000;
  o.error_codes = app::builtin_error_codes();
  Exporter e(config_for(rx.url()), o, nullptr);
  using K = hal::EventKind;
  auto fault = call("cuda_runtime", K::kSync, "cudaStreamSynchronize", 2'000'000, 700);
  ASSERT_TRUE(e.on_event(fault));
  auto odd = call("cuda_runtime", K::kSync, "cudaStreamSynchronize", 2'000'000, 4242);
  odd.ts_ns += 1;
  ASSERT_TRUE(e.on_event(odd));
  auto busy = call("nccl", K::kCollective, "ncclAllReduce", 20'000, 7);
  busy.ts_ns += 2;
  ASSERT_TRUE(e.on_event(busy));
  e.finish(Clock::now() + 5s);
  std::vector<pt::Span> spans = all_spans(rx);
  ASSERT_EQ(spans.size(), 3u);
  auto error_type = [](const pt::Span& sp) {
    for (const auto& kv : sp.attributes())
      if (kv.key() == "error.type") return kv.value().string_value();
    return std::string("(none)");
  };
  EXPECT_EQ(spans[0].status().code(), pt::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(spans[0].status().message(), "returned cudaErrorIllegalAddress (700)");
  EXPECT_EQ(error_type(spans[0]), "cudaErrorIllegalAddress");
  EXPECT_EQ(spans[1].status().message(), "returned 4242");
  EXPECT_EQ(error_type(spans[1]), "4242");
  EXPECT_EQ(spans[2].status().code(), pt::Status::STATUS_CODE_UNSET);
  EXPECT_EQ(error_type(spans[2]), "(none)");
}

// A process may name itself, and its code, any bytes: a span's strings are UTF-8 all the same,
// or a collector that checks proto3 strings rejects the whole request.
TEST(OtlpExport, NamesThatAreNotUtf8ReachTheCollectorAsUtf8) {
  test::OtlpReceiver rx;
  auto o = fast_options();
  o.spans = true;
  o.span_threshold_ns = 1'000'000;
  Exporter e(config_for(rx.url()), o, nullptr);
  hal::StackFrame py;
  py.python = true;
  py.function = "caf\xE9";
  py.file = "train.py";
  py.line = 41;
  ASSERT_TRUE(e.on_stack(0x77, {py}));
  auto slow =
      call("cuda_runtime", hal::EventKind::kSync, "cudaStreamSynchronize", 2'000'000, 0, 4242);
  slow.set_comm(
      "\xFF\xFE"
      "bad");
  slow.stack_id = 0x77;
  ASSERT_TRUE(e.on_event(slow));
  e.finish(Clock::now() + 5s);
  std::vector<pt::Span> spans = all_spans(rx);
  ASSERT_EQ(spans.size(), 1u);
  std::map<std::string, pc::AnyValue> at;
  for (const auto& kv : spans[0].attributes()) at[kv.key()] = kv.value();
  EXPECT_EQ(at["process.executable.name"].string_value(),
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "bad");
  EXPECT_EQ(at["code.stacktrace"].string_value(), "[Python] train.py:41 in caf\xEF\xBF\xBD()");
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
  Exporter e(config_for(rx.url()), fast_options(), m.collectable());
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

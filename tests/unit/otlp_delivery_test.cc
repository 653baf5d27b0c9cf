// The OTLP exporter's delivery against a loopback receiver: through 503s and a Retry-After, a
// receiver that never answers, a full queue, refused and partially accepted requests; TLS with
// the CA from the environment, headers and gzip.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/otlp_series.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/otlp_fixture.h"

namespace ingero::serve::otlp {
namespace {

using namespace fixture;

TEST(OtlpExport, AReceiverAnswering503ThenOkLosesNothing) {
  test::OtlpReceiverOptions ro;
  ro.statuses = {503, 502, 429, 504};  // every status metrics.md says is retried
  test::OtlpReceiver rx(ro);
  Metrics m(false);
  feed(m);
  Exporter e(config_for(rx.url()), fast_options(), m.collectable());
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
  EXPECT_NE(s.delivery.last_error.find("HTTP 504"), std::string::npos) << s.delivery.last_error;
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
  Exporter e(config_for(rx.url(), {{"OTEL_EXPORTER_OTLP_TIMEOUT", "300"}}), o, m.collectable());
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

// metrics.md: a request still failing max_elapsed after its first try is dropped as expired
// (5 minutes by default; 300 ms here). The receiver answers 503 to everything: the request is
// tried, backed off and retried until then, and its items are counted expired, nothing else.
TEST(OtlpDelivery, ARequestStillFailingAfterMaxElapsedIsDroppedAsExpired) {
  test::OtlpReceiverOptions ro;
  ro.statuses = std::vector<int>(10'000, 503);
  test::OtlpReceiver rx(ro);
  DeliveryOptions o;
  o.initial_backoff = 20ms;
  o.max_backoff = 50ms;
  o.max_elapsed = 300ms;
  EXPECT_EQ(DeliveryOptions{}.max_elapsed, std::chrono::minutes(5));
  Delivery d(config_for(rx.url()), o);
  auto t0 = Clock::now();
  d.enqueue(Signal::kLogs, "a", 5);
  for (int i = 0; i < 1000 && d.stats().of(Signal::kLogs).dropped == 0; ++i)
    std::this_thread::sleep_for(10ms);
  auto took = Clock::now() - t0;
  auto s = d.stats();
  const auto& x = s.of(Signal::kLogs);
  EXPECT_EQ(x.queued, 5u);
  EXPECT_EQ(x.expired, 5u);
  EXPECT_EQ(x.dropped, 5u);
  EXPECT_EQ(x.sent + x.rejected + x.queue_full + x.at_exit, 0u);
  EXPECT_GE(took, 300ms);
  EXPECT_GE(s.failures, 3u);  // the first try and its retries, every one refused
  EXPECT_EQ(s.failures, rx.requests());
  d.finish(Clock::now());
  EXPECT_EQ(d.stats().of(Signal::kLogs).at_exit, 0u);  // nothing was left to cut
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

// metrics.md: at most 16,384 records wait per signal, and requests carry at most 512. 20,000
// new chains at once: 16,384 wait (3,616 dropped as buffer_full, counted in the logs' dropped),
// and reach the receiver in 32 requests of 512, each record once.
TEST(OtlpExport, RecordsWaitUpTo16384AndGoInRequestsOf512) {
  test::OtlpReceiver rx;
  Exporter e(config_for(rx.url()), fast_options(), nullptr);
  std::vector<engine::Chain> chains;
  for (uint32_t i = 0; i < 20'000; ++i)
    chains.push_back(chain("tail_latency", engine::Severity::kLow, 10 + 2 * i, "cudaFree"));
  EXPECT_TRUE(e.on_chains(chains, 1'700'000'010'000'000'000));
  ASSERT_TRUE(rx.wait_for([&] { return all_records(rx).size() >= 16'384; }, 60s));
  e.finish(Clock::now() + 10s);
  auto s = e.stats();
  EXPECT_EQ(s.chain_records, 16'384u);
  EXPECT_EQ(s.buffer_full, 3'616u);
  const auto& logs = s.delivery.of(Signal::kLogs);
  EXPECT_EQ(logs.sent, 16'384u);
  EXPECT_EQ(logs.dropped, 3'616u);
  std::vector<size_t> sizes;
  for (const auto& r : rx.logs())
    for (const auto& rl : r.resource_logs())
      for (const auto& sl : rl.scope_logs()) sizes.push_back(size_t(sl.log_records_size()));
  EXPECT_EQ(sizes, std::vector<size_t>(32, 512));
  EXPECT_EQ(all_records(rx).size(), 16'384u);
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
               fast_options(), m.collectable());
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
  Exporter e(config_for(rx.url()), fast_options(), m.collectable());
  std::this_thread::sleep_for(400ms);
  e.finish(Clock::now() + 1s);
  auto s = e.stats();
  EXPECT_EQ(rx.metrics().size(), before);
  EXPECT_EQ(s.delivery.of(Signal::kMetrics).sent, 0u);
  EXPECT_EQ(s.delivery.of(Signal::kMetrics).dropped, s.delivery.of(Signal::kMetrics).queued);
  EXPECT_NE(s.delivery.last_error.find("certificate"), std::string::npos) << s.delivery.last_error;
}

}  // namespace
}  // namespace ingero::serve::otlp

// OTLP exporter settings: --otlp and the OpenTelemetry environment (the OTLP exporter
// specification's variables), header lists, the resource's container and pod ids, and what
// `ingero check` says about an endpoint and a trace file's OTLP sessions.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "serve/otlp/config.h"
#include "serve/otlp/resource.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/otlp_receiver.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::serve::otlp {
namespace {

EnvFn env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::string& endpoint, std::map<std::string, std::string> vars = {}) {
  auto c = resolve_config(endpoint, env_of(std::move(vars)));
  return c ? "" : c.error().message;
}

TEST(OtlpConfig, AnEndpointGetsEachSignalsPathAppended) {
  for (const char* base : {"http://collector:4318", "http://collector:4318/"}) {
    auto c = resolve_config(base, env_of({}));
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->url(Signal::kMetrics), "http://collector:4318/v1/metrics");
    EXPECT_EQ(c->url(Signal::kLogs), "http://collector:4318/v1/logs");
    EXPECT_EQ(c->url(Signal::kTraces), "http://collector:4318/v1/traces");
  }
  auto c = resolve_config("https://otlp.example.com/otlp", env_of({}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->url(Signal::kMetrics), "https://otlp.example.com/otlp/v1/metrics");
  EXPECT_EQ(c->display, "https://otlp.example.com/otlp");
  EXPECT_FALSE(c->gzip);
  EXPECT_EQ(c->timeout, std::chrono::milliseconds(10000));
  c = resolve_config("http://[::1]:4318", env_of({}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->url(Signal::kLogs), "http://[::1]:4318/v1/logs");
}

TEST(OtlpConfig, EnvReadsTheOpenTelemetryEndpointsWithPerSignalOverrides) {
  auto c = resolve_config("env", env_of({}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->url(Signal::kMetrics), "http://localhost:4318/v1/metrics");
  c = resolve_config("env",
                     env_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://gw:4318"},
                             {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://logs:9999/ingest"}}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->url(Signal::kMetrics), "http://gw:4318/v1/metrics");
  EXPECT_EQ(c->url(Signal::kLogs), "http://logs:9999/ingest");  // as written
  EXPECT_EQ(c->url(Signal::kTraces), "http://gw:4318/v1/traces");
  // An explicit endpoint is not overridden by the per-signal variables.
  c = resolve_config("http://mine:4318",
                     env_of({{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://x"}}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->url(Signal::kLogs), "http://mine:4318/v1/logs");
}

// An environment set up for gRPC (the OpenTelemetry operator's :4317) had OTLP/HTTP sent to a
// gRPC port, without a word; a protocol other than http/protobuf is refused, naming it.
TEST(OtlpConfig, AProtocolOtherThanHttpProtobufIsRefused) {
  for (const char* var : {"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}) {
    auto c = resolve_config(
        "env", env_of({{var, "grpc"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://col:4317"}}));
    ASSERT_FALSE(c) << var;
    EXPECT_EQ(c.error().message,
              std::string(var) +
                  "=grpc: ingero exports OTLP/HTTP with protobuf only; set it to http/protobuf "
                  "and the endpoint to the collector's HTTP port (4318 by default)");
  }
  EXPECT_TRUE(resolve_config("env", env_of({{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}})));
}

TEST(OtlpConfig, BadEndpointsAreRefusedWithTheReason) {
  EXPECT_EQ(error_of("grpc://collector:4317"),
            "--otlp: the scheme must be http or https (OTLP/HTTP), not 'grpc' in "
            "'grpc://collector:4317'");
  EXPECT_EQ(error_of("collector:4318"),
            "--otlp: expected http://HOST:PORT or https://HOST:PORT in 'collector:4318'");
  EXPECT_EQ(error_of("http://user:secret@collector:4318"),
            "--otlp: a user name or password in the URL (put credentials in INGERO_OTLP_HEADERS) "
            "in 'http://user:secret@collector:4318'");
  EXPECT_EQ(error_of("http://:4318"), "--otlp: no host in 'http://:4318'");
  EXPECT_EQ(error_of("http://collector:99999"), "--otlp: a bad port in 'http://collector:99999'");
  EXPECT_EQ(error_of("env", {{"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x"}}),
            "OTEL_EXPORTER_OTLP_ENDPOINT: the scheme must be http or https (OTLP/HTTP), not 'ftp' "
            "in 'ftp://x'");
  EXPECT_EQ(error_of("env", {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://a b"}}),
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: a blank or control character in 'http://a b'");
}

TEST(OtlpConfig, HeadersArePercentDecodedAndIngerosOwnWinByName) {
  auto h = parse_headers(" api-key = a%20b%2Cc , x-team=gpu%3Dinfra,empty=");
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_EQ(*h, (Headers{{"api-key", "a b,c"}, {"x-team", "gpu=infra"}, {"empty", ""}}));
  EXPECT_EQ(parse_headers("")->size(), 0u);
}

TEST(OtlpConfig, MalformedHeaderListsAreErrorsNamingTheVariable) {
  EXPECT_FALSE(parse_headers("a=1,b"));
  EXPECT_EQ(parse_headers("a=1,b").error().message, "entry 2: expected name=value");
  EXPECT_EQ(parse_headers("=v").error().message, "entry 1: an empty name");
  EXPECT_EQ(parse_headers("a=%zz").error().message,
            "entry 1: a bad percent escape (%XX, two hex digits)");
  EXPECT_EQ(parse_headers("a=%0d%0aInjected: 1").error().message,
            "entry 1: a CR, LF or NUL character");
  EXPECT_EQ(parse_headers("bad name=1").error().message,
            "entry 1: 'bad name' is not a valid header name");
  EXPECT_EQ(error_of("http://c:4318", {{"INGERO_OTLP_HEADERS", "nope"}}),
            "INGERO_OTLP_HEADERS: entry 1: expected name=value");
  auto c = resolve_config("http://c:4318",
                          env_of({{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic%20old,x-a=1"},
                                  {"INGERO_OTLP_HEADERS", "authorization=Bearer%20new,x-b=2"}}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->headers, (Headers{{"Authorization", "Bearer new"}, {"x-a", "1"}, {"x-b", "2"}}));
}

TEST(OtlpConfig, TlsFilesCompressionAndTimeoutFromTheEnvironment) {
  std::string ca = test::temp_path("ca.pem");
  std::ofstream(ca) << "x";
  auto c = resolve_config("https://c:4318", env_of({{"OTEL_EXPORTER_OTLP_CERTIFICATE", ca},
                                                    {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
                                                    {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"}}));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->ca_file, ca);
  EXPECT_TRUE(c->gzip);
  EXPECT_EQ(c->timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(error_of("https://c", {{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"}}),
            "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read /nonexistent/ca.pem: No such file or "
            "directory");
  EXPECT_EQ(error_of("https://c", {{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", ca}}),
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together: "
            "set both or neither");
  EXPECT_EQ(error_of("http://c", {{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"}}),
            "OTEL_EXPORTER_OTLP_COMPRESSION: expected gzip or none, not 'zstd'");
  EXPECT_EQ(error_of("http://c", {{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"}}),
            "OTEL_EXPORTER_OTLP_TIMEOUT: expected a positive number of milliseconds, not '10s'");
  EXPECT_EQ(error_of("http://c", {{"OTEL_EXPORTER_OTLP_TIMEOUT", "0"}}),
            "OTEL_EXPORTER_OTLP_TIMEOUT: expected a positive number of milliseconds, not '0'");
}

TEST(OtlpResource, ContainerAndPodIdsFromCgroupPaths) {
  const std::string id(64, 'a');
  const std::string other = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  struct Case {
    std::string path, container, pod;
  } cases[] = {
      {"/system.slice/docker-" + id + ".scope", id, ""},
      {"/docker/" + other, other, ""},
      {"/kubepods.slice/kubepods-burstable.slice/"
       "kubepods-burstable-pod1b2c3d4e_aaaa_bbbb_cccc_0123456789ab.slice/cri-containerd-" +
           other + ".scope",
       other, "1b2c3d4e-aaaa-bbbb-cccc-0123456789ab"},
      {"/kubepods/besteffort/pod1b2c3d4e-aaaa-bbbb-cccc-0123456789ab/" + id, id,
       "1b2c3d4e-aaaa-bbbb-cccc-0123456789ab"},
      {"/machine.slice/libpod-" + id + ".scope", id, ""},
      {"/kubepods.slice/crio-" + other + ".scope", other, ""},
      {"/user.slice/user-1000.slice/session-3.scope", "", ""},
      {"/", "", ""},
      {"/system.slice/docker-" + id.substr(1) + ".scope", "", ""},  // 63 digits: not an id
  };
  for (const auto& c : cases) {
    ContainerIds ids = container_ids(c.path);
    EXPECT_EQ(ids.container_id, c.container) << c.path;
    EXPECT_EQ(ids.pod_uid, c.pod) << c.path;
  }
  EXPECT_EQ(container_ids_of_proc("12:cpu:/legacy\n0::/docker/" + id + "\n").container_id, id);
  EXPECT_TRUE(container_ids_of_proc("").empty());
  EXPECT_TRUE(process_container(0xfffffff0u).empty());  // no such process
}

TEST(OtlpResource, TheAgentsResourceAndTheOpenTelemetryVariables) {
  const std::string id(64, 'b');
  auto r = agent_resource("gpu-07", "node-a", "0::/docker/" + id + "\n", env_of({}));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (Attributes{{"service.name", "ingero"},
                            {"service.version", INGERO_VERSION},
                            {"host.name", "gpu-07"},
                            {"ingero.node", "node-a"},
                            {"container.id", id}}));
  r = agent_resource("gpu-07", "gpu-07", "0::/\n",
                     env_of({{"OTEL_RESOURCE_ATTRIBUTES",
                              "deployment.environment=prod,k8s.pod.name=ingero%2Dabc,host.name=h2"},
                             {"OTEL_SERVICE_NAME", "ingero-agent"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (Attributes{{"service.name", "ingero-agent"},
                            {"service.version", INGERO_VERSION},
                            {"host.name", "h2"},
                            {"ingero.node", "gpu-07"},
                            {"deployment.environment", "prod"},
                            {"k8s.pod.name", "ingero-abc"}}));
  r = agent_resource("h", "", "", env_of({{"OTEL_RESOURCE_ATTRIBUTES", "novalue"}}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "OTEL_RESOURCE_ATTRIBUTES: entry 1: expected name=value");
  // A key of other bytes went out as it was, and a strict collector refused every request.
  for (const char* list : {"a=1,team%FF=x", "a=1,team=%C3"}) {
    r = agent_resource("h", "", "", env_of({{"OTEL_RESOURCE_ATTRIBUTES", list}}));
    ASSERT_FALSE(r) << list;
    EXPECT_EQ(r.error().message,
              "OTEL_RESOURCE_ATTRIBUTES: entry 2: not UTF-8 once percent-decoded (OTLP keys and "
              "strings are UTF-8)");
  }
}

}  // namespace
}  // namespace ingero::serve::otlp

// `ingero check --otlp` and `--db`: the receiver tried with the exporter's own settings, and
// the last OTLP session's drops read back from the session row.
namespace ingero::test {
namespace {

nlohmann::json check_line(const std::vector<std::string>& args, const std::string& name,
                          const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {INGERO_BIN, "check", "--json", "--backends", "cuda"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out, err;
  run_command(argv, &out, &err, env);  // exit 3 where this host cannot trace: not the point
  auto j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out << err;
  if (j.is_discarded()) return {};
  for (const auto& c : j["checks"])
    if (c["name"] == name) return c;
  return {};
}

TEST(OtlpCheck, TheEndpointIsTriedWithTheExportersSettings) {
  OtlpReceiver ok;
  auto c = check_line({"--otlp", ok.url()}, "otlp_endpoint");
  EXPECT_EQ(c["status"], "pass") << c.dump();
  EXPECT_EQ(c["value"], "HTTP 200");
  EXPECT_EQ(ok.requests(), 1u);
  EXPECT_EQ(ok.metrics().size(), 1u);  // an empty export, decoded
  OtlpReceiverOptions o;
  o.statuses = {401};
  OtlpReceiver refusing(o);
  c = check_line({"--otlp", refusing.url()}, "otlp_endpoint",
                 {"INGERO_OTLP_HEADERS=authorization=Bearer%20wrong"});
  EXPECT_EQ(c["status"], "optional") << c.dump();
  EXPECT_EQ(c["value"], "HTTP 401");
  EXPECT_EQ(c["fix"],
            "set the receiver's credentials in INGERO_OTLP_HEADERS or OTEL_EXPORTER_OTLP_HEADERS");
  EXPECT_EQ(refusing.header("Authorization").front(), "Bearer wrong");
  c = check_line({"--otlp", "http://127.0.0.1:1"}, "otlp_endpoint");
  EXPECT_EQ(c["value"], "no answer") << c.dump();
  c = check_line({"--otlp", "ftp://x"}, "otlp_endpoint");
  EXPECT_EQ(c["value"], "misconfigured") << c.dump();
}

// What the check says trace does with an answer is what the exporter does: a 503 is retried,
// a 500 is final (it said "retries with backoff" for every status).
TEST(OtlpCheck, TheEndpointSaysWhetherTheExporterRetriesItsAnswer) {
  for (int status : {503, 500}) {
    OtlpReceiverOptions o;
    o.statuses = {status};
    OtlpReceiver rx(o);
    auto c = check_line({"--otlp", rx.url()}, "otlp_endpoint");
    EXPECT_EQ(c["value"], "HTTP " + std::to_string(status)) << c.dump();
    std::string detail = c["detail"];
    EXPECT_NE(detail.find(status == 503 ? "(tracing works; the exporter retries with backoff, "
                                          "then drops and counts)"
                                        : "(tracing works; the exporter does not retry this "
                                          "answer: what it sends is dropped and counted as "
                                          "rejected)"),
              std::string::npos)
        << detail;
  }
}

TEST(OtlpCheck, TheLastOtlpSessionsDropsFromTheSessionRow) {
  std::string db = temp_path("sessions.db");
  auto write_session = [&](const std::string& stats) {
    auto w = store::TraceWriter::open(db);
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE((*w)->begin_session({}));
    store::SessionEnd end;
    end.bpf_stats_json = stats;
    ASSERT_TRUE((*w)->finish(end));
  };
  write_session(
      R"({"otlp_requests":9,"otlp_metric_points_sent":300,"otlp_metric_points_dropped":0,)"
      R"("otlp_log_records_sent":2,"otlp_spans_sent":0})");
  auto c = check_line({"--db", db}, "otlp_delivery");
  EXPECT_EQ(c["status"], "pass") << c.dump();
  EXPECT_EQ(c["detail"], "session 1 of " + db + ": sent 300 metric points, 2 log records, 0 spans");
  write_session(
      R"({"otlp_requests":4,"otlp_metric_points_sent":10,"otlp_metric_points_dropped":91,)"
      R"("otlp_log_records_dropped":2,"otlp_spans_dropped":5,"otlp_dropped_at_exit":93,)"
      R"("otlp_dropped_queue_full":5,"otlp_spans_over_rate":7})");
  write_session(R"({"calls":3})");  // a later session without OTLP: the one before is reported
  c = check_line({"--db", db}, "otlp_delivery");
  EXPECT_EQ(c["status"], "optional") << c.dump();
  EXPECT_EQ(c["value"], "98 dropped");
  EXPECT_EQ(c["detail"],
            "session 2 of " + db +
                ": sent 10 metric points, 0 log records, 0 spans; dropped 91 metric points, 2 log "
                "records, 5 spans (queue full 5, rejected 0, retries expired 0, at exit 93); 7 "
                "spans over --otlp-span-rate");
  c = check_line({"--db", temp_path("none.db")}, "otlp_delivery");
  EXPECT_EQ(c["value"], "no trace file");
}

}  // namespace
}  // namespace ingero::test

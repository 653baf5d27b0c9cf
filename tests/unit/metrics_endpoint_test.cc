// Issue 12, item 13: /metrics follows the listen rule of every ingero endpoint (":PORT" and a
// bare port mean loopback; an explicit 0.0.0.0 is taken as written and reported, so that
// `ingero trace` warns) and takes the Prometheus web-config file for basic auth and TLS. A
// real Prometheus scrapes it over TLS with basic auth; a scrape job with a wrong password is
// refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "serve/metrics/metrics.h"
#include "tests/support/http_client.h"
#include "tests/support/prometheus_server.h"
#include "tests/support/trace_db.h"

namespace ingero::serve {
namespace {

// bcrypt of "test" (the Prometheus documentation's example, cost 12).
const std::string kTestHash = "$2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay";

int port_of(const std::string& url) {
  size_t colon = url.rfind(':'), slash = url.find('/', colon);
  return std::stoi(url.substr(colon + 1, slash - colon - 1));
}

TEST(MetricsEndpoint, ColonPortMeansLoopbackAndWildcardsAreReported) {
  for (std::string addr : {":0", "0", "127.0.0.1:0"}) {
    Metrics m(false);
    ASSERT_TRUE(m.serve(addr)) << addr;
    EXPECT_TRUE(m.loopback_only()) << addr;
    EXPECT_EQ(m.url().rfind("http://127.0.0.1:", 0), 0u) << m.url();
    auto r = test::http_get("127.0.0.1", port_of(m.url()), "/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("ingero_build_info{version="), std::string::npos);
    EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    // Any name may scrape it (a remote Prometheus), unlike the MCP endpoint.
    auto named = test::http_request("127.0.0.1", port_of(m.url()), "GET", "/metrics", "",
                                    {{"Host", "gpu-node-07:9090"}});
    EXPECT_EQ(named.status, 200);
    EXPECT_EQ(test::http_get("127.0.0.1", port_of(m.url()), "/other").status, 404);
  }
  Metrics all(false);
  ASSERT_TRUE(all.serve("0.0.0.0:0"));
  EXPECT_FALSE(all.loopback_only());
  EXPECT_FALSE(all.authenticated());
  EXPECT_EQ(test::http_get("127.0.0.1", port_of(all.url()), "/metrics").status, 200);
}

TEST(MetricsEndpoint, ABadWebConfigIsAnErrorAtStart) {
  std::string dir = std::filesystem::path(test::temp_path("x")).parent_path();
  std::ofstream(dir + "/web.yml") << "basic_auth_users:\n  alice: not-a-hash\n";
  Metrics m(false);
  auto st = m.serve("127.0.0.1:0", dir + "/web.yml");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("alice"), std::string::npos) << st.error().message;
  std::ofstream(dir + "/tls.yml") << "tls_server_config:\n  cert_file: missing.crt\n"
                                     "  key_file: missing.key\n";
  auto t = m.serve("127.0.0.1:0", dir + "/tls.yml");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find(dir + "/missing.crt"), std::string::npos) << t.error().message;
}

TEST(MetricsEndpoint, RealPrometheusScrapesOverTlsWithBasicAuth) {
  REQUIRE_PROMETHEUS();
  std::string dir = std::filesystem::path(test::temp_path("x")).parent_path();
  std::string out, err;
  ASSERT_EQ(test::run_command(
                {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                 "subjectAltName=IP:127.0.0.1", "-keyout", dir + "/s.key", "-out", dir + "/s.crt"},
                &out, &err),
            0)
      << err;
  std::ofstream(dir + "/web.yml") << "tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n"
                                     "basic_auth_users:\n  alice: "
                                  << kTestHash << "\n";
  Metrics m(false);
  auto st = m.serve(":0", dir + "/web.yml");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_TRUE(m.authenticated());
  EXPECT_TRUE(m.loopback_only());
  ASSERT_EQ(m.url().rfind("https://127.0.0.1:", 0), 0u) << m.url();
  std::string target = "127.0.0.1:" + std::to_string(port_of(m.url()));
  auto job = [&](const std::string& name, const std::string& password) {
    return "  - job_name: " + name + "\n    scheme: https\n    tls_config:\n      ca_file: " + dir +
           "/s.crt\n    basic_auth:\n      username: alice\n      password: " + password +
           "\n    static_configs:\n      - targets: ['" + target + "']\n";
  };
  test::PrometheusServer prom;
  std::string why;
  ASSERT_TRUE(prom.start_with(job("ingero", "test") + job("stranger", "wrong"), &why)) << why;
  auto ok = prom.wait_for(R"(up{job="ingero"} == 1)", [](auto& v) { return v.size() == 1; });
  EXPECT_EQ(ok.size(), 1u) << "Prometheus could not scrape over TLS with basic auth";
  auto info =
      prom.wait_for(R"(ingero_build_info{job="ingero"})", [](auto& v) { return v.size() == 1; });
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].second, 1.0);
  auto refused = prom.wait_for(R"(up{job="stranger"})", [](auto& v) { return v.size() == 1; });
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].second, 0.0) << "a wrong password was let in";
  EXPECT_TRUE(prom.query(R"(ingero_build_info{job="stranger"})").empty());
  // Plain HTTP and a missing password are refused by the server itself.
  EXPECT_EQ(test::http_get("127.0.0.1", port_of(m.url()), "/metrics").status, 0);
  auto none = test::http_request("127.0.0.1", port_of(m.url()), "GET", "/metrics", "", {},
                                 std::chrono::seconds(10), dir + "/s.crt");
  EXPECT_EQ(none.status, 401);
}

}  // namespace
}  // namespace ingero::serve

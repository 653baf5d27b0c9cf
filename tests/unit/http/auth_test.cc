// serve/http authentication: bcrypt (known answers from other implementations), bearer
// tokens, basic auth over HTTP (bcrypt off the I/O thread), and the Prometheus web-config
// file (checked against Prometheus' own promtool).
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "serve/http/web_config.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/http/server_fixture.h"

namespace ingero::serve::http::test {
namespace {

// From the Prometheus guide "Securing Prometheus API and UI endpoints using basic auth"
// (Python's bcrypt, cost 12): the password is "test".
const std::string kPrometheusGuideHash =
    "$2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay";
// Solar Designer's crypt_blowfish test vector: "U*U", cost 5.
const std::string kCryptBlowfishHash =
    "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW";

std::string basic(const std::string& user_colon_password) {
  std::string out(4 * ((user_colon_password.size() + 2) / 3), '\0');
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                  reinterpret_cast<const unsigned char*>(user_colon_password.data()),
                  int(user_colon_password.size()));
  return "Basic " + out;
}

TEST(HttpAuth, BcryptKnownAnswers) {
  EXPECT_TRUE(bcrypt_verify("test", kPrometheusGuideHash));
  EXPECT_FALSE(bcrypt_verify("Test", kPrometheusGuideHash));
  EXPECT_TRUE(bcrypt_verify("U*U", kCryptBlowfishHash));
  // crypt_r stops at a NUL: "test\0junk" passed as "test" (helper-73).
  EXPECT_FALSE(bcrypt_verify(std::string_view("test\0junk", 9), kPrometheusGuideHash));
  // htpasswd -B writes $2y$: the same algorithm.
  std::string y = kCryptBlowfishHash;
  y[2] = 'y';
  EXPECT_TRUE(bcrypt_verify("U*U", y));
  EXPECT_FALSE(bcrypt_verify("U*V", y));
  EXPECT_FALSE(bcrypt_hash_valid("$1$abc$def"));  // MD5-crypt
  EXPECT_FALSE(bcrypt_hash_valid(kCryptBlowfishHash.substr(0, 59)));
  EXPECT_FALSE(bcrypt_verify("", ""));
}

TEST(HttpAuth, BearerTokensAreCheckedAtCreationAndPerRequest) {
  EXPECT_FALSE(BearerAuth::create({}));
  EXPECT_EQ(BearerAuth::create({{"x", "has space"}}).error().message,
            "bearer auth: token 'x' is empty or holds spaces, control characters or bytes beyond "
            "ASCII (a browser sends only visible ASCII in a header)");
  EXPECT_FALSE(BearerAuth::create({{"x", "\xd0\xbf\xd0\xb0\xe2\x82\xac"}}));  // "па€"
  EXPECT_TRUE(BearerAuth::create({{"x", "a+b/c=&%~!"}}));
  EXPECT_FALSE(BearerAuth::create({{"x", ""}}));
  auto a = BearerAuth::create({{"ci", "token-one"}, {"laptop", "token-two"}});
  ASSERT_TRUE(a);
  Request r;
  EXPECT_FALSE((*a)->check(r).ok);
  r.headers.add("Authorization", "Bearer token-two");
  EXPECT_EQ((*a)->check(r).principal, "laptop");
  r.headers.add("Authorization", "Bearer token-one");  // two Authorization fields: refused
  EXPECT_FALSE((*a)->check(r).ok);
  Request s;
  s.headers.add("authorization", "BEARER   token-one  ");
  EXPECT_EQ((*a)->check(s).principal, "ci");
  Request t;
  t.headers.add("Authorization", "Bearer token-on");
  EXPECT_FALSE((*a)->check(t).ok);
}

// A cost outside 4..16 is refused at start: below 4 no login ever matched; at 31 one check by
// any client, without a login, held the checking thread for days (helper-73).
TEST(HttpAuth, BcryptCostsOutsideFourToSixteenAreRefused) {
  for (const char* cost : {"03", "17", "31"}) {
    std::string h = kCryptBlowfishHash;
    h.replace(4, 2, cost);
    auto a = BasicAuth::create({{"carol", h}}, "metrics");
    ASSERT_FALSE(a) << cost;
    EXPECT_EQ(a.error().message, "basic auth: the password hash of user 'carol' has cost " +
                                     std::to_string(std::atoi(cost)) +
                                     ": give 4 to 16 (each step doubles the time of a check; 10 "
                                     "takes ~50 ms)");
  }
  // Users of different costs: accepted (an unknown user is checked at the most common one).
  EXPECT_TRUE(BasicAuth::create(
      {{"alice", kPrometheusGuideHash}, {"carol", kCryptBlowfishHash}, {"dan", kCryptBlowfishHash}},
      "metrics"));
}

class HttpBasicAuth : public HttpTest {
 protected:
  void SetUp() override {
    auto a = BasicAuth::create({{"alice", kPrometheusGuideHash}}, "metrics");
    ASSERT_TRUE(a) << a.error().message;
    ServerOptions o;
    o.auth = *a;
    o.workers = 1;
    start(o);
  }
};

TEST_F(HttpBasicAuth, UsersAndPasswordsAreChecked) {
  Reply none = request(port_, "GET", "/echo");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.headers["www-authenticate"], "Basic realm=\"metrics\", charset=\"UTF-8\"");
  EXPECT_EQ(request(port_, "GET", "/echo", {{"Authorization", basic("alice:wrong")}}).status, 401);
  EXPECT_EQ(request(port_, "GET", "/echo", {{"Authorization", basic("bob:test")}}).status, 401);
  EXPECT_EQ(request(port_, "GET", "/echo", {{"Authorization", "Basic !!!!"}}).status, 401);
  EXPECT_EQ(request(port_, "GET", "/echo", {{"Authorization", basic("alicetest")}}).status, 401);
  for (int i = 0; i < 2; ++i) {  // the second is answered from the cache
    Reply ok = request(port_, "GET", "/echo", {{"Authorization", basic("alice:test")}});
    EXPECT_EQ(ok.status, 200);
    EXPECT_NE(ok.body.find("principal=alice"), std::string::npos) << ok.body;
  }
  EXPECT_EQ(server_->stats().unauthorized, 5u);
}

// bcrypt costs ~0.1-0.5 s: it runs on a thread of its own (at nice 19: hostile_test.cc), never
// on the I/O thread or a handler's worker. With the only worker held, a password not yet
// verified is still checked, while the I/O thread keeps answering others, including requests
// whose credentials are already verified.
TEST_F(HttpBasicAuth, BcryptRunsOnAThreadOfItsOwn) {
  Conn holder(port_);
  ASSERT_EQ(request(port_, "GET", "/echo", {{"Authorization", basic("alice:test")}}).status, 200);
  holder.send(request_text("GET", "/block", {{"Authorization", basic("alice:test")}}));
  ASSERT_TRUE(eventually([&] { return blocked == 1; }));
  Conn guess(port_);
  guess.send(request_text("GET", "/echo", {{"Authorization", basic("alice:wrong-guess")}}));
  EXPECT_EQ(request(port_, "GET", "/fast").status, 200);  // the I/O thread is free
  // A cached credential is decided on the I/O thread: no worker needed.
  Reply cached = request(port_, "GET", "/fast-auth", {{"Authorization", basic("alice:test")}});
  EXPECT_EQ(cached.status, 200);
  EXPECT_EQ(cached.body, "alice\n");
  EXPECT_EQ(guess.read_response().status, 401);  // decided with the worker still held
  EXPECT_EQ(blocked.load(), 1);
  release();
  EXPECT_EQ(holder.read_response().status, 200);
}

// Guesses wait for the one slow-check thread, at most max_queued_slow_auth of them; beyond,
// 503: a client guessing passwords in parallel takes no more than that thread.
TEST(HttpSlowChecks, AreQueuedBoundedOnOneThread) {
  auto a = BasicAuth::create({{"alice", kPrometheusGuideHash}}, "metrics");
  ASSERT_TRUE(a) << a.error().message;
  ServerOptions o;
  o.auth = *a;
  o.max_queued_slow_auth = 2;
  Server s(std::move(o));
  s.route("GET", "/x", [](const Request&) { return Response::text(200, "x"); });
  ASSERT_TRUE(s.start());
  std::vector<Conn> guesses;
  for (int i = 0; i < 6; ++i) {
    guesses.emplace_back(s.port());
    guesses.back().send(
        request_text("GET", "/x", {{"Authorization", basic("alice:guess" + std::to_string(i))}}));
  }
  std::map<int, int> statuses;
  for (auto& g : guesses) ++statuses[g.read_response(30s).status];
  // One checking and two waiting at most when the rest arrive: every guess is 401 or 503,
  // at least three 401s, and the rest refused at once.
  EXPECT_EQ(statuses[401] + statuses[503], 6) << statuses[0];
  EXPECT_GE(statuses[401], 3);
  EXPECT_GE(statuses[503], 1);
  EXPECT_EQ(s.stats().busy, uint64_t(statuses[503]));
  s.stop(std::chrono::seconds(2));
}

// --- the Prometheus web-config file ------------------------------------------------------

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// DIR/s.crt and DIR/s.key: a self-signed certificate for 127.0.0.1.
void make_certificate(const std::string& dir) {
  std::string out, err;
  ASSERT_EQ(ingero::test::run_command(
                {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                 "subjectAltName=IP:127.0.0.1", "-keyout", dir + "/s.key", "-out", dir + "/s.crt"},
                &out, &err),
            0)
      << err;
}

TEST(HttpWebConfig, ParsesTheFormatPrometheusUsers) {
  std::string yaml = R"(
tls_server_config:
  cert_file: server.crt
  key_file: /abs/server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
  min_version: TLS13
http_server_config:
  http2: false
  headers:
    X-Frame-Options: deny
    Strict-Transport-Security: max-age=31536000
    Content-Security-Policy: ""
basic_auth_users:
  alice: )" + kPrometheusGuideHash +
                     R"(
  bob: )" + kCryptBlowfishHash +
                     "\n";
  auto c = parse_web_config(yaml, "/etc/ingero");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(c->tls);
  EXPECT_EQ(c->tls->cert_file, "/etc/ingero/server.crt");
  EXPECT_EQ(c->tls->key_file, "/abs/server.key");
  EXPECT_EQ(c->tls->client_ca_file, "/etc/ingero/ca.crt");
  EXPECT_EQ(c->tls->client_auth, ClientAuth::require_and_verify);
  EXPECT_EQ(c->tls->min_version, TlsVersion::tls13);
  EXPECT_EQ(c->tls->max_version, TlsVersion::tls13);
  EXPECT_EQ(c->basic_auth_users.size(), 2u);
  EXPECT_EQ(c->basic_auth_users["alice"], kPrometheusGuideHash);
  ASSERT_EQ(c->headers.size(), 2u);  // the blank one is unset
  EXPECT_EQ(c->headers[0], (std::pair<std::string, std::string>{"X-Frame-Options", "deny"}));
  // Empty: plain HTTP, no users. A tls_server_config without a certificate: no TLS.
  EXPECT_FALSE(parse_web_config("", ".")->tls);
  EXPECT_FALSE(parse_web_config("tls_server_config: {}\n", ".")->tls);
}

TEST(HttpWebConfig, WhatIsNotImplementedOrWrongIsAnError) {
  auto err = [](const std::string& yaml) {
    auto c = parse_web_config(yaml, "/d", "web.yml");
    return c ? std::string("accepted") : c.error().message;
  };
  EXPECT_EQ(err("bogus: 1\n"), "web.yml: bogus: unknown key");
  EXPECT_EQ(err("tls_server_config:\n  cert_file: a\n  bogus: 1\n"),
            "web.yml: tls_server_config.bogus: unknown key");
  EXPECT_EQ(err("tls_server_config:\n  cert_file: a\n"),
            "web.yml: tls_server_config: missing key_file");
  EXPECT_EQ(err("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [X]\n"),
            "web.yml: tls_server_config.cipher_suites: not supported by ingero (use cert_file, "
            "key_file, client_ca_file; OpenSSL's default ciphers and curves are used)");
  EXPECT_EQ(err("tls_server_config:\n  cert: PEM\n")
                .rfind("web.yml: tls_server_config.cert: "
                       "not supported",
                       0),
            0u);
  EXPECT_EQ(err("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: "
                "RequireAnyClientCert\n  client_ca_file: c\n")
                .rfind("web.yml: tls_server_config.client_auth_type: RequireAnyClientCert "
                       "accepts certificates without verifying them",
                       0),
            0u);
  EXPECT_EQ(err("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: "
                "RequireAndVerifyClientCert\n"),
            "web.yml: tls_server_config: client_auth_type needs client_ca_file");
  EXPECT_EQ(err("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n"),
            "web.yml: tls_server_config: client_ca_file is set but client_auth_type is "
            "NoClientCert");
  EXPECT_EQ(err("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS11\n"),
            "web.yml: tls_server_config.min_version: TLS11 is not supported: ingero serves TLS "
            "1.2 and 1.3 only");
  EXPECT_EQ(err("basic_auth_users:\n  alice: plaintext\n"),
            "web.yml: basic_auth_users.alice: not a bcrypt hash (make one with htpasswd -nBC 10 "
            "\"\" | tr -d ':\\n')");
  EXPECT_EQ(err("http_server_config:\n  headers:\n    X-Frame-Options: allow\n"),
            "web.yml: http_server_config.headers.X-Frame-Options: must be deny or sameorigin");
  EXPECT_EQ(err("http_server_config:\n  headers:\n    Set-Cookie: a\n"),
            "web.yml: http_server_config.headers.Set-Cookie: not a header this file may set");
  EXPECT_EQ(err("rate_limit:\n  interval: 1s\n  burst: 20\n"),
            "web.yml: rate_limit: not supported by ingero (connections per client are capped "
            "instead)");
  EXPECT_EQ(err("a: [1\n").rfind("web.yml: not valid YAML (line ", 0), 0u) << err("a: [1\n");
  EXPECT_EQ(load_web_config("/nonexistent/web.yml").error().message,
            "web config /nonexistent/web.yml does not exist");
  // A file others may write lets them choose who may log in: refused (helper-73: mode 0666 was
  // taken without a word). Readable by others is the owner's choice.
  const std::string web = ingero::test::temp_path("web.yml");
  { std::ofstream(web) << "basic_auth_users:\n  alice: " << kPrometheusGuideHash << "\n"; }
  for (mode_t m : {0666, 0620}) {
    ASSERT_EQ(chmod(web.c_str(), m), 0);
    auto c = load_web_config(web);
    ASSERT_FALSE(c) << m;
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", unsigned(m));
    EXPECT_EQ(c.error().message, "web config " + web + " is writable by others (mode " + octal +
                                     "): whoever can write it chooses who may log in (chmod go-w " +
                                     web + ")");
  }
  ASSERT_EQ(chmod(web.c_str(), 0644), 0);
  EXPECT_TRUE(load_web_config(web));
}

// Prometheus' own parser (promtool check web-config) accepts the file we accept, and
// refuses a key we refuse: the format is the one Prometheus users know.
TEST(HttpWebConfig, PromtoolAgrees) {
  if (!std::filesystem::exists("/usr/bin/promtool")) {
    if (ingero::test::running_in_ci()) FAIL() << "promtool (Debian package prometheus) missing";
    GTEST_SKIP() << "promtool not installed (apt install prometheus): cross-check skipped";
  }
  std::string dir = std::filesystem::path(ingero::test::temp_path("x")).parent_path();
  make_certificate(dir);
  std::string good = write_file(dir + "/web.yml",
                                "tls_server_config:\n"
                                "  cert_file: s.crt\n"
                                "  key_file: s.key\n"
                                "  min_version: TLS12\n"
                                "http_server_config:\n"
                                "  headers:\n"
                                "    X-Frame-Options: deny\n"
                                "basic_auth_users:\n"
                                "  alice: " +
                                    kPrometheusGuideHash + "\n");
  ASSERT_TRUE(load_web_config(good));
  std::string out, errs;
  EXPECT_EQ(
      ingero::test::run_command({"/usr/bin/promtool", "check", "web-config", good}, &out, &errs), 0)
      << out << errs;
  std::string bad = write_file(dir + "/bad.yml", "basic_auth_users: {}\nbogus: 1\n");
  EXPECT_FALSE(load_web_config(bad));
  EXPECT_NE(
      ingero::test::run_command({"/usr/bin/promtool", "check", "web-config", bad}, &out, &errs), 0);
}

TEST(HttpWebConfig, AppliedToAServer) {
  std::string dir = std::filesystem::path(ingero::test::temp_path("x")).parent_path();
  make_certificate(dir);
  std::string path = write_file(dir + "/web.yml",
                                "tls_server_config:\n"
                                "  cert_file: s.crt\n"
                                "  key_file: s.key\n"
                                "http_server_config:\n"
                                "  headers:\n"
                                "    X-Frame-Options: deny\n"
                                "basic_auth_users:\n"
                                "  alice: " +
                                    kPrometheusGuideHash + "\n");
  auto cfg = load_web_config(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  ServerOptions o;
  ASSERT_TRUE(apply_web_config(*cfg, o, "ingero metrics"));
  Server s(o);
  s.route("GET", "/metrics", [](const Request& r) { return Response::text(200, r.principal); });
  ASSERT_TRUE(s.start());
  TlsClient t{dir + "/s.crt", "", ""};
  Reply none = request(s.port(), "GET", "/metrics", {}, {}, &t);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.headers["www-authenticate"], "Basic realm=\"ingero metrics\", charset=\"UTF-8\"");
  Reply ok = request(s.port(), "GET", "/metrics", {{"Authorization", basic("alice:test")}}, {}, &t);
  EXPECT_EQ(ok.status, 200) << ok.error;
  EXPECT_EQ(ok.body, "alice\n");
  EXPECT_EQ(ok.headers["x-frame-options"], "deny");
}

}  // namespace
}  // namespace ingero::serve::http::test

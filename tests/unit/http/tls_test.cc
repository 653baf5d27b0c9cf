// serve/http over TLS: keep-alive, clear errors for bad certificates and keys at start,
// plaintext and silent clients on the TLS port, client certificates. The certificates are
// made for the run with the openssl command (a throw-away CA, server and client).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/http/server_fixture.h"

namespace ingero::serve::http::test {
namespace {

using Clock = std::chrono::steady_clock;

struct Pki {
  std::string dir, ca, server_crt, server_key, client_crt, client_key, other_key;
  std::string rogue_crt, rogue_key;  // self-signed, unknown to the server
};

// Makes the certificates once per test binary run.
const Pki& pki() {
  static const Pki p = [] {
    Pki k;
    k.dir = ingero::test::scratch_root() + "/pki";
    std::filesystem::create_directories(k.dir);
    auto f = [&](const std::string& n) { return k.dir + "/" + n; };
    k.ca = f("ca.crt");
    k.server_crt = f("server.crt");
    k.server_key = f("server.key");
    k.client_crt = f("client.crt");
    k.client_key = f("client.key");
    k.other_key = f("other.key");
    k.rogue_crt = f("rogue.crt");
    k.rogue_key = f("rogue.key");
    std::ofstream(f("server.ext")) << "subjectAltName=IP:127.0.0.1\n";
    std::ofstream(f("client.ext")) << "extendedKeyUsage=clientAuth\n";
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                         "-nodes"};
    auto run = [](std::vector<std::string> argv) {
      std::string out, err;
      int rc = ingero::test::run_command(argv, &out, &err);
      EXPECT_EQ(rc, 0) << argv[1] << ": " << err;
    };
    auto with = [&](std::vector<std::string> a, const std::vector<std::string>& b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    run(with({"openssl", "req", "-x509", "-days", "1", "-subj", "/CN=ingero test CA", "-keyout",
              f("ca.key"), "-out", k.ca},
             ec));
    run(with({"openssl", "req", "-x509", "-days", "1", "-subj", "/CN=rogue", "-keyout", k.rogue_key,
              "-out", k.rogue_crt},
             ec));
    for (std::string who : {"server", "client"}) {
      run(with({"openssl", "req", "-subj", "/CN=" + who, "-keyout", f(who + ".key"), "-out",
                f(who + ".csr")},
               ec));
      run({"openssl", "x509", "-req", "-days", "1", "-in", f(who + ".csr"), "-CA", k.ca, "-CAkey",
           f("ca.key"), "-CAcreateserial", "-extfile", f(who + ".ext"), "-out", f(who + ".crt")});
    }
    run({"openssl", "ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", k.other_key});
    return k;
  }();
  return p;
}

class HttpTls : public HttpTest {
 protected:
  ServerOptions tls_options() {
    ServerOptions o;
    o.tls = TlsOptions{};
    o.tls->cert_file = pki().server_crt;
    o.tls->key_file = pki().server_key;
    return o;
  }
  TlsClient client() { return TlsClient{pki().ca, "", ""}; }
};

TEST_F(HttpTls, ServesOverTlsWithKeepAlive) {
  start(tls_options());
  EXPECT_EQ(server_->url("/mcp").rfind("https://127.0.0.1:", 0), 0u);
  TlsClient t = client();
  Conn c(port_, "127.0.0.1", &t);
  ASSERT_TRUE(c.ok()) << c.error();
  for (int i = 0; i < 5; ++i) {
    c.send(request_text("GET", "/echo"));
    Reply r = c.read_response();
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.body, "peer_port=" + std::to_string(c.local_port()) + " principal= tls=1\n");
  }
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
}

TEST_F(HttpTls, BadCertificateOrKeyIsAClearErrorAtStart) {
  auto error_of = [](ServerOptions o) {
    Server s(std::move(o));
    auto st = s.start();
    return st ? std::string("started") : st.error().message;
  };
  std::string dir = pki().dir;
  std::ofstream(dir + "/garbage.crt") << "not a certificate\n";
  ServerOptions o = tls_options();
  o.tls->cert_file = dir + "/missing.crt";
  EXPECT_EQ(error_of(o), "TLS: certificate " + dir + "/missing.crt does not exist");
  o.tls->cert_file = dir;
  EXPECT_EQ(error_of(o), "TLS: certificate " + dir + " is a directory");
  o.tls->cert_file = dir + "/garbage.crt";
  EXPECT_EQ(error_of(o).rfind("TLS: cannot load the certificate " + dir + "/garbage.crt: ", 0), 0u)
      << error_of(o);
  o = tls_options();
  o.tls->key_file = pki().other_key;
  EXPECT_EQ(error_of(o), "TLS: the key " + pki().other_key + " does not match the certificate " +
                             pki().server_crt);
  o = tls_options();
  o.tls->client_auth = ClientAuth::require_and_verify;
  EXPECT_EQ(error_of(o), "TLS: verifying client certificates needs a client CA file");
}

TEST_F(HttpTls, PlaintextAndSilentClientsOnTheTlsPortAreClosed) {
  ServerOptions o = tls_options();
  o.limits.request_timeout = 1s;
  start(o);
  Conn plain(port_);
  plain.send(request_text("GET", "/echo"));
  std::string got;
  EXPECT_TRUE(plain.wait_closed(5s, &got));
  EXPECT_EQ(got.find("200"), std::string::npos);
  Conn silent(port_);  // connects, never starts the handshake
  auto t0 = Clock::now();
  EXPECT_TRUE(silent.wait_closed(10s));
  double cut = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(cut, 0.9);
  EXPECT_LT(cut, 5.0);
  TlsClient t = client();
  EXPECT_EQ(request(port_, "GET", "/echo", {}, {}, &t).status, 200);
}

TEST_F(HttpTls, ClientCertificatesAreRequiredAndVerified) {
  ServerOptions o = tls_options();
  o.tls->client_auth = ClientAuth::require_and_verify;
  o.tls->client_ca_file = pki().ca;
  start(o);
  TlsClient anonymous = client();
  Reply none = request(port_, "GET", "/echo", {}, {}, &anonymous);
  EXPECT_EQ(none.status, 0);  // refused in the handshake (TLS 1.3: at the first read)
  TlsClient rogue{pki().ca, pki().rogue_crt, pki().rogue_key};
  EXPECT_EQ(request(port_, "GET", "/echo", {}, {}, &rogue).status, 0);
  TlsClient known{pki().ca, pki().client_crt, pki().client_key};
  Reply ok = request(port_, "GET", "/echo", {}, {}, &known);
  EXPECT_EQ(ok.status, 200) << ok.error;
}

}  // namespace
}  // namespace ingero::serve::http::test

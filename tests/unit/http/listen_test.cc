// Where a server listens: a bare port is loopback; a wildcard or other address is reported
// as exposed so that the caller warns.
#include <gtest/gtest.h>

#include "serve/http/listen_address.h"
#include "serve/http/server.h"

namespace ingero::serve::http {
namespace {

TEST(HttpListen, AddressesParse) {
  auto p = [](const char* s) { return parse_listen_address(s); };
  EXPECT_EQ(p("8080")->host, "127.0.0.1");
  EXPECT_EQ(p("8080")->port, 8080);
  EXPECT_EQ(p(":19090")->host, "127.0.0.1");
  EXPECT_FALSE(p(":19090")->wildcard);
  EXPECT_EQ(p("0.0.0.0:9")->host, "0.0.0.0");
  EXPECT_TRUE(p("0.0.0.0:9")->wildcard);
  EXPECT_EQ(p("[::]:9")->host, "::");
  EXPECT_TRUE(p("[::]:9")->wildcard);
  EXPECT_EQ(p("[::1]:9")->host, "::1");
  EXPECT_EQ(p("gpu-node-01:443")->host, "gpu-node-01");
  EXPECT_EQ(p("localhost:0")->port, 0);
  EXPECT_EQ(p("").error().message,
            "bad listen address '': missing port (use PORT, :PORT, HOST:PORT or [IPV6]:PORT)");
  EXPECT_FALSE(p("host:"));
  EXPECT_FALSE(p("host:http"));
  EXPECT_FALSE(p("65536"));
  EXPECT_FALSE(p("::1:80"));
  EXPECT_FALSE(p("[::1]80"));
  EXPECT_EQ(url_host("::1"), "[::1]");
  EXPECT_EQ(url_host("127.0.0.1"), "127.0.0.1");
}

struct Bound {
  std::string error, address, url;
  bool loopback = false;
};
Bound bind_to(const std::string& listen) {
  ServerOptions o;
  o.listen = listen;
  Server s(o);
  auto st = s.start();
  Bound b;
  if (!st) {
    b.error = st.error().message;
    return b;
  }
  b.address = s.address();
  b.url = s.url("/metrics");
  b.loopback = s.loopback_only();
  return b;
}

TEST(HttpListen, BarePortIsLoopbackAndWildcardsAreReported) {
  Bound b = bind_to(":0");
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.address, "127.0.0.1");
  EXPECT_TRUE(b.loopback);
  b = bind_to("0");
  EXPECT_EQ(b.address, "127.0.0.1");
  EXPECT_TRUE(b.loopback);
  b = bind_to("localhost:0");
  EXPECT_TRUE(b.loopback) << b.error << b.address;
  b = bind_to("0.0.0.0:0");
  EXPECT_EQ(b.address, "0.0.0.0");
  EXPECT_FALSE(b.loopback);
  EXPECT_EQ(b.url.rfind("http://127.0.0.1:", 0), 0u) << b.url;  // a wildcard is reached locally
  b = bind_to("[::]:0");
  if (b.error.empty()) {
    EXPECT_FALSE(b.loopback);
    b = bind_to("[::1]:0");
    EXPECT_TRUE(b.loopback) << b.error;
    EXPECT_EQ(b.url.rfind("http://[::1]:", 0), 0u) << b.url;
  } else {
    std::cout << "no IPv6 here: " << b.error << "\n";
  }
}

TEST(HttpListen, BusyPortAndBadAddressAreErrors) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  Server first(o);
  ASSERT_TRUE(first.start());
  Bound b = bind_to("127.0.0.1:" + std::to_string(first.port()));
  EXPECT_EQ(b.error, "cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                         ": Address already in use");
  EXPECT_EQ(bind_to("not-a-host.invalid:0").error.rfind("cannot resolve 'not-a-host.invalid'", 0),
            0u);
  EXPECT_EQ(bind_to("127.0.0.1:x").error.rfind("bad listen address", 0), 0u);
}

}  // namespace
}  // namespace ingero::serve::http

// How `dashboard` and `mcp --http` start: a busy port or an unusable certificate is a usage
// error (exit 2) said at once, never a server that never serves; and the dashboard waits for a
// trace file that does not exist yet (`ingero trace` may be about to create it), then shows it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using namespace std::chrono_literals;

// A socket listening on 127.0.0.1, held for the test: its port is busy.
struct BusyPort {
  int fd = -1, port = 0;
  BusyPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 && listen(fd, 1) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  ~BusyPort() {
    if (fd >= 0) close(fd);
  }
};

TEST(ServeStart, ABusyPortOrAMissingCertificateExits2AtOnce) {
  std::string db = write_free_calls(temp_path("start.db"), 10);
  BusyPort busy;
  ASSERT_NE(busy.port, 0);
  const std::string addr = "127.0.0.1:" + std::to_string(busy.port);
  const std::string missing = temp_path("no-such-cert.pem");
  for (std::string cmd : {"dashboard", "mcp"}) {
    struct Case {
      std::vector<std::string> extra;
      std::string said;
    };
    const std::vector<Case> cases = {
        {{"--http", addr}, "Address already in use"},
        {{"--http", "127.0.0.1:0", "--tls-cert", missing, "--tls-key", missing}, missing},
    };
    for (const Case& c : cases) {
      std::vector<std::string> argv = {INGERO_BIN, cmd, "--db", db};
      argv.insert(argv.end(), c.extra.begin(), c.extra.end());
      std::string out, err;
      // A server that started anyway would run until the timeout: rc -1.
      EXPECT_EQ(run_command(argv, &out, &err, {}, 10s), 2) << cmd << ": " << err;
      EXPECT_EQ(err.rfind("ingero " + cmd + ": ", 0), 0u) << err;
      EXPECT_NE(err.find(c.said), std::string::npos) << cmd << ": " << err;
      EXPECT_EQ(err.find("serving"), std::string::npos) << err;
    }
  }
}

// A fleet whose ClickHouse answers nobody: refused at start (exit 1), over stdio and HTTP
// alike, rather than a server whose every tool fails.
TEST(ServeStart, AnMcpServerOfAFleetThatCannotBeReachedExits1) {
  BusyPort closed;  // listening, never answering: then closed, refusing
  int port = closed.port;
  close(closed.fd);
  closed.fd = -1;
  const std::string url = "clickhouse://127.0.0.1:" + std::to_string(port) + "/ingero";
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--http", "127.0.0.1:0"}}) {
    std::vector<std::string> argv = {INGERO_BIN, "mcp", "--source", url};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string out, err;
    EXPECT_EQ(run_command(argv, &out, &err, {}, 30s), 1) << err;
    EXPECT_EQ(err.rfind("ingero mcp: ", 0), 0u) << err;
    EXPECT_NE(err.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << err;
    EXPECT_EQ(err.find("serving"), std::string::npos) << err;
    EXPECT_EQ(out, "");
  }
}

// A "ClickHouse" that takes the connection and never answers (hung, or something else on the
// port): `mcp --source` sat there silent for 10 minutes, each SELECT's limit, and explain with
// it. Both are refused within the bare SELECT's 10 s, naming the server.
TEST(ServeStart, AFleetServerThatNeverAnswersIsRefusedWithinTenSeconds) {
  BusyPort silent[2];  // listening, never answering
  auto url = [&](int i) {
    return "clickhouse://127.0.0.1:" + std::to_string(silent[i].port) + "/ingero";
  };
  auto t0 = std::chrono::steady_clock::now();
  Subprocess p[2] = {Subprocess::spawn({INGERO_BIN, "mcp", "--source", url(0)}),
                     Subprocess::spawn({INGERO_BIN, "explain", "--source", url(1)})};
  for (int i = 0; i < 2; ++i) EXPECT_EQ(p[i].wait(60s), 1) << p[i].err();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 40s);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(p[i].err().find("127.0.0.1:" + std::to_string(silent[i].port) +
                              "/ingero: no complete answer within 10000 ms"),
              std::string::npos)
        << p[i].err();
    EXPECT_EQ(p[i].out(), "");
  }
}

// --tls-cert and --tls-key without --http were ignored without a word: stdio has no TLS.
TEST(ServeStart, TlsFlagsWithoutHttpAreAUsageError) {
  std::string db = write_free_calls(temp_path("tls-stdio.db"), 10);
  std::string out, err;
  EXPECT_EQ(
      run_command({INGERO_BIN, "mcp", "--db", db, "--tls-cert", "c.pem", "--tls-key", "k.pem"},
                  &out, &err, {}, 30s),
      2);
  EXPECT_EQ(err, "ingero mcp: --tls-cert and --tls-key are for --http (stdio has no TLS)\n");
}

// Bound beyond loopback, each server says so at start, louder without a token; on loopback it
// says nothing of it.
TEST(ServeStart, AServerReachableFromOtherHostsSaysSo) {
  std::string db = write_free_calls(temp_path("exposed.db"), 10);
  struct Case {
    std::string cmd, env, addr, token, said;
  };
  const std::vector<Case> cases = {
      {"dashboard", "INGERO_DASHBOARD_TOKEN", "0.0.0.0:0", "",
       "ingero dashboard: WARNING: 0.0.0.0:0 is reachable from other hosts and there is no "
       "bearer token: anyone who can reach this port can read the trace. Set "
       "INGERO_DASHBOARD_TOKEN and use --tls-cert/--tls-key.\n"},
      {"mcp", "INGERO_MCP_TOKEN", "0.0.0.0:0", "",
       "ingero mcp: WARNING: 0.0.0.0:0 is reachable from other hosts and there is no bearer "
       "token: anyone who can reach this port can read the trace. Set INGERO_MCP_TOKEN and use "
       "--tls-cert/--tls-key.\n"},
      {"dashboard", "INGERO_DASHBOARD_TOKEN", "0.0.0.0:0", "s3cret",
       "ingero dashboard: WARNING: 0.0.0.0:0 is reachable from other hosts.\n"},
      {"dashboard", "INGERO_DASHBOARD_TOKEN", "127.0.0.1:0", "", ""},
  };
  for (const Case& c : cases) {
    std::vector<std::string> env;
    if (!c.token.empty()) env.push_back(c.env + "=" + c.token);
    auto p = Subprocess::spawn({INGERO_BIN, c.cmd, "--db", db, "--http", c.addr}, env);
    ASSERT_TRUE(p.wait_stderr_line("serving", 10s)) << c.cmd << ": " << p.err();
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(10s), 0) << p.err();
    if (c.said.empty())
      EXPECT_EQ(p.err().find("WARNING"), std::string::npos) << p.err();
    else
      EXPECT_NE(p.err().find(c.said), std::string::npos) << c.cmd << ": " << p.err();
  }
}

// cli.md: the dashboard listens on 127.0.0.1:8080 by default, and `:PORT` or a bare port bind
// loopback, never every interface. With 127.0.0.1:8080 held (by this test, or by whatever holds
// it already), the default is refused naming that address: deterministic whoever has the port.
TEST(ServeStart, TheDashboardsDefaultAddressAndABarePortAreLoopback) {
  std::string db = write_free_calls(temp_path("default.db"), 10);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(8080);
  bool held = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd, 1) == 0;
  int bind_errno = held ? 0 : errno;
  EXPECT_TRUE(held || bind_errno == EADDRINUSE) << strerror(bind_errno);  // or another holds it
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "dashboard", "--db", db}, &out, &err, {}, 10s), 2) << err;
  EXPECT_EQ(err, "ingero dashboard: cannot listen on 127.0.0.1:8080: Address already in use\n");
  close(fd);
  for (std::string addr : {":0", "0"}) {
    auto p = Subprocess::spawn({INGERO_BIN, "dashboard", "--db", db, "--http", addr});
    std::string line;
    ASSERT_TRUE(p.wait_stderr_line("serving", 10s, &line)) << addr << ": " << p.err();
    EXPECT_TRUE(std::regex_search(line, std::regex(R"( at http://127\.0\.0\.1:\d+/ )"))) << line;
    EXPECT_EQ(p.err().find("WARNING"), std::string::npos) << p.err();
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(10s), 0) << p.err();
  }
}

// A file that is no trace is refused at start (exit 1), its path said once: it was
// "ingero dashboard: F: F: not a trace: not an SQLite database".
TEST(ServeStart, TheDashboardRefusesAForeignFileNamingItOnce) {
  std::string db = temp_path("foreign.db");
  { std::ofstream(db) << std::string(5000, 'x'); }
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "dashboard", "--db", db, "--http", "127.0.0.1:0"}, &out, &err,
                        {}, 10s),
            1);
  EXPECT_EQ(err, "ingero dashboard: " + db + ": not a trace: not an SQLite database\n");
}

TEST(ServeStart, TheDashboardWaitsForAMissingTraceAndShowsItOnceWritten) {
  std::string db = temp_path("later.db");
  auto p = Subprocess::spawn(
      {INGERO_BIN, "dashboard", "--db", db, "--http", "127.0.0.1:0", "--refresh", "0.5"});
  ASSERT_TRUE(p.wait_stderr_line("is not a trace yet", 10s)) << p.err();
  std::string line;
  ASSERT_TRUE(p.wait_stderr_line("serving", 10s, &line)) << p.err();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(127\.0\.0\.1:(\d+)/)"))) << line;
  int port = std::stoi(m[1]);
  EXPECT_EQ(http_get("127.0.0.1", port, "/api/report").status, 503);
  write_free_calls(db, 200);
  HttpResponse r;
  for (int i = 0; i < 100 && r.status != 200; ++i) {
    std::this_thread::sleep_for(100ms);
    r = http_get("127.0.0.1", port, "/api/report");
  }
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_TRUE(nlohmann::json::parse(r.body).is_object());
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(10s), 0) << p.err();
}

}  // namespace
}  // namespace ingero::test

// `ingero mcp` over stdio with more requests than workers (a hostile tester's findings,
// 2026-11-28): a cancel reached only the requests already running, so that 9 of 12 cancelled
// queries ran their full 5 s; ping waited behind every busy worker; and SIGTERM ran every
// queued query to its end before the server exited (24 s for 20 of them).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// An MCP client over the server's stdin and stdout.
struct StdioClient {
  Subprocess p;
  explicit StdioClient(const std::string& db)
      : p(Subprocess::spawn({INGERO_BIN, "mcp", "--db", db, "--threads", "1"})) {
    send(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":)"
         R"("2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
    EXPECT_TRUE(p.wait_stdout_line("\"id\":0", 10s));
    send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }
  void send(const std::string& line) { p.write_stdin(line + "\n"); }
  // A query that runs until run_sql's 5 s limit.
  void endless(int id) {
    send(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"tools/call","params":{"name":"run_sql","arguments":{"sql":)"
         R"("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) )"
         R"(SELECT count(*) FROM r"}}})");
  }
  void cancel(int id) {
    send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":)" +
         std::to_string(id) + "}}");
  }
};

TEST(McpStdioQueue, ACancelReachesAQueuedRequestAndPingDoesNotWait) {
  std::string db = write_free_calls(temp_path("queue.db"), 10);
  StdioClient c(db);
  for (int id = 1; id <= 6; ++id) c.endless(id);
  for (int id = 1; id <= 6; ++id) c.cancel(id);
  auto t0 = Clock::now();
  c.send(R"({"jsonrpc":"2.0","id":100,"method":"ping"})");
  ASSERT_TRUE(c.p.wait_stdout_line("\"id\":100", 10s));
  EXPECT_LT(seconds_since(t0), 1.0) << "ping waited behind the worker";
  // The one running stops within milliseconds; the five queued never run. None is answered.
  c.send(R"({"jsonrpc":"2.0","id":101,"method":"tools/list"})");
  ASSERT_TRUE(c.p.wait_stdout_line("\"id\":101", 10s));
  EXPECT_LT(seconds_since(t0), 2.0) << "a cancelled query held the only worker";
  c.p.close_stdin();
  EXPECT_EQ(c.p.wait(10s), 0);
  for (int id = 1; id <= 6; ++id)
    EXPECT_EQ(c.p.out().find("\"id\":" + std::to_string(id) + ","), std::string::npos)
        << "cancelled, answered anyway: " << id;
}

TEST(McpStdioQueue, AStopSignalDropsWhatWaitsAndCancelsWhatRuns) {
  std::string db = write_free_calls(temp_path("stop.db"), 10);
  StdioClient c(db);
  for (int id = 1; id <= 8; ++id) c.endless(id);
  // The first is running (its worker took it): the rest wait.
  std::this_thread::sleep_for(300ms);
  auto t0 = Clock::now();
  c.p.signal(SIGTERM);
  EXPECT_EQ(c.p.wait(30s), 0);
  EXPECT_LT(seconds_since(t0), 2.0) << "the queued queries ran before the exit";
}

// mcp.md: "at most 64 waiting (one more is answered with an error at once)". One query keeps
// the only worker busy (the process has burned 100 ms of CPU: the reader sleeps in poll, so
// the worker runs it); 65 more arrive together: 64 wait, the 65th is refused at once, by id.
TEST(McpStdioQueue, SixtyFourWaitAndTheNextIsRefusedAtOnce) {
  std::string db = write_free_calls(temp_path("cap.db"), 10);
  StdioClient c(db);
  c.endless(1);
  auto cpu_ms = [&] {
    std::ifstream f("/proc/" + std::to_string(c.p.pid()) + "/stat");
    std::string line;
    std::getline(f, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stoll(field);
      if (i == 15) stime = std::stoll(field);
    }
    return (utime + stime) * 1000 / sysconf(_SC_CLK_TCK);
  };
  const long long before = cpu_ms();
  auto t0 = Clock::now();
  while (cpu_ms() - before < 100 && seconds_since(t0) < 4.5) std::this_thread::sleep_for(10ms);
  ASSERT_GE(cpu_ms() - before, 100) << "the first query never ran";
  std::string many;
  for (int id = 2; id <= 66; ++id)
    many += R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
            R"(,"method":"tools/call","params":{"name":"run_sql","arguments":{"sql":)"
            R"("SELECT 1"}}})"
            "\n";
  c.p.write_stdin(many);
  ASSERT_TRUE(c.p.wait_stdout_line("\"id\":66", 3s)) << c.p.out();
  EXPECT_NE(c.p.out().find(R"({"error":{"code":-32603,"message":"the server has 64 requests )"
                           R"(waiting: send this one again once some are answered"},"id":66,)"),
            std::string::npos)
      << c.p.out();
  c.cancel(1);
  c.p.close_stdin();
  EXPECT_EQ(c.p.wait(20s), 0);
  // The 64 that waited ran once the worker was free, each answered with its row.
  for (int id = 2; id <= 65; ++id)
    EXPECT_NE(c.p.out().find("\"id\":" + std::to_string(id) + ",\"jsonrpc\":\"2.0\",\"result\""),
              std::string::npos)
        << id;
  EXPECT_EQ(c.p.out().find("\"id\":1,"), std::string::npos) << "cancelled, answered anyway";
  // One refusal (the cancelled query's end is a log notification, level "error").
  EXPECT_EQ(c.p.out().find("{\"error\""), c.p.out().rfind("{\"error\"")) << c.p.out();
}

// mcp.md: "Lines longer than 4 MiB are discarded with an error", and the server reads on. A
// ping padded to exactly 4 MiB is answered; one byte more is refused (id null: it was never
// parsed), and the ping after it is answered.
TEST(McpStdioQueue, ALineOver4MiBIsDiscardedAndTheNextIsAnswered) {
  std::string db = write_free_calls(temp_path("long.db"), 10);
  StdioClient c(db);
  auto padded = [](int id, size_t total) {
    std::string head = R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                       R"(,"method":"ping","params":{"_meta":{"pad":")";
    std::string tail = R"("}}})";
    return head + std::string(total - head.size() - tail.size(), 'x') + tail;
  };
  c.send(padded(5, 4u << 20));
  ASSERT_TRUE(c.p.wait_stdout_line("\"id\":5,", 10s)) << c.p.err();
  c.send(padded(6, (4u << 20) + 1));
  c.send(R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  ASSERT_TRUE(c.p.wait_stdout_line("\"id\":7,", 10s)) << c.p.err();
  // Said by the reader ("message exceeds the limit of 4194304 bytes") when the line is read in
  // pieces, or whole by the server ("message of 4194305 bytes exceeds ...").
  const std::string& out = c.p.out();
  size_t refused = out.find(R"({"error":{"code":-32600,"message":"message )");
  ASSERT_NE(refused, std::string::npos) << out.substr(0, 2000);
  EXPECT_NE(out.find("exceeds the limit of 4194304", refused), std::string::npos)
      << out.substr(refused, 200);
  EXPECT_EQ(c.p.out().find("\"id\":6,"), std::string::npos);
  c.p.close_stdin();
  EXPECT_EQ(c.p.wait(10s), 0);
}

// A hostile tester's findings: a second initialize was accepted and changed the protocol version
// under requests already queued; and a raw NUL ended a message for the parser, so that what
// followed it on the line was dropped and its request never answered. Now the second
// initialize is an Invalid Request and a NUL a Parse error; what follows is answered.
TEST(McpStdioQueue, ASecondInitializeAndANulAreRefusedAndNothingIsLost) {
  std::string db = write_free_calls(temp_path("twice.db"), 10);
  StdioClient c(db);  // initialized at 2025-06-18
  c.send(R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":)"
         R"("2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  c.send(std::string(R"({"jsonrpc":"2.0","id":3,"method":"ping"})") + '\0' +
         R"({"jsonrpc":"2.0","id":4,"method":"ping"})");
  // An argument of the wrong type: a protocol error in 2025-06-18, a tool error in 2025-11-25.
  c.send(R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_sql",)"
         R"("arguments":{"sql":5}}})");
  ASSERT_TRUE(c.p.wait_stdout_line("\"id\":5,", 10s)) << c.p.err();
  const std::string& out = c.p.out();
  EXPECT_NE(out.find(R"({"error":{"code":-32600,"message":"Invalid Request: this session is )"
                     R"(initialized already)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(R"({"error":{"code":-32700,"message":"Parse error: a NUL byte in the )"
                     R"(message"},"id":null,)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("\"id\":3,"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"id\":4,"), std::string::npos) << out;
  EXPECT_NE(out.find(R"({"error":{"code":-32602,)"), std::string::npos) << out;
  c.p.close_stdin();
  EXPECT_EQ(c.p.wait(10s), 0);
}

}  // namespace
}  // namespace ingero::test

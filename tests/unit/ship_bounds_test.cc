// `ingero ship` and `query --source` against servers that refuse, answer slowly or not at all,
// and inputs that can never ship: each ends within what the user allowed, or at once where
// waiting cannot help (a hostile tester's findings, 2026-11-28).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "fleet/shipper.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/run_ingero.h"
#include "tests/support/silent_server.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A wrong password is refused the same way every time: ship waited out --timeout (5 minutes by
// default), saying the rows "are retried".
TEST(ShipBounds, ARefusalForGoodEndsTheShipAtOnce) {
  FakeHttpServer ch([](const std::string&, const std::string&) {
    return "Code: 516, e.displayText() = DB::Exception: default: Authentication failed";
  });
  ch.answer_with("401 Unauthorized");
  std::string db = write_free_calls(temp_path("refused.db"), 100);
  const auto t0 = Clock::now();
  auto r = run_ingero({"ship", "--db", db, "--clickhouse", ch.url("ingero"), "--timeout", "60s"});
  EXPECT_LT(seconds_since(t0), 10);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("answered HTTP 401: Code: 516"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(retrying cannot mend this)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("are retried"), std::string::npos) << r.err;
  EXPECT_EQ(ch.count("CREATE DATABASE"), 1u);  // asked once, not again
}

// A server answering each request in 1 s: the pass's ~20 schema requests ran one after another,
// each bounded only by itself, and a 7 s ship took 74 s. Every request now ends by --timeout.
TEST(ShipBounds, ASlowServerCannotHoldTheShipPastItsTimeout) {
  FakeHttpServer ch([](const std::string&, const std::string&) { return std::string(); });
  ch.answer_with("200 OK", 1000);
  std::string db = write_free_calls(temp_path("slow.db"), 100);
  const auto t0 = Clock::now();
  auto r = run_ingero({"ship", "--db", db, "--clickhouse", ch.url("ingero"), "--timeout", "3s"});
  double took = seconds_since(t0);
  EXPECT_EQ(r.rc, 1) << r.err;
  // The timeout, and at most libcurl's once-a-second check of the deadline.
  EXPECT_LT(took, 5.5) << r.err;
  EXPECT_NE(r.out.find(" rows left\n"), std::string::npos) << r.out;
}

// A file that is no trace of ours can never ship: said at once (it was retried for 5 minutes).
TEST(ShipBounds, AFileThatIsNoTraceIsRefusedAtOnce) {
  std::string junk = temp_path("junk.db");
  std::ofstream(junk) << std::string(5000, 'x');
  const auto t0 = Clock::now();
  auto r = run_ingero(
      {"ship", "--db", junk, "--clickhouse", "http://127.0.0.1:1/ingero", "--timeout", "60s"});
  EXPECT_LT(seconds_since(t0), 5);
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "ingero ship: " + junk + ": not a trace: not an SQLite database\n");
}

// A budget past what the clock counts (99999999h) overflowed it: the drain ended at once, "the
// time allowed ran out", having asked nothing. It is a century now: only the deadline set from
// outside ends this one.
TEST(ShipBounds, AHugeBudgetIsALongOneNotNone) {
  SilentServer ch;
  std::string db = write_free_calls(temp_path("huge.db"), 100);
  auto ep = fleet::parse_endpoint("http://127.0.0.1:" + std::to_string(ch.port()) + "/ingero");
  ASSERT_TRUE(ep);
  auto s = fleet::Shipper::create(db, *ep);
  ASSERT_TRUE(s) << s.error().message;
  (*s)->set_deadline(Clock::now() + std::chrono::seconds(1));
  auto rep = (*s)->drain(std::chrono::hours(99999999));
  EXPECT_FALSE(rep.caught_up);
  EXPECT_TRUE(ch.wait_for_request(std::chrono::seconds(1)));  // it asked
  // Cut by the deadline (said one of two ways, by whichever check saw it first).
  EXPECT_EQ(rep.last_error.rfind("ClickHouse at " + ep->display() + ": no complete answer ", 0), 0u)
      << rep.last_error;
}

// Nothing listening: a drain told to stop after two unreachable tries does, where it retried
// for its whole budget (the tracer's exit, 10 s by default); the rows are counted as left.
TEST(ShipBounds, ADrainGivesUpOnAServerThatIsNotThere) {
  std::string db = write_free_calls(temp_path("refused.db"), 10);
  auto ep = fleet::parse_endpoint("http://127.0.0.1:1/ingero");
  ASSERT_TRUE(ep);
  auto s = fleet::Shipper::create(db, *ep);
  ASSERT_TRUE(s) << s.error().message;
  const auto t0 = Clock::now();
  auto rep = (*s)->drain(std::chrono::minutes(10), 2);
  EXPECT_LT(seconds_since(t0), 120);  // two tries and one 0.5 s backoff; it was 10 minutes
  EXPECT_FALSE(rep.caught_up);
  EXPECT_EQ(rep.unshipped, 11u);  // the 10 calls and their session
  EXPECT_EQ(rep.last_error.rfind("ClickHouse at " + ep->display() + ": cannot connect (", 0), 0u)
      << rep.last_error;
  EXPECT_EQ((*s)->totals().failures, 2u);
}

// The one-shipper lock was named after the path given: a second shipper through a symbolic
// link to the file shipped every row again.
TEST(ShipBounds, OneShipperAFileThroughAnyLinkToIt) {
  std::string db = write_free_calls(temp_path("locked.db"), 10);
  std::string link = temp_path("link.db");
  std::filesystem::create_symlink(db, link);
  auto ep = fleet::parse_endpoint("http://127.0.0.1:1/ingero");
  ASSERT_TRUE(ep);
  auto first = fleet::Shipper::create(db, *ep);
  ASSERT_TRUE(first) << first.error().message;
  auto second = fleet::Shipper::create(link, *ep);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().message,
            link + " is being shipped by another ingero process (" + db + ".ship.lock is locked)");
}

// `query --source` against a server that takes the request and never answers hung for good
// (its stream had no timeout); --timeout is the server's limit, and the client's is 5 s more.
TEST(ShipBounds, AQueryOfAServerThatNeverAnswersEndsAfterItsTimeout) {
  SilentServer ch;
  const auto t0 = Clock::now();
  auto r =
      run_ingero({"query", "--timeout", "1", "--source",
                  "clickhouse://127.0.0.1:" + std::to_string(ch.port()) + "/ingero", "SELECT 1"});
  double took = seconds_since(t0);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_GT(took, 5.5);
  EXPECT_LT(took, 9);
  EXPECT_NE(r.err.find("no complete answer within 6000 ms"), std::string::npos) << r.err;
}

// Flags that did nothing, unsaid: --cluster without --ddl; merge -o "" merged everything and
// then failed at the rename.
TEST(ShipBounds, FlagsThatCannotApplyAreUsageErrors) {
  std::string db = write_free_calls(temp_path("flags.db"), 10);
  auto r = run_ingero(
      {"ship", "--db", db, "--clickhouse", "http://127.0.0.1:1/ingero", "--cluster", "fleet"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "ingero ship: --cluster goes with --ddl\n");
  r = run_ingero({"merge", db, "-o", ""});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "ingero merge: -o is empty: name the merged trace file to create\n");
}

}  // namespace
}  // namespace ingero::test

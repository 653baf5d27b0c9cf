// Issue 37, item 8: against a ClickHouse that accepts connections and never answers, the tracer
// took 45 s to exit (stop() waited out the background pass's 30 s request, then the last pass
// had 15 s more), past systemd's TimeoutStopSec=30. Shipping at exit now ends by one deadline,
// the request in flight included; what is left stays in the file (tests/bpf checks the same
// through `ingero trace`).
#include <gtest/gtest.h>

#include <chrono>

#include "fleet/shipper.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/silent_server.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Clock = std::chrono::steady_clock;

TEST(ShipExit, AStalledClickHouseCannotHoldTheExitPastItsDeadline) {
  SilentServer ch;
  std::string db = write_free_calls(temp_path("t.db"), 1000);
  auto ep = fleet::parse_endpoint("http://127.0.0.1:" + std::to_string(ch.port()) + "/ingero");
  ASSERT_TRUE(ep);
  auto shipper = fleet::Shipper::create(db, *ep);
  ASSERT_TRUE(shipper) << shipper.error().message;
  fleet::Shipper& s = **shipper;
  s.start();
  // The background pass is waiting on its first request (its timeout is 30 s).
  ASSERT_TRUE(ch.wait_for_request(std::chrono::seconds(30)));
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::seconds(2);
  s.set_deadline(deadline);
  s.stop();
  auto rep =
      s.drain(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  // The deadline and at most libcurl's once-a-second check of it; without the deadline, stop()
  // alone waits for the 30 s request timeout.
  EXPECT_LT(secs, 4.5) << "stopping took " << secs << " s";
  EXPECT_FALSE(rep.caught_up);
  // Nothing reached ClickHouse: every row of the file is left for the next start.
  EXPECT_EQ(rep.unshipped, uint64_t(query_int(db, "SELECT count(*) FROM events") +
                                    query_int(db, "SELECT count(*) FROM sessions") +
                                    query_int(db, "SELECT count(*) FROM process_names")));
  EXPECT_EQ(rep.last_error, "ClickHouse at http://127.0.0.1:" + std::to_string(ch.port()) +
                                "/ingero: no complete answer before the time allowed ran out");
}

// A deadline already past: nothing is sent, and the failure says why.
TEST(ShipExit, NoRequestStartsPastTheDeadline) {
  SilentServer ch;
  auto ep = fleet::parse_endpoint("http://127.0.0.1:" + std::to_string(ch.port()) + "/ingero");
  ASSERT_TRUE(ep);
  fleet::ClickHouseClient c(*ep);
  c.set_deadline(Clock::now());
  auto t0 = Clock::now();
  auto r = c.execute("SELECT 1");
  ASSERT_FALSE(r);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  EXPECT_NE(r.error().message.find("not sent, the time allowed ran out"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(c.last_failure(), fleet::Failure::kUnreachable);
  // Cleared, a request goes out again (and times out on its own terms).
  c.clear_deadline();
  c.set_request_timeout_ms(300);
  r = c.execute("SELECT 1");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no complete answer within 300 ms"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(c.last_failure(), fleet::Failure::kAmbiguous);
}

}  // namespace
}  // namespace ingero::test

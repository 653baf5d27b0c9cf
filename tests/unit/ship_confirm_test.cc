// Issue 37, item 6: an endpoint that answered 200 with an empty body made the tracer fold
// 301,159 launches that existed nowhere as rows: folding waits for the shipper's
// shipped-through id, which advanced on any 200. A batch now counts only once ClickHouse
// confirms it holds it (fleet/ship_confirm.h); against endpoints that do not, nothing counts
// as shipped, the failure is said, and nothing can be folded. (tests/fleet checks the same
// against a real ClickHouse, and through `ingero trace`.)
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fleet/shipper.h"
#include "store/trace_writer.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/launch_trace.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// 2000 launches of one thread, 10 us apart, folded as they close (the way `ingero trace`
// writes): most of them go into runs once their blocks are folded for good.
std::string launches(int n) {
  std::string path = temp_path("launches.db");
  write_launch_trace(path, n, "node-c", 1'775'000'000'000'000'000);
  return path;
}

// What the tracer would fold for good with this shipper (app/trace_periodic.cc): the calls of
// the blocks whose ids are all at or below its shipped-through id, whatever their age.
uint64_t fold_as_the_tracer_would(const std::string& path, int64_t through) {
  auto w = store::TraceWriter::open(path);
  EXPECT_TRUE(w) << w.error().message;
  auto n = (*w)->fold_blocks(INT64_MAX, through);
  EXPECT_TRUE(n) << n.error().message;
  return n ? *n : 0;
}

// One line of system.columns (the others are ALTERed in, answered with an empty body).
// system.columns' answer: table, column, type, and whether the table is a view.
const char* const kOneColumn = "events\tsrc_id\tUInt64\t0\n";

// What an empty ClickHouse answers the shipper's reads (in the request's target or body):
// counts and maxima 0, the tables' columns one, and "" to DDL, INSERTs and the GROUP BY reads.
std::string as_empty_clickhouse(const std::string& target, const std::string& body) {
  for (const std::string* q : {&target, &body}) {
    if (q->find("SELECT max(") != std::string::npos ||
        q->find("SELECT uniqExact(") != std::string::npos ||
        q->find("FROM system.processes") != std::string::npos)
      return "0\n";
    if (q->find("FROM system.columns") != std::string::npos) return kOneColumn;
  }
  return "";
}

fleet::ShipperOptions quick(std::vector<std::string>& said) {
  fleet::ShipperOptions o;
  o.backoff_min_ms = o.backoff_max_ms = 50;
  o.log = [&](const std::string& m) { said.push_back(m); };
  return o;
}

// A shipper whose background loop the test steps, pass by pass: after a failed pass the loop
// waits out a backoff of 10 minutes, which stop() ends. No clock decides how many passes run,
// or cuts one short: a drain's budget could end its last pass between an INSERT (counted by
// the server) and its read-back, or in any request, and the last error would be the budget's.
fleet::ShipperOptions stepped(std::vector<std::string>& said) {
  fleet::ShipperOptions o = quick(said);
  o.backoff_min_ms = o.backoff_max_ms = 600'000;
  return o;
}

// Runs exactly `passes` passes of the background loop of `s` (made with stepped()), each of
// which fails: starts the loop, waits for the pass's failure, and stops the loop in its
// backoff. The wait is not a verdict: stop() lets a pass in flight run to its end.
void run_failing_passes(fleet::Shipper& s, uint64_t passes) {
  for (uint64_t i = 0; i < passes; ++i) {
    const uint64_t before = s.totals().failures;
    s.start();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (s.totals().failures == before && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    s.stop();
    ASSERT_EQ(s.totals().failures, before + 1) << "pass " << i + 1 << " of " << passes;
  }
}

// What is left, and why, once the passes have run: a drain with no time of its own (the
// tracer's exit when its time is spent) reports the background pass's failure.
fleet::DrainReport left_after_the_passes(fleet::Shipper& s) {
  return s.drain(std::chrono::milliseconds(0));
}

TEST(ShipConfirm, AnEndpointThatAnswersEverythingWithAnEmptyBodyGetsNothingFolded) {
  FakeHttpServer ok([](const std::string&, const std::string&) { return std::string(); });
  std::string db = launches(2000);
  std::vector<std::string> said;
  auto ep = fleet::parse_endpoint(ok.url("ingero"));
  ASSERT_TRUE(ep);
  {
    auto s = fleet::Shipper::create(db, *ep, stepped(said));
    ASSERT_TRUE(s) << s.error().message;
    ASSERT_NO_FATAL_FAILURE(run_failing_passes(**s, 3));  // tried, and retried twice
    auto rep = left_after_the_passes(**s);
    EXPECT_FALSE(rep.caught_up);
    EXPECT_EQ((*s)->events_shipped_through(), 0);
    EXPECT_EQ((*s)->totals().rows, 0u);
    // Every row of the file is still to ship: the launches, the session, the process name.
    EXPECT_EQ(rep.unshipped, uint64_t(query_int(db, "SELECT count(*) FROM events") + 1));
    EXPECT_EQ((*s)->totals().failures, 3u);
    EXPECT_EQ(ok.count("FROM system.columns"), 3u);  // asked again on each pass
    const std::string expected =
        "ClickHouse at " + ok.url("ingero") +
        " lists no column of the tables it was just asked to create (its answer to the read of "
        "system.columns was empty): nothing it says about what it stores can be trusted (is "
        "this a ClickHouse server, or something in front of it that does not pass answers?)";
    EXPECT_EQ(rep.last_error, expected);
    // Said once, however often it is retried.
    EXPECT_EQ(said,
              std::vector<std::string>{expected + "; the rows stay in " + db + " and are retried"});
  }
  EXPECT_EQ(ok.inserts(), 0u);  // nothing is sent where nothing can be confirmed
  EXPECT_EQ(fold_as_the_tracer_would(db, 0), 0u);
  // The same file folds when everything is shipped: the check above can fail.
  EXPECT_GT(fold_as_the_tracer_would(db, INT64_MAX), 1000u);
}

// A server that lists the tables' columns, and answers everything else with an empty body:
// the first read that ClickHouse always answers with one row says it (the count of the file's
// inserts still running, asked before the resume point: ship_state.h).
TEST(ShipConfirm, AnEmptyAnswerToAReadOfOneRowIsAnError) {
  FakeHttpServer ok([](const std::string& target, const std::string& body) -> std::string {
    for (const std::string* q : {&target, &body})
      if (q->find("FROM system.columns") != std::string::npos) return kOneColumn;
    return "";
  });
  std::string db = launches(2000);
  std::vector<std::string> said;
  auto ep = fleet::parse_endpoint(ok.url("ingero"));
  ASSERT_TRUE(ep);
  auto s = fleet::Shipper::create(db, *ep, stepped(said));
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_NO_FATAL_FAILURE(run_failing_passes(**s, 2));
  auto rep = left_after_the_passes(**s);
  EXPECT_FALSE(rep.caught_up);
  EXPECT_EQ((*s)->events_shipped_through(), 0);
  const std::string expected =
      "ClickHouse at " + ok.url("ingero") +
      " answered 'SELECT count() FROM system.processes WHERE substring(query_id, 1, 32) = "
      "'ingero-ship-1775000000000000000-'' with no row (an empty body) "
      "where ClickHouse gives one: nothing it says about what it stores can be trusted "
      "(is this a ClickHouse server, or something in front of it that does not pass "
      "answers?)";
  EXPECT_EQ(rep.last_error, expected);
  EXPECT_EQ(said,
            std::vector<std::string>{expected + "; the rows stay in " + db + " and are retried"});
  EXPECT_EQ((*s)->totals().failures, 2u);
  EXPECT_EQ(ok.inserts(), 0u);
}

// Reads answered as an empty ClickHouse would answer them, inserts answered 200 and dropped.
TEST(ShipConfirm, InsertsAnswered200ButNotStoredAreNotCountedAsShipped) {
  FakeHttpServer ok(as_empty_clickhouse);
  std::string db = launches(2000);
  std::vector<std::string> said;
  auto ep = fleet::parse_endpoint(ok.url("ingero"));
  ASSERT_TRUE(ep);
  {
    auto s = fleet::Shipper::create(db, *ep, stepped(said));
    ASSERT_TRUE(s) << s.error().message;
    ASSERT_NO_FATAL_FAILURE(run_failing_passes(**s, 3));
    auto rep = left_after_the_passes(**s);
    EXPECT_FALSE(rep.caught_up);
    EXPECT_EQ(rep.unshipped, uint64_t(query_int(db, "SELECT count(*) FROM events") + 1));
    EXPECT_EQ((*s)->events_shipped_through(), 0);
    auto t = (*s)->totals();
    EXPECT_EQ(t.rows, 0u);
    EXPECT_EQ(t.batches, 0u);
    // One INSERT a pass (the session: nothing after it is sent until it is confirmed), each
    // answered with success, read back, not found, and counted as unconfirmed.
    EXPECT_EQ(ok.inserts(), 3u);
    EXPECT_EQ(ok.count("SELECT uniqExact("), 3u);
    EXPECT_EQ(t.unconfirmed, 3u);
    EXPECT_EQ(t.failures, 3u);
    const std::string expected = "ClickHouse at " + ok.url("ingero") +
                                 " answered the INSERT of 1 rows into sessions with success, but "
                                 "holds 0 of them: not counted as shipped";
    EXPECT_EQ(rep.last_error, expected);
    EXPECT_EQ(said,
              std::vector<std::string>{expected + "; the rows stay in " + db + " and are retried"});
  }
  EXPECT_EQ(fold_as_the_tracer_would(db, 0), 0u);
}

// `ingero ship` against the same endpoint, which stops answering once it has answered the
// first read-back: exactly one INSERT is answered with success and not found, and the next
// pass waits on a request until --timeout ends it. Nothing counted, exit 1, and it says why.
// (--timeout only has to outlast the start, the first pass and the 0.5 s backoff after it.)
TEST(ShipConfirm, ShipSaysWhatWasAnsweredButNotStored) {
  FakeHttpServer* self = nullptr;
  FakeHttpServer ok([&self](const std::string& target, const std::string& body) -> std::string {
    if ((target + body).find("SELECT uniqExact(") != std::string::npos) self->stop_answering();
    return as_empty_clickhouse(target, body);
  });
  self = &ok;
  std::string db = launches(2000);
  auto r = run_ingero({"ship", "--db", db, "--clickhouse", ok.url("ingero"), "--timeout", "5s"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_EQ(ok.inserts(), 1u);
  EXPECT_EQ(ok.count("SELECT uniqExact("), 1u);
  EXPECT_EQ(ok.unanswered(), 1u);  // the next pass's first request
  const std::string head =
      "shipped 0 rows of " + db + " to " + ok.url("ingero") + " in 0 inserts (";
  EXPECT_EQ(r.out.rfind(head, 0), 0u) << r.out;
  const std::string tail =
      " KiB); 1 inserts answered with success were not in ClickHouse when read back and are "
      "not counted; " +
      std::to_string(query_int(db, "SELECT count(*) FROM events") + 1) + " rows left\n";
  EXPECT_TRUE(r.out.size() >= tail.size() &&
              r.out.compare(r.out.size() - tail.size(), tail.size(), tail) == 0)
      << r.out;
  EXPECT_EQ(r.err.rfind("ingero ship: ClickHouse at " + ok.url("ingero") +
                            " answered the INSERT of 1 rows into sessions with success, but "
                            "holds 0 of them: not counted as shipped; the rows stay in " +
                            db + " and are retried\n",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(fold_as_the_tracer_would(db, 0), 0u);
}

// Found by a hostile-testing helper (helper-78): a read-back that got no answer (a server that
// stalled right after the INSERT) was said to have found the rows missing ("were not in
// ClickHouse when read back"), though they were stored. ship says it could not read them back.
TEST(ShipConfirm, ShipSaysWhatItCouldNotReadBack) {
  FakeHttpServer* self = nullptr;
  FakeHttpServer ok([&self](const std::string& target, const std::string& body) -> std::string {
    // This INSERT is answered; its read-back, and nothing after it, is not.
    if (target.find("query=INSERT") != std::string::npos) self->stop_answering();
    return as_empty_clickhouse(target, body);
  });
  self = &ok;
  std::string db = launches(2000);
  auto r = run_ingero({"ship", "--db", db, "--clickhouse", ok.url("ingero"), "--timeout", "4s"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_EQ(ok.inserts(), 1u);
  EXPECT_EQ(ok.count("SELECT uniqExact("), 1u);
  EXPECT_EQ(r.out.find("were not in ClickHouse when read back"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; 1 inserts answered with success could not be read back (no answer) and "
                       "are not counted: a rerun ships what ClickHouse lacks; "),
            std::string::npos)
      << r.out;
}

// A reader that answers reads as an empty ClickHouse would, a read-back with 0 rows found, and
// an INSERT with 200 and, where `written` is given, an X-ClickHouse-Summary saying so.
FakeHttpServer summarising(const std::string& written) {
  return FakeHttpServer(as_empty_clickhouse, [written](const std::string& target) -> std::string {
    if (target.find("query=INSERT INTO") == std::string::npos) return "";
    return "X-ClickHouse-Summary: {\"read_rows\":\"0\",\"read_bytes\":\"0\","
           "\"written_rows\":\"" +
           written + "\",\"written_bytes\":\"0\",\"total_rows_to_read\":\"0\"}\r\n";
  });
}

// A ClickHouse that says what it wrote (X-ClickHouse-Summary, sent by versions after 18.16)
// needs no read-back when it wrote the whole batch.
TEST(ShipConfirm, ASummaryThatCoversTheBatchConfirmsItWithoutAReadBack) {
  FakeHttpServer ch = summarising("1000000");
  std::string db = launches(2000);
  std::vector<std::string> said;
  auto ep = fleet::parse_endpoint(ch.url("ingero"));
  ASSERT_TRUE(ep);
  auto s = fleet::Shipper::create(db, *ep, quick(said));
  ASSERT_TRUE(s) << s.error().message;
  auto rep = (*s)->drain(std::chrono::seconds(60));  // ends once caught up
  EXPECT_TRUE(rep.caught_up) << rep.last_error;
  EXPECT_EQ((*s)->events_shipped_through(), query_int(db, "SELECT max(id) FROM events"));
  auto t = (*s)->totals();
  EXPECT_EQ(t.rows, uint64_t(query_int(db, "SELECT count(*) FROM events") +
                             query_int(db, "SELECT count(*) FROM sessions") +
                             query_int(db, "SELECT count(*) FROM process_names")));
  EXPECT_EQ(t.unconfirmed, 0u);
  EXPECT_EQ(t.read_back, 0u);
  EXPECT_EQ(t.confirmed_by_summary, t.batches);
  EXPECT_EQ(t.batches, ch.inserts());
  EXPECT_EQ(ch.count("SELECT uniqExact("), 0u);
  EXPECT_TRUE(said.empty());
}

// A summary of fewer rows than were sent is not taken as a failure by itself: the batch is
// read back, and counts only if ClickHouse holds it (here it does not).
TEST(ShipConfirm, ASummaryOfFewerRowsIsReadBackAndNotCounted) {
  FakeHttpServer ch = summarising("0");
  std::string db = launches(2000);
  std::vector<std::string> said;
  auto ep = fleet::parse_endpoint(ch.url("ingero"));
  ASSERT_TRUE(ep);
  auto s = fleet::Shipper::create(db, *ep, stepped(said));
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_NO_FATAL_FAILURE(run_failing_passes(**s, 2));
  auto rep = left_after_the_passes(**s);
  EXPECT_FALSE(rep.caught_up);
  EXPECT_EQ((*s)->events_shipped_through(), 0);
  auto t = (*s)->totals();
  EXPECT_EQ(t.rows, 0u);
  EXPECT_EQ(t.confirmed_by_summary, 0u);
  EXPECT_EQ(ch.inserts(), 2u);
  EXPECT_EQ(t.unconfirmed, 2u);
  EXPECT_EQ(ch.count("SELECT uniqExact("), 2u);
  EXPECT_EQ(rep.last_error, "ClickHouse at " + ch.url("ingero") +
                                " answered the INSERT of 1 rows into sessions with success, but "
                                "holds 0 of them: not counted as shipped");
}

TEST(ShipConfirm, WrittenRowsAreReadFromTheSummaryOrNotAtAll) {
  using fleet::summary_written_rows;
  EXPECT_EQ(summary_written_rows("{\"read_rows\":\"0\",\"written_rows\":\"2\",\"x\":\"1\"}"),
            std::optional<uint64_t>(2));
  EXPECT_EQ(summary_written_rows("{\"written_rows\": 17}"), std::optional<uint64_t>(17));
  EXPECT_EQ(summary_written_rows(""), std::nullopt);
  EXPECT_EQ(summary_written_rows("{\"read_rows\":\"5\"}"), std::nullopt);
  EXPECT_EQ(summary_written_rows("{\"written_rows\":\"\"}"), std::nullopt);
  EXPECT_EQ(summary_written_rows("{\"written_rows\":\"12x\"}"), std::nullopt);
  EXPECT_EQ(summary_written_rows("{\"written_rows\":\"99999999999999999999999\"}"), std::nullopt);
}

}  // namespace
}  // namespace ingero::test

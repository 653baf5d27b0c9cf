// How many events a window of a file holds (SqlTraceSource::event_count, what explain prints
// as the window's events): calls and host events that start in it, exactly, whatever the
// window cuts; host blocks wholly inside it are counted by their entries and never read.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/sqlite_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

// 10,000 switches 10 us apart (three host blocks of 4,096) and a launch every 25 us beside
// them.
std::vector<Event> switches_and_launches() {
  std::vector<Event> out;
  for (uint64_t i = 0; i < 10'000; ++i) {
    out.push_back(switch_out(1'000'000 + i * 10 * kUs, 4 * kUs, i % 5 == 0));
    if (i % 5 == 2) out.push_back(launch(1'000'000 + i * 10 * kUs + 3 * kUs, 2 * kUs));
  }
  return out;
}

uint64_t counted(const std::string& path, const engine::Window& w, std::string* error = nullptr) {
  auto reader = TraceReader::open(path, app::builtin_views());
  EXPECT_TRUE(reader);
  if (!reader) return 0;
  SqlTraceSource s(**reader);
  uint64_t n = s.event_count(w);
  if (error)
    *error = s.error();
  else
    EXPECT_EQ(s.error(), "");
  return n;
}

// The events of `all` that start in [from, to] (mono ns), by brute force.
uint64_t starting_in(const std::vector<Event>& all, uint64_t from, uint64_t to) {
  uint64_t n = 0;
  for (const Event& e : all) n += e.ts_ns >= from && e.ts_ns <= to;
  return n;
}

engine::Window window(uint64_t from, uint64_t to) {
  engine::Window w;
  w.from_ns = int64_t(from) + kOffset;
  w.to_ns = int64_t(to) + kOffset;
  return w;
}

TEST(EventCount, AWindowCountsWhatStartsInItWhateverItCuts) {
  std::vector<Event> events = switches_and_launches();
  std::string path = write_trace("event-count.db", events);
  ASSERT_EQ(test::query_int(path, "SELECT count(*) FROM host_store"), 3);
  EXPECT_EQ(counted(path, engine::Window{}), events.size());
  const uint64_t t0 = 1'000'000, end = t0 + 10'000 * 10 * kUs;
  struct Cut {
    uint64_t from, to;
  };
  for (Cut c : {Cut{t0, end},                                     // the whole trace
                Cut{t0 - kMs, end + kMs},                         // around it
                Cut{t0 + 123 * kUs, end - 77 * kUs},              // into the first and last blocks
                Cut{t0 - kMs, t0 + 5000 * 10 * kUs},              // ending in the middle block
                Cut{t0 + 4096 * 10 * kUs, t0 + 8191 * 10 * kUs},  // the middle block exactly
                Cut{t0 + 4096 * 10 * kUs + 1, t0 + 8191 * 10 * kUs - 1},  // inside it
                Cut{t0 + 20 * kUs, t0 + 20 * kUs},                        // one instant: one switch
                Cut{end + kMs, end + 2 * kMs}})                           // after it: none
    EXPECT_EQ(counted(path, window(c.from, c.to)), starting_in(events, c.from, c.to))
        << c.from - t0 << " .. " << int64_t(c.to - t0);
  // Another node's window holds none of them.
  engine::Window other = window(t0, end);
  other.node = "n2";
  EXPECT_EQ(counted(path, other), 0u);
}

TEST(EventCount, HostBlocksInsideTheWindowAreCountedByTheirEntries) {
  std::vector<Event> events = switches_and_launches();
  std::string path = write_trace("event-count-entries.db", events);
  const uint64_t t0 = 1'000'000, end = t0 + 10'000 * 10 * kUs;
  // Cutting into the first and last blocks, holding the middle one whole.
  engine::Window w = window(t0 + 123 * kUs, end - 77 * kUs);
  uint64_t want = starting_in(events, t0 + 123 * kUs, end - 77 * kUs);
  ASSERT_EQ(counted(path, w), want);
  // The middle block's events damaged: its entry still counts them, and nothing reads them.
  {
    auto db = Db::open(path, Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->exec(
        "UPDATE host_store SET data = x'00' WHERE id = (SELECT id FROM host_store ORDER BY "
        "first_ts LIMIT 1 OFFSET 1)"));
  }
  EXPECT_EQ(counted(path, w), want);
  // A window across it must read them, and says it could not.
  std::string error;
  counted(path, window(t0 + 5000 * 10 * kUs, end), &error);
  EXPECT_NE(error.find("host block"), std::string::npos) << error;
}

// A window before or after the trace: no event, and a span that is an instant at its edge, not
// one from the trace's start to the window's end (explain printed "02:22:21 -> 02:00:00").
TEST(EventCount, AWindowOutsideTheTraceHasNoEventsAndAnEmptySpan) {
  std::vector<Event> events = switches_and_launches();
  std::string path = write_trace("event-count-outside.db", events);
  const uint64_t t0 = 1'000'000, end = t0 + 10'000 * 10 * kUs;
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource s(**reader);
  engine::Window before = window(0, t0 / 2), after = window(end + kMs, end + 2 * kMs);
  engine::Analysis a = engine::analyze(s, before);
  EXPECT_EQ(a.events, 0u);
  EXPECT_EQ(a.span, std::make_pair(before.to_ns, before.to_ns));
  a = engine::analyze(s, after);
  EXPECT_EQ(a.events, 0u);
  EXPECT_EQ(a.span, std::make_pair(after.from_ns, after.from_ns));
  after.to_ns = INT64_MAX;  // --from alone
  a = engine::analyze(s, after);
  EXPECT_EQ(a.span, std::make_pair(after.from_ns, after.from_ns));
  EXPECT_EQ(s.error(), "");
}

}  // namespace
}  // namespace ingero::store

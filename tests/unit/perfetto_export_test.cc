// `ingero export --format perfetto`: what the timeline draws, checked against the file's rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::test {
namespace {

using namespace store::tiers_fixture;

// Found by a hostile-testing helper (helper-79): export read the engine's folded form, where a
// run of launches is spread evenly from its first start to its last end, while the file still
// held each launch's own start (its full rows, kept for --full-rows): 1,583,481 of 2,090,002
// slices of a trace were drawn up to 500 us from their call, one of them while its thread was
// off its CPU. And host intervals were complete events on the thread's track, crossing its
// calls rather than nesting in them, which Perfetto drops (an NCCL init in an H100 trace).
TEST(PerfettoExport, CallsAtTheirRecordedStartsAndHostIntervalsOnTracksOfTheirOwn) {
  // 600 launches of 5-6 us on one thread, 10 then 40 us apart by turns: runs fold them, and a
  // run's calls read back spread evenly would start every 25 us. A switch out crosses two.
  std::vector<hal::Event> events;
  uint64_t t = 1'000'000;
  for (int i = 0; i < 600; ++i) {
    hal::Event e = launch(t, 5 * kUs + uint64_t(i % 10) * 100);  // most under p95: foldable
    e.has_ret = true;
    events.push_back(e);
    t += (i % 2 ? 40 : 10) * kUs;
  }
  hal::Event sw = switch_out(1'000'000 + 12 * kUs, 30 * kUs, true);  // from the 2nd into the 3rd
  events.push_back(sw);
  std::sort(events.begin(), events.end(),
            [](const hal::Event& a, const hal::Event& b) { return a.ts_ns < b.ts_ns; });
  std::string db = write_trace("perfetto-exact.db", events, /*folding=*/true), json, err;
  // The file folded them, and keeps their rows.
  ASSERT_GT(query_int(db, "SELECT count(*) FROM call_store WHERE run_data IS NOT NULL"), 0);
  ASSERT_EQ(query_int(db, "SELECT count(*) FROM call_store WHERE full IS NULL"), 0);
  ASSERT_EQ(run_command({INGERO_BIN, "export", "--db", db}, &json, &err), 0) << err;
  std::vector<double> starts;
  std::vector<nlohmann::json> host;
  for (const auto& e : nlohmann::json::parse(json)) {
    if (e.value("name", "") == "cudaLaunchKernel") {
      ASSERT_EQ(e["ph"], "X") << e.dump();
      starts.push_back(e["ts"].get<double>());
    } else if (e.value("name", "") == "sched_switch") {
      host.push_back(e);
    }
  }
  ASSERT_EQ(starts.size(), 600u);
  std::sort(starts.begin(), starts.end());
  const int64_t first = query_int(db, "SELECT min(ts_ns) FROM calls");
  for (size_t i = 0; i < starts.size(); ++i) {
    const double want = double(first) / 1000.0 + double((i / 2) * 50 + (i % 2) * 10);
    ASSERT_NEAR(starts[i], want, 0.5) << "launch " << i;  // ts: double us, 0.25 us apart here
  }
  // The switch: a begin and an end of one id, on its process's track, 30 us apart.
  ASSERT_EQ(host.size(), 2u) << json.substr(0, 2000);
  EXPECT_EQ(host[0]["ph"], "b");
  EXPECT_EQ(host[1]["ph"], "e");
  EXPECT_EQ(host[0]["id"], host[1]["id"]);
  EXPECT_EQ(host[0]["pid"], host[1]["pid"]);
  EXPECT_EQ(host[0]["cat"], "host");
  EXPECT_NEAR(host[1]["ts"].get<double>() - host[0]["ts"].get<double>(), 30.0, 0.5);
  EXPECT_FALSE(host[0].contains("dur"));
}

}  // namespace
}  // namespace ingero::test

// Folded runs of calls seen at entry only (engine/call_run.h, store/untimed_durations.h): a
// run's untimed calls read back last, at their op's mean, marked untimed; its timed calls keep
// their own extremes, and only they are latency (quantiles, tails, the calls kept).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/op_stats.h"
#include "tests/support/forwarding_source.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

TEST(UntimedRuns, ARunsUntimedCallsComeLastAtTheirMeanAndMarkedUntimed) {
  engine::CallRun r;
  r.ts_ns = 1000;
  r.calls = 5;
  r.untimed = 3;
  r.untimed_ns = 100;
  r.timed_min_ns = 50;
  r.timed_max_ns = 900;
  r.sum_ns = 50 + 900 + 3 * 100;
  r.min_ns = 50;
  r.max_ns = 900;
  r.span_ns = r.sum_ns + 40;                                    // 10 ns between calls
  std::vector<std::tuple<uint64_t, uint64_t, bool, bool>> got;  // start, duration, timed, ret
  r.for_each_call([&](const Event& e) { got.push_back({e.ts_ns, e.dur_ns, e.timed, e.has_ret}); });
  using T = std::tuple<uint64_t, uint64_t, bool, bool>;
  EXPECT_EQ(got, (std::vector<T>{{1000, 50, true, true},
                                 {1060, 900, true, true},
                                 {1970, 100, false, false},
                                 {2080, 100, false, false},
                                 {2190, 100, false, false}}));
  EXPECT_EQ(r.last_start(), 2190);
  EXPECT_EQ(r.timed(), 2u);
  EXPECT_EQ(r.timed_max(), 900u);
  size_t timed = 0;
  r.for_each_timed_call([&](const Event& e) {
    EXPECT_TRUE(e.timed);
    ++timed;
  });
  EXPECT_EQ(timed, 2u);
  // None timed: every call at the mean, none a latency.
  r.untimed = 5;
  r.sum_ns = 500;
  r.min_ns = r.max_ns = 100;
  r.timed_min_ns = r.timed_max_ns = 0;
  EXPECT_EQ(r.timed_max(), 0u);
  r.for_each_call([&](const Event& e) {
    EXPECT_FALSE(e.timed);
    EXPECT_EQ(e.dur_ns, 100u);
  });
  r.for_each_timed_call([&](const Event&) { ADD_FAILURE() << "no call is timed"; });
}

TEST(UntimedRuns, SpansWalkTheSameCallsAsTheEventsWhateverTheirTimedShare) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 2000; ++i) {
    engine::CallRun r;
    r.ts_ns = int64_t(rng() % 1000000);
    r.calls = 1 + rng() % 40;
    r.untimed = rng() % (r.calls + 1);
    uint64_t timed = r.calls - r.untimed;
    r.untimed_ns = 100 + rng() % 3000;
    uint64_t lo = 100 + rng() % 1000, hi = lo + rng() % 5000, sum = 0;
    if (timed) {
      sum = random_run_total(rng, timed, lo, hi);
      if (timed == 1) hi = lo;
      r.timed_min_ns = lo;
      r.timed_max_ns = hi;
    }
    r.sum_ns = sum + r.untimed * r.untimed_ns;
    r.min_ns = timed ? std::min(lo, r.untimed ? r.untimed_ns : lo) : r.untimed_ns;
    r.max_ns = timed ? std::max(hi, r.untimed ? r.untimed_ns : hi) : r.untimed_ns;
    r.span_ns = r.sum_ns + (r.calls > 1 ? rng() % 3 * (rng() % 100000) : 0);
    std::vector<std::pair<int64_t, uint64_t>> spans, events;
    r.for_each_span([&](uint64_t, int64_t start, uint64_t dur) { spans.push_back({start, dur}); });
    uint64_t marked = 0, timed_sum = 0;
    r.for_each_call([&](const Event& e) {
      events.push_back({int64_t(e.ts_ns), e.dur_ns});
      EXPECT_EQ(e.dur_ns, r.duration(events.size() - 1));
      if (e.timed) {
        ++marked;
        timed_sum += e.dur_ns;
        EXPECT_GE(e.dur_ns, lo);
        EXPECT_LE(e.dur_ns, hi);
      }
    });
    ASSERT_EQ(spans, events) << i;
    EXPECT_EQ(marked, timed) << i;
    EXPECT_EQ(timed_sum, sum) << i;
    EXPECT_EQ(r.timed_max(), timed ? hi : 0) << i;
    EXPECT_EQ(spans.back().first, r.last_start());
    // start(k) is the walk's k-th start without the walk; first_from(t) the first at or after t.
    for (uint64_t k = 0; k < r.calls; ++k) ASSERT_EQ(r.start(k), spans[k].first) << i << " " << k;
    for (int64_t t :
         {spans.front().first - 1, spans.front().first, spans.front().first + 1, spans.back().first,
          spans.back().first + 1, spans.front().first + int64_t(rng() % (r.span_ns + 1))}) {
      uint64_t want = 0;
      while (want < r.calls && spans[want].first < t) ++want;
      EXPECT_EQ(r.first_from(t), want) << i << " t=" << t;
    }
    uint64_t total = 0;
    for (auto [start, dur] : spans) total += dur;
    EXPECT_EQ(total, r.sum_ns);
  }
}

// The training loop with three launches in four seen at entry only, as `ingero trace` records
// launches by default; those with an outcome (failed, preempted) were timed.
std::vector<Event> mostly_untimed(const Loop& l) {
  std::vector<Event> calls = l.calls;
  size_t i = 0;
  for (Event& e : calls)
    if (e.kind == EventKind::kLaunch) {
      bool outcome = e.ret != 0 || e.off_cpu_ns != 0;
      if (i++ % 4 != 3 && !outcome) e.timed = false;
    }
  return calls;
}

// A launch's slow timed calls lift its mean (which its untimed calls read back at) above its
// p95: the tails are of the timed launches only, folded or not, and the calls kept are those.
TEST(UntimedRuns, FoldedEstimatesAreNeverTailsOrKept) {
  Loop l = training_loop(200);
  std::vector<Event> calls = mostly_untimed(l);
  std::string path = copy_of(write_trace("untimed-runs-full.db", calls), "untimed-runs.db");
  FoldCount folded = fold_everything(path);
  ASSERT_GT(folded.runs, 400u);
  ASSERT_GT(test::query_int(path, "SELECT sum(calls - timed_calls) FROM call_runs"), 15000);
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource src(**reader);
  test::ForwardingSource by_call(src);
  auto whole = engine::compute_op_stats(src, {});
  auto slow = engine::compute_op_stats(by_call, {});
  ASSERT_EQ(src.error(), "");
  auto launches =
      std::find_if(whole.overall.begin(), whole.overall.end(),
                   [](const engine::OpStats& s) { return s.key.op == "cudaLaunchKernel"; });
  ASSERT_NE(launches, whole.overall.end());
  const engine::OpStats& s = *launches;
  uint64_t timed = 0, timed_sum = 0, tails = 0;
  for (const Event& e : calls)
    if (e.kind == EventKind::kLaunch && e.timed) {
      ++timed;
      timed_sum += e.dur_ns;
      if (e.dur_ns >= s.p95) ++tails;
    }
  // What makes the case: the estimates (the timed mean) are above the p95.
  ASSERT_GT(timed_sum / timed, s.p95);
  EXPECT_EQ(s.count, l.launches);
  EXPECT_EQ(s.tail_count, tails);
  EXPECT_LT(tails, timed / 10);
  auto same = std::find_if(slow.overall.begin(), slow.overall.end(),
                           [](const engine::OpStats& x) { return x.key.op == "cudaLaunchKernel"; });
  ASSERT_NE(same, slow.overall.end());
  EXPECT_EQ(std::tie(same->tail_count, same->tail_dur_ns, same->p95),
            std::tie(s.tail_count, s.tail_dur_ns, s.p95));
  // The calls kept for stacks are timed ones only (every launch was kept when estimates were
  // offered: 48,000).
  ASSERT_TRUE(whole.kept);
  uint64_t kept = 0;
  whole.kept->for_each([&](const engine::KeptCall& c) { kept += c.op == "cudaLaunchKernel"; });
  EXPECT_GE(kept, tails);
  EXPECT_LE(kept, timed);
}

}  // namespace
}  // namespace ingero::store

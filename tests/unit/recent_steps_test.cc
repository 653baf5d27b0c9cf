// The tracer's own analyses (the session's end, the live chains) give the step model only the
// last whole seconds of the window that hold at most a number of calls, so that the tracer's
// memory does not grow with the session (engine::EngineOptions::model_calls); the others give
// it a share of the machine's memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "app/session_chains.h"
#include "engine/thresholds_steps.h"
#include "hal/memory.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

struct Second {
  int64_t ts = 0;
  uint64_t calls = 0;
};

std::vector<Second> seconds(const std::string& path) {
  std::vector<Second> out;
  for (const auto& r : test::query_rows(
           path, "SELECT timestamp, sum(calls) FROM call_seconds GROUP BY 1 ORDER BY 1"))
    out.push_back({std::stoll(r[0]), std::stoull(r[1])});
  return out;
}

TEST(RecentSteps, TheLastSecondsThatHoldTheCapAreFoundFromTheSummaries) {
  std::string path = write_trace("recent-start.db", training_loop(300).calls);
  std::vector<Second> s = seconds(path);
  ASSERT_GE(s.size(), 4u);
  Read r = analyze(path);
  const engine::Window all;
  size_t n = s.size();
  uint64_t last_two = s[n - 1].calls + s[n - 2].calls;
  EXPECT_EQ(r.source->recent_start(all, last_two), s[n - 2].ts);
  EXPECT_EQ(r.source->recent_start(all, last_two - 1), s[n - 1].ts);
  EXPECT_EQ(r.source->recent_start(all, 1), s[n - 1].ts);  // the last second, over the cap
  uint64_t total = 0;
  for (const Second& x : s) total += x.calls;
  uint64_t counted = 0;
  for (const engine::OpStats& o : r.a.stats.per_process) counted += o.count;
  EXPECT_EQ(counted, total);  // 300 steps of 120 launches, a copy and a sync
  EXPECT_EQ(total, 300u * 122);
  EXPECT_EQ(r.source->recent_start(all, total), all.from_ns);  // everything fits
  engine::Window w;
  w.from_ns = s[1].ts;
  EXPECT_EQ(r.source->recent_start(w, total), w.from_ns);
  EXPECT_EQ(r.source->recent_start(w, s[n - 1].calls), s[n - 1].ts);
}

TEST(RecentSteps, OnlyTheStepModelIsLimitedToThem) {
  std::string path = write_trace("recent-model.db", training_loop(300).calls);
  std::vector<Second> s = seconds(path);
  size_t n = s.size();
  Read r = analyze(path);
  engine::EngineOptions eo;
  eo.model_calls = s[n - 1].calls + s[n - 2].calls;
  engine::Analysis recent = engine::analyze(*r.source, engine::Window{}, eo);
  // The op statistics cover the whole trace.
  EXPECT_EQ(recent.stats.per_process.at(0).count, r.a.stats.per_process.at(0).count);
  const engine::StepSeries &whole = r.a.steps.processes.at(0), &part = recent.steps.processes.at(0);
  EXPECT_EQ(whole.first_call_ns, r.a.steps.processes.at(0).first_call_ns);
  EXPECT_GE(part.first_call_ns, s[n - 2].ts);
  EXPECT_LT(part.first_call_ns, s[n - 2].ts + 1'000'000'000);
  EXPECT_EQ(part.last_call_ns, whole.last_call_ns);
  ASSERT_LT(part.steps.size(), whole.steps.size());
  ASSERT_GE(part.steps.size(), 20u);
  // A step of the recent part is the same step in the whole model.
  const engine::Step& mid = part.steps[part.steps.size() / 2];
  bool found = false;
  for (const engine::Step& st : whole.steps)
    if (st.start_ns == mid.start_ns) {
      found = true;
      EXPECT_EQ(std::tie(st.end_ns, st.launches, st.wait_ns, st.enqueue_ns, st.host_gap_ns),
                std::tie(mid.end_ns, mid.launches, mid.wait_ns, mid.enqueue_ns, mid.host_gap_ns));
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace ingero::store

namespace ingero::engine {
namespace {

// Other analyses (explain, report, the MCP tools) give the step model a share of the machine's
// memory: a model that stops before a fault does not find it.
TEST(RecentSteps, OtherAnalysesModelWithAShareOfTheMachinesMemory) {
  EXPECT_EQ(EngineOptions{}.model_bytes,
            hal::memory_share(hal::read_memory_info(), kMinModelledBytes, kMaxModelledBytes));
  EXPECT_EQ(hal::memory_share({}, kMinModelledBytes, kMaxModelledBytes), kMinModelledBytes);
  EXPECT_EQ(hal::memory_share({uint64_t(1) << 40, uint64_t(1) << 40}, kMinModelledBytes,
                              kMaxModelledBytes),
            kMaxModelledBytes);
  EXPECT_EQ(app::tracer_engine_options().model_bytes, 16'000'000u);  // the tracer's: bounded
}

}  // namespace
}  // namespace ingero::engine

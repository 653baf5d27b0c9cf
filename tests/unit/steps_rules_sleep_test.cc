// The step rules for time asleep in the host gaps: host_wait, and data_loader_starvation when
// the process forked workers it waits for; their severity bands (engine.md's step rules).
#include <gtest/gtest.h>

#include <set>

#include "engine/analysis.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

// 20 steps of 10 ms whose host gap (9.688 ms) holds `sleep` of interruptible sleep; with
// `workers`, the process forked a DataLoader worker first.
Analysis sleeping_loop(uint64_t sleep, bool workers) {
  Source s;
  loop(s, 20, 10 * kMs, 8 * kMs, false);
  // A step's calls run from 8 ms to 8.312 ms of its 10: the sleep starts after them.
  for (int i = 0; i < 20; ++i) s.offcpu(uint64_t(i) * 10 * kMs + 8400 * kUs, sleep, false, 1);
  if (workers) {
    Event f;
    f.ts_ns = 1;
    f.pid = f.tid = 1;
    f.vendor = "host";
    f.api = "kernel";
    f.op = "process_fork";
    f.kind = EventKind::kProcessFork;
    f.set(Field::kPeerPid, 7);
    f.set_peer_comm("pt_data_worker");
    s.host_.push_back(f);
  }
  return analyze(s, Window{});
}

const Chain* find(const Analysis& a, const std::string& id) {
  for (const Chain& c : a.chains)
    if (c.id == id) return &c;
  return nullptr;
}

// Asleep 10% of the step is worth a look, a quarter a bottleneck, half the bottleneck: LOW,
// MEDIUM, HIGH. Under a tenth, no chain. Without workers the fix is to find what it waits for.
TEST(StepRulesSleep, SleepInTheGapsIsHostWaitBandedByItsShare) {
  struct Case {
    uint64_t sleep;
    const char* share;
    Severity severity;
  };
  for (const Case& k :
       {Case{1500 * kUs, "15%", Severity::kLow}, Case{3 * kMs, "30%", Severity::kMedium},
        Case{6 * kMs, "60%", Severity::kHigh}}) {
    SCOPED_TRACE(k.share);
    auto a = sleeping_loop(k.sleep, false);
    const Chain* c = find(a, "host_wait:1");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->rule, "host_wait");
    EXPECT_EQ(c->severity, k.severity);
    EXPECT_EQ(c->summary, std::string("Host waiting: the GPU is idle \u2265 ") + k.share +
                              " of the step time while trainer (pid 1) sleeps before <module> "
                              "(train.py:35)");
    EXPECT_EQ(c->fixes, std::vector<std::string>{
                            "Find what the thread waits for before <module> (train.py:35) "
                            "(py-spy dump) and take it off the training path"});
  }
  EXPECT_EQ(find(sleeping_loop(900 * kUs, false), "host_wait:1"), nullptr);  // 9%
}

// With a worker process, a training thread asleep in the gaps is waiting for its batches:
// data-loader starvation, with the DataLoader's fixes.
TEST(StepRulesSleep, AsleepWithWorkersIsWaitingForThem) {
  auto a = sleeping_loop(9 * kMs, true);  // 90% of the step asleep, 7% on-CPU: under a tenth
  EXPECT_EQ(find(a, "host_wait:1"), nullptr);
  const Chain* c = find(a, "data_loader_starvation:1");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_EQ(
      c->summary,
      "Data-loader starvation: the GPU is idle \u2265 90% of the step time while trainer (pid "
      "1) sleeps before <module> (train.py:35) waiting for its 1 worker process(es)");
  EXPECT_EQ(c->fixes, std::vector<std::string>{"Add workers or prefetch deeper (num_workers, "
                                               "prefetch_factor, persistent_workers=True)"});
}

// A thread that builds part of each batch itself and sleeps on its workers for the rest is one
// starvation: one chain whose share is both, not two chains under one id (the trace's
// causal_chains keeps one row an id, so the second replaced the first, and the OTLP exporter
// took them for one chain changing severity).
TEST(StepRulesSleep, OnCpuStarvationAndWaitingForWorkersAreOneChain) {
  auto a = sleeping_loop(3 * kMs, true);
  std::multiset<std::string> ids;
  for (const Chain& c : a.chains) ids.insert(c.id);
  EXPECT_EQ(ids.count("data_loader_starvation:1"), 1u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
  const Chain* c = find(a, "data_loader_starvation:1");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_EQ(c->summary,
            "Data-loader starvation: the GPU is idle \u2265 96% of each 10.0ms step while trainer "
            "(pid 1) runs on-CPU before <module> (train.py:35) (67%) and sleeps waiting for its 1 "
            "worker process(es) (30%)");
  bool asleep_line = false;
  for (const auto& t : c->timeline)
    asleep_line |= t.detail == "3.0ms per step asleep, waiting for its 1 worker process(es)";
  EXPECT_TRUE(asleep_line);
  EXPECT_EQ(c->fixes.front(),
            "Add data workers or prefetch deeper (num_workers, prefetch_factor): its 1 worker "
            "process(es) do not keep up");
}

}  // namespace
}  // namespace ingero::engine

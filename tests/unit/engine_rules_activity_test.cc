// The activity rules' thresholds and severities (engine.md's rule table): graph re-capture,
// graphs never launched, a launch rate that collapses, a noisy neighbour. Through the replay
// path (tests/unit/engine_replay.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "engine/graphs.h"
#include "tests/unit/engine_replay.h"

namespace ingero::app {
namespace {

// A graph call of pid 100; `exec` its executable graph (cudaGraphExec_t).
Event graph_call(Replay& r, std::string_view op, EventKind k, uint64_t ts, uint64_t exec) {
  Event e = r.call(100, op, k, ts, 50 * kUs);
  if (exec) e.set(Field::kGraphExec, exec);
  return e;
}

// A capture, its instantiation as `exec`, and `launches` launches of it, 1 ms apart from `t`.
uint64_t capture_and_launch(Replay& r, uint64_t t, uint64_t exec, int launches) {
  r.add(graph_call(r, "cudaStreamBeginCapture", EventKind::kGraphBeginCapture, t, 0));
  r.add(graph_call(r, "cudaStreamEndCapture", EventKind::kGraphEndCapture, t + 100 * kUs, 0));
  r.add(graph_call(r, "cudaGraphInstantiate", EventKind::kGraphInstantiate, t + 200 * kUs, exec));
  for (int i = 0; i < launches; ++i)
    r.add(
        graph_call(r, "cudaGraphLaunch", EventKind::kGraphLaunch, t + uint64_t(i + 1) * kMs, exec));
  return t + uint64_t(launches + 1) * kMs;
}

// mcp.md: graph_frequency's timeline has at most 60 buckets, 1 s doubled until they fit, and
// every launch is in one of them. Launches from 1 s, one a second: 60 launches span 59.x s
// (60 buckets of 1 s); 600 span 599.x s (38 buckets of 16 s).
TEST(EngineRulesActivity, GraphTimelineHasAtMostSixtyBucketsHoldingEveryLaunch) {
  for (auto [launches, bucket_s, buckets] :
       {std::tuple{60, 1, 60}, std::tuple{600, 16, 38}, std::tuple{6000, 128, 47}}) {
    SCOPED_TRACE(launches);
    Replay r;
    r.add(graph_call(r, "cudaStreamBeginCapture", EventKind::kGraphBeginCapture, kMs, 0));
    r.add(graph_call(r, "cudaGraphInstantiate", EventKind::kGraphInstantiate, 2 * kMs, 1));
    for (int i = 0; i < launches; ++i)
      r.add(graph_call(r, "cudaGraphLaunch", EventKind::kGraphLaunch, uint64_t(i) * kS + 500 * kMs,
                       1));
    r.analyze();
    auto g = engine::compute_graphs(r.source(), engine::Window{});
    EXPECT_EQ(g.bucket_ns, int64_t(bucket_s) * int64_t(kS));
    EXPECT_EQ(g.timeline.size(), size_t(buckets));
    uint64_t sum = 0, captures = 0;
    for (const auto& b : g.timeline) {
      sum += b.launches;
      captures += b.captures;
    }
    EXPECT_EQ(sum, uint64_t(launches));
    EXPECT_EQ(captures, 1u);
  }
}

// Captures after the first graph launch: 4 are warm-up, 5 a storm (MEDIUM), 20 HIGH.
TEST(EngineRulesActivity, GraphRecaptureIsBandedByTheCapturesAfterTheFirstLaunch) {
  for (int again : {4, 5, 20}) {
    SCOPED_TRACE(again);
    Replay r;
    uint64_t t = capture_and_launch(r, kMs, 1, 10);
    for (int i = 0; i < again; ++i) t = capture_and_launch(r, t, uint64_t(2 + i), 10);
    auto a = r.analyze();
    const engine::Chain* c = find(a, "graph_recapture");
    if (again == 4) {
      EXPECT_EQ(c, nullptr);
      continue;
    }
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->severity, again >= 20 ? Severity::kHigh : Severity::kMedium);
    EXPECT_EQ(c->summary.rfind("Graph re-capture storm: " + std::to_string(again) +
                                   " captures/instantiations after the first graph launch in "
                                   "pid 100 (",
                               0),
              0u)
        << c->summary;
    EXPECT_EQ(find(a, "graph_never_launched"), nullptr);  // every one was launched
  }
}

// Executable graphs instantiated and never launched: LOW, MEDIUM from 5. A failed
// instantiation made no graph and counts for nothing. The trace has no name for the process.
TEST(EngineRulesActivity, GraphsNeverLaunchedAreCountedAndBanded) {
  for (int unused : {1, 4, 5}) {
    SCOPED_TRACE(unused);
    Replay r;
    uint64_t t = capture_and_launch(r, kMs, 1, 10);
    for (int i = 0; i < unused; ++i)
      r.add(graph_call(r, "cudaGraphInstantiate", EventKind::kGraphInstantiate,
                       t + uint64_t(i) * kMs, uint64_t(100 + i)));
    Event failed =
        graph_call(r, "cudaGraphInstantiate", EventKind::kGraphInstantiate, t + 50 * kMs, 999);
    failed.ret = 1;  // cudaErrorInvalidValue
    r.add(failed);
    auto a = r.analyze();
    const engine::Chain* c = find(a, "graph_never_launched");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->severity, unused >= 5 ? Severity::kMedium : Severity::kLow);
    EXPECT_EQ(c->summary, std::to_string(unused) + " instantiated graph" +
                              (unused == 1 ? "" : "s") + " never launched in pid 100");
    EXPECT_EQ(c->explanation, std::to_string(unused + 1) + " graphs instantiated, 1 launched.");
  }
}

// 200 launches a second, then 3 s at 5 a second (a 98% drop) while the process keeps making
// other GPU calls, then 200 again. With the launching thread preempted through the collapse it
// lost the CPU: HIGH. With nothing on the host to explain it, or the thread asleep (a lock, a
// blocking call: not a lost CPU, though it was called one), MEDIUM.
TEST(EngineRulesActivity, ALaunchCollapseIsHighOnlyWhenTheHostExplainsIt) {
  for (int mode : {0, 1, 2}) {  // nothing, preempted, asleep
    bool preempted = mode == 1, asleep = mode == 2;
    SCOPED_TRACE(mode);
    Replay r;
    for (uint64_t s = 0; s < 12; ++s) {
      bool low = s >= 5 && s < 8;
      int n = low ? 5 : 200;
      for (int k = 0; k < n; ++k)
        r.add(r.call(100, "cudaLaunchKernel", EventKind::kLaunch,
                     s * kS + uint64_t(k) * (kS / uint64_t(n)), 10 * kUs));
      r.add(r.call(100, "cudaStreamSynchronize", EventKind::kSync, s * kS + 999 * kMs, 100 * kUs));
      if (low && (preempted || asleep))
        for (int k = 0; k < 10; ++k) {  // 600 ms of each second off-CPU
          r.add(r.switched_out(100, s * kS + uint64_t(k) * 100 * kMs + 1 * kMs, 60 * kMs, preempted,
                               200, "hog"));
        }
    }
    auto a = r.analyze();
    const engine::Chain* c = find(a, "launch_collapse");
    ASSERT_NE(c, nullptr);
    // The process is named where the trace has its name (here its scheduler events), and is
    // "pid 100" where it has none, never "pid 100 (pid 100)".
    EXPECT_EQ(c->summary, std::string("Kernel launch rate dropped 98% for 3 s (200 -> 5 "
                                      "launches/s) in ") +
                              (mode ? "trainer (pid 100)" : "pid 100"));
    EXPECT_EQ(c->severity, preempted ? Severity::kHigh : Severity::kMedium);
    EXPECT_EQ(c->root_cause.rfind(preempted ? "The thread feeding the GPU lost the CPU: 1.8s "
                                            : "The process stopped submitting work",
                                  0),
              0u)
        << c->root_cause;
  }
}

// A foreign cgroup's share of the GPU threads' preempted time: MEDIUM from 30% (and 100 ms),
// HIGH from 60% when it took at least a second. 86% of 300 ms is MEDIUM (tenants_test.cc); here
// the same share of 1.2 s.
TEST(EngineRulesActivity, ANoisyNeighbourIsHighFromItsShareAndASecond) {
  for (uint64_t each : {25 * kMs, 100 * kMs}) {
    SCOPED_TRACE(each);
    Replay r;
    for (int i = 0; i < 50; ++i)
      r.add(r.call(100, "cudaStreamSynchronize", EventKind::kSync, uint64_t(i) * 100 * kMs, kMs));
    for (int i = 0; i < 14; ++i) {  // 12 by the neighbour's cgroup, 2 by the trainer's own
      bool foreign = i < 12;
      Event e = r.switched_out(100, uint64_t(i) * 300 * kMs + 5 * kMs, each, true,
                               foreign ? 300 : 101, foreign ? "etl" : "sidecar");
      e.cgroup_id = 11;
      e.set(Field::kPeerCgroup, foreign ? 22 : 11);
      r.add(e);
    }
    auto a = r.analyze();
    const engine::Chain* c = find(a, "noisy_neighbour");
    ASSERT_NE(c, nullptr);
    EXPECT_NE(c->summary.find(" took 86% of the GPU threads' preempted time"), std::string::npos)
        << c->summary;
    EXPECT_EQ(c->severity, each == 100 * kMs ? Severity::kHigh : Severity::kMedium);
  }
}

// One thread blocking from two call sites is two callers: two repeated_sync chains under two
// ids (the id was pid:tid, so the store kept one of them). A thread that launches nothing
// itself is said in counts, not "every 0.0 launches".
TEST(EngineRulesActivity, RepeatedSyncIsOneChainACallSiteWithItsOwnId) {
  for (bool launches : {true, false}) {
    SCOPED_TRACE(launches);
    Replay r;
    for (int i = 0; i < 400; ++i) {
      uint64_t t = uint64_t(i) * 5 * kMs;
      if (launches) r.add(r.call(100, "cudaLaunchKernel", EventKind::kLaunch, t, 10 * kUs));
      Event e = r.call(100, "cudaStreamSynchronize", EventKind::kSync, t + 100 * kUs, 2 * kMs);
      e.stack_id = i % 2 ? 502 : 501;
      r.add(e);
    }
    auto a = r.analyze();
    std::vector<std::string> ids;
    for (const auto& c : a.chains)
      if (c.rule == "repeated_sync") {
        ids.push_back(c.id);
        EXPECT_EQ(c.root_cause, launches ? "Repeated synchronisation: the same caller waits for "
                                           "the GPU every 2.0 launches (the hidden "
                                           ".cpu()/.item()/.numpy() pattern)"
                                         : "Repeated synchronisation: the same caller waits for "
                                           "the GPU 200 times against 0 launches of its thread "
                                           "(the hidden .cpu()/.item()/.numpy() pattern)");
        EXPECT_EQ(c.explanation.rfind(launches ? "Between 400 launches of its thread, this "
                                                 "caller blocked 200 times for 400ms"
                                               : "With no launch on its thread, this caller "
                                                 "blocked 200 times for 400ms",
                                      0),
                  0u)
            << c.explanation;
      }
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids,
              (std::vector<std::string>{"repeated_sync:100:100:501", "repeated_sync:100:100:502"}));
  }
}

}  // namespace
}  // namespace ingero::app

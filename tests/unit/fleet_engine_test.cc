// The fleet rules on a synthetic 4-rank job over 3 nodes, through an in-memory multi-node
// TraceSource: clock offsets from collective completions, the cross-node straggler with its
// node and preemptor (and the wrong answer without the clock correction), the first mismatched
// or missing collective, and the MAD node-outlier rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/fleet.h"

namespace ingero::engine {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;

constexpr int64_t kUs = 1'000, kMs = 1'000'000;
constexpr int64_t kBase = 1'800'000'000'000'000'000;
constexpr uint64_t kHash = 0x8bb588989c296ba2;

class FleetSource : public TraceSource {
 public:
  void calls(const Window& w, const EventFn& fn) override { each(calls_, w, fn); }
  void host_events(const Window& w, const EventFn& fn) override { each(host_, w, fn); }
  std::vector<SnapshotRow> snapshots(const Window&) override { return {}; }
  std::map<uint32_t, ProcessActivity> process_activity(const Window&) override { return {}; }
  std::map<uint32_t, ProcessInfo> processes() override { return {}; }
  std::pair<int64_t, int64_t> time_span() override { return {kBase, kBase + 10'000 * kMs}; }
  uint64_t event_count(const Window&) override { return 0; }

  Event& add(const std::string& node, bool host, Event e) {
    auto& v = host ? host_[node] : calls_[node];
    v.push_back(e);
    return v.back();
  }
  std::map<std::string, std::vector<Event>> calls_, host_;

 private:
  static void each(std::map<std::string, std::vector<Event>>& m, const Window& w,
                   const EventFn& fn) {
    for (auto& [node, v] : m) {
      if (w.node && *w.node != node) continue;
      std::stable_sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.ts_ns < y.ts_ns; });
      for (const Event& e : v)
        if (w.contains(int64_t(e.ts_ns)) && (!w.pid || *w.pid == e.pid)) fn(e);
    }
  }
};

Event call(uint32_t pid, std::string_view op, EventKind k, int64_t ts, int64_t dur) {
  Event e;
  e.ts_ns = uint64_t(ts);
  e.dur_ns = uint64_t(dur);
  e.pid = e.tid = pid;
  e.vendor = "nvidia";
  e.api = k == EventKind::kSync ? "cuda_runtime" : "nccl";
  e.op = op;
  e.kind = k;
  e.has_ret = true;
  e.ret = 1;
  return e;
}

struct Job {
  std::map<uint64_t, std::string> node_of = {{0, "a"}, {1, "a"}, {2, "b"}, {3, "c"}};
  std::map<std::string, int64_t> skew = {{"b", 50 * kMs}};
  int steps = 40;
  int64_t late = 30 * kMs;  // rank 3's lag
  int mismatch_at = -1;     // rank 3 issues an all-gather there
  int rank2_stops_at = -1;  // rank 2 issues no collective from there on
  bool hog = true;
  bool syncs = true;  // a sync after each collective: where the host sees it complete

  void build(FleetSource& s) const {
    for (const auto& [rank, node] : node_of) {
      // Rank 2 on node b has the pid rank 1 has on node a: pids collide across nodes.
      uint32_t pid = rank == 2 ? 101 : uint32_t(100 + rank);
      int64_t off = skew.count(node) ? skew.at(node) : 0;
      Event init = call(pid, "ncclCommInitRank", EventKind::kCommInit, kBase + off, 2 * kMs);
      init.set(Field::kCommunicator, 0);
      init.set(Field::kRank, rank);
      init.set(Field::kNranks, 4);
      init.set(Field::kCommHash, kHash);
      s.add(node, false, init);
      for (int i = 0; i < steps; ++i) {
        int64_t step = kBase + 100 * kMs + i * 100 * kMs;
        int64_t arrive = step + (rank == 3 ? late : int64_t(rank) * 500 * kUs);
        int64_t done = step + late + 1 * kMs + int64_t(rank) * 20 * kUs;
        if (rank == 2 && rank2_stops_at >= 0 && i >= rank2_stops_at) {
          s.add(node, false,
                call(pid, "cudaStreamSynchronize", EventKind::kSync, done + off, 5 * kUs));
          continue;
        }
        bool gather = rank == 3 && i == mismatch_at;
        Event c = call(pid, gather ? "ncclAllGather" : "ncclAllReduce", EventKind::kCollective,
                       arrive + off, 10 * kUs);
        c.set(Field::kCommunicator, 0);
        c.set(Field::kCount, gather ? 1024 : 262144);
        c.set(Field::kDatatype, 7);
        s.add(node, false, c);
        if (syncs)
          s.add(node, false,
                call(pid, "cudaStreamSynchronize", EventKind::kSync, done + off, 5 * kUs));
        if (rank == 3 && hog) {
          Event sw;
          sw.ts_ns = uint64_t(arrive - 25 * kMs + off);
          sw.dur_ns = uint64_t(20 * kMs);
          sw.pid = sw.tid = pid;
          sw.vendor = "host";
          sw.api = "kernel";
          sw.op = "sched_switch";
          sw.kind = EventKind::kSchedSwitch;
          sw.set(Field::kFlags, 1);
          sw.set(Field::kState, 0);
          sw.set(Field::kPeerPid, 999);
          sw.set(Field::kPeerTid, 999);
          sw.set_peer_comm("fleet_hog");
          s.add(node, true, sw);
        }
      }
    }
  }
};

const std::vector<std::string> kNodes = {"a", "b", "c"};

struct Outcome {
  std::vector<NodeClock> clocks;
  FleetAnalysis fleet;
};

Outcome analyse(FleetSource& s, bool correct) {
  Outcome r;
  Window all;
  r.clocks = estimate_clock_offsets(gather_fleet_collectives(s, all, kNodes), kNodes);
  ClockShift shift = correct ? clock_shift(r.clocks) : ClockShift{};
  std::vector<Analysis> per(kNodes.size());
  std::map<std::string, const Analysis*> m;
  for (size_t i = 0; i < kNodes.size(); ++i) {
    Window w;
    w.node = kNodes[i];
    per[i] = analyze(s, w);
    m[kNodes[i]] = &per[i];
  }
  r.fleet = analyze_fleet(s, all, kNodes, m, correct ? r.clocks : std::vector<NodeClock>{}, shift);
  return r;
}

const Chain* find(const FleetAnalysis& f, const std::string& rule) {
  for (const auto& c : f.chains)
    if (c.rule == rule) return &c;
  return nullptr;
}

TEST(FleetEngine, ClockOffsetsFromCollectiveCompletions) {
  FleetSource s;
  Job().build(s);
  auto communicators = gather_fleet_collectives(s, Window{}, kNodes);
  ASSERT_EQ(communicators.size(), 1u);
  EXPECT_EQ(communicators[0].hash, kHash);
  EXPECT_EQ(communicators[0].ranks.size(), 4u);
  EXPECT_EQ(communicators[0].node_count(), 3u);
  EXPECT_TRUE(communicators[0].conflicts.empty());
  for (const auto& [rk, r] : communicators[0].ranks) {
    EXPECT_EQ(r.calls.size(), 40u) << rk;
    EXPECT_EQ(r.calls.back().seq, 39u);
  }
  auto clocks = estimate_clock_offsets(communicators, kNodes);
  ASSERT_EQ(clocks.size(), 3u);
  std::map<std::string, NodeClock> by;
  for (auto& c : clocks) by[c.node] = c;
  // Rank r sees each completion r x 20 us late (a node takes its ranks' lower median): a at
  // +0, b at +40 us + its 50 ms skew, c at +60 us. Centred on the median node, c.
  EXPECT_TRUE(by["c"].reference);
  EXPECT_EQ(by["c"].offset_ns, 0);
  EXPECT_EQ(by["c"].error_ns, 0);
  EXPECT_EQ(by["a"].offset_ns, -60 * kUs);
  EXPECT_EQ(by["b"].offset_ns, 50 * kMs - 20 * kUs);
  EXPECT_EQ(by["b"].samples, 40u);
  EXPECT_LT(by["b"].error_ns, 10 * kUs);
  EXPECT_EQ(by["b"].method, "collective completion");
}

TEST(FleetEngine, StragglerNamesRankNodeAndPreemptorOnlyWithCorrectedClocks) {
  FleetSource s;
  Job().build(s);
  Outcome r = analyse(s, true);
  const Chain* c = find(r.fleet, "fleet_straggler");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node, "c");
  EXPECT_EQ(c->pids, std::vector<uint32_t>{103});
  EXPECT_NE(c->summary.find("rank 3 on c"), std::string::npos) << c->summary;
  EXPECT_NE(c->summary.find("last in 100% of 40 collectives"), std::string::npos) << c->summary;
  EXPECT_NE(c->summary.find("(pid 103) arrives last"), std::string::npos) << c->summary;
  EXPECT_NE(c->summary.find("median 29.9ms behind"), std::string::npos) << c->summary;
  EXPECT_NE(c->root_cause.find("preempted for 20.0ms"), std::string::npos) << c->root_cause;
  EXPECT_NE(c->root_cause.find("fleet_hog (pid 999) 100%"), std::string::npos) << c->root_cause;
  EXPECT_NE(c->explanation.find("b +50.0ms"), std::string::npos) << c->explanation;
  ASSERT_EQ(c->fixes.size(), 2u);
  EXPECT_EQ(c->fixes[1],
            "ingero explain (--source or --db as above) --node c --pid 103 shows that rank's own "
            "report");
  // Without the correction node b's clock makes rank 2 look 50 ms late: the wrong rank.
  Outcome raw = analyse(s, false);
  const Chain* w = find(raw.fleet, "fleet_straggler");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->node, "b");
}

// Without a sync the host never sees a collective complete: its return is the enqueue, as late
// as the rank. Using it would turn the straggler's lag into a clock offset.
TEST(FleetEngine, WithoutSyncsClocksAreNotEstimatedAndTheStragglerStays) {
  FleetSource s;
  Job j;
  j.syncs = false;
  j.skew.clear();
  j.build(s);
  Outcome r = analyse(s, true);
  for (const auto& c : r.clocks) {
    EXPECT_EQ(c.offset_ns, 0) << c.node;
    EXPECT_EQ(c.method, "not estimated: no synced collective spans nodes") << c.node;
  }
  const Chain* c = find(r.fleet, "fleet_straggler");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node, "c");
  EXPECT_NE(c->summary.find("median 30.0ms behind"), std::string::npos) << c->summary;
}

TEST(FleetEngine, FirstMismatchedCollective) {
  FleetSource s;
  Job j;
  j.mismatch_at = 7;
  j.build(s);
  Outcome r = analyse(s, true);
  const Chain* c = find(r.fleet, "mismatched_collectives");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_EQ(c->node, "c");
  EXPECT_EQ(c->summary,
            "Collective #7 on communicator 8bb588989c296ba2 diverges: ranks 0 (a), 1 (a), 2 (b) "
            "issued ncclAllReduce count 262144 datatype 7; rank 3 (c) issued ncclAllGather count "
            "1024 datatype 7");
}

TEST(FleetEngine, RankThatNeverIssuesACollectiveWhileItsTraceGoesOn) {
  FleetSource s;
  Job j;
  j.rank2_stops_at = 25;
  j.build(s);
  Outcome r = analyse(s, true);
  const Chain* c = find(r.fleet, "mismatched_collectives");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node, "b");
  EXPECT_NE(c->summary.find("Collective #25"), std::string::npos) << c->summary;
  EXPECT_NE(c->summary.find("rank 2 (b) never issued it"), std::string::npos) << c->summary;
}

TEST(FleetEngine, NoFindingOnABalancedJob) {
  FleetSource s;
  Job j;
  j.late = 200 * kUs;
  j.hog = false;
  j.build(s);
  Outcome r = analyse(s, true);
  EXPECT_TRUE(r.fleet.chains.empty()) << r.fleet.chains[0].summary;
}

TEST(FleetEngine, NodeOutlierByMedianAbsoluteDeviation) {
  auto prof = [](const std::string& n, uint64_t step_ms, double rate) {
    NodeProfile p;
    p.node = n;
    p.step_ns = step_ms * 1'000'000;
    p.launch_rate = rate;
    return p;
  };
  std::vector<Chain> out;
  rule_node_outliers(
      {prof("a", 100, 900), prof("b", 102, 910), prof("c", 99, 905), prof("d", 160, 600)}, out);
  ASSERT_EQ(out.size(), 2u);
  for (const auto& c : out) EXPECT_EQ(c.node, "d");
  EXPECT_EQ(out[0].summary,
            "d's median step time is 160.0ms against a fleet median of 101.0ms (robust z 11.7 "
            "over 4 nodes)");
  // Slower steps, and fewer launches a second: never "faster" (found by helper-78).
  EXPECT_EQ(out[0].root_cause.rfind("d is slower than the rest of the fleet", 0), 0u)
      << out[0].root_cause;
  EXPECT_EQ(out[1].root_cause.rfind("d launches kernels less often than the rest of the fleet", 0),
            0u)
      << out[1].root_cause;
  out.clear();
  // Within 20% of the median: never an outlier, however tight the others are.
  rule_node_outliers({prof("a", 100, 0), prof("b", 100, 0), prof("c", 100, 0), prof("d", 115, 0)},
                     out);
  EXPECT_TRUE(out.empty());
  // Two nodes are not a fleet to compare against.
  rule_node_outliers({prof("a", 100, 0), prof("b", 300, 0)}, out);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace ingero::engine

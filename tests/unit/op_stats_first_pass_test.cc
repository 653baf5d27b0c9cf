// The op statistics in one pass over the calls (engine/op_stats.h, docs/engine.md): the
// quantiles and the tail computed from what the first pass held equal those of sorting the
// calls, whether the first pass held enough (one read of the calls), missed a tail call (the
// tail read again) or passed its limits (every further pass read again).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "engine/analysis.h"
#include "engine/op_stats.h"

namespace ingero::engine {
namespace {

using hal::Event;
using hal::EventKind;

class Calls : public TraceSource {
 public:
  std::vector<Event> events;
  int reads = 0;  // passes over the calls

  void calls(const Window&, const EventFn& fn) override {
    ++reads;
    for (const auto& e : events) fn(e);
  }
  void host_events(const Window&, const EventFn&) override {}
  std::vector<SnapshotRow> snapshots(const Window&) override { return {}; }
  std::map<uint32_t, ProcessActivity> process_activity(const Window&) override { return {}; }
  std::map<uint32_t, ProcessInfo> processes() override { return {}; }
  std::pair<int64_t, int64_t> time_span() override { return {0, 0}; }
  uint64_t event_count(const Window&) override { return events.size(); }
  bool has_stacks() override { return true; }
  std::vector<StackFrameInfo> stack(uint64_t id) override {
    StackFrameInfo f;
    f.function = "site" + std::to_string(id);
    return {f};
  }

  void add(uint32_t pid, std::string_view op, uint64_t dur) {
    Event e;
    e.ts_ns = 1'000'000 + events.size() * 1'000;
    e.dur_ns = dur;
    e.pid = pid;
    e.tid = pid * 10 + uint32_t(events.size() % 3);
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    e.op = op;
    e.kind = EventKind::kLaunch;
    e.stack_id = 1 + events.size() % 7;
    events.push_back(e);
  }
};

struct Expected {
  uint64_t p50 = 0, p95 = 0, p99 = 0;
  uint64_t tail_count = 0, tail_dur = 0, tail_off = 0, tail_preempts = 0;
  std::vector<std::pair<int64_t, uint32_t>> windows;             // start, tid
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> preemptors;  // pid -> count, off_ns
};

// What sorting the calls of one group gives.
Expected by_sorting(const std::vector<Event>& all, uint32_t pid, std::string_view op) {
  std::vector<const Event*> mine;
  for (const Event& e : all)
    if ((pid == 0 || e.pid == pid) && e.op == op) mine.push_back(&e);
  std::vector<uint64_t> d;
  for (const Event* e : mine) d.push_back(e->dur_ns);
  std::sort(d.begin(), d.end());
  auto rank = [&](double q) { return d[size_t(std::ceil(q * double(d.size()))) - 1]; };
  Expected x;
  x.p50 = rank(0.50);
  x.p95 = rank(0.95);
  x.p99 = rank(0.99);
  for (const Event* e : mine) {
    if (e->dur_ns < x.p95) continue;
    ++x.tail_count;
    x.tail_dur += e->dur_ns;
    x.tail_off += e->off_cpu_ns;
    x.tail_preempts += e->preempts;
    x.windows.push_back({int64_t(e->ts_ns), e->tid});
    if (auto p = e->get(hal::Field::kPeerPid); p && *p) {
      auto& [count, off] = x.preemptors[uint32_t(*p)];
      count += e->preempts ? e->preempts : 1;
      off += e->off_cpu_ns;
    }
  }
  return x;
}

void expect_exact(const Calls& src, const OpStatsSet& got) {
  size_t groups = 0;
  for (const auto* list : {&got.per_process, &got.overall})
    for (const OpStats& s : *list) {
      SCOPED_TRACE(std::to_string(s.key.pid) + " " + s.key.op);
      Expected x = by_sorting(src.events, s.key.pid, s.key.op);
      EXPECT_EQ(std::tie(s.p50, s.p95, s.p99), std::tie(x.p50, x.p95, x.p99));
      EXPECT_EQ(std::tie(s.tail_count, s.tail_dur_ns, s.tail_off_cpu_ns, s.tail_preempts),
                std::tie(x.tail_count, x.tail_dur, x.tail_off, x.tail_preempts));
      ASSERT_EQ(s.tail_windows.size(), x.windows.size());
      for (size_t i = 0; i < x.windows.size(); ++i)
        EXPECT_EQ(std::pair(s.tail_windows[i].start, s.tail_windows[i].tid), x.windows[i]);
      std::map<uint32_t, std::pair<uint64_t, uint64_t>> pre;
      for (const Preemptor& p : s.preemptors) pre[p.pid] = {p.count, p.off_ns};
      EXPECT_EQ(pre, x.preemptors);
      ++groups;
    }
  EXPECT_EQ(groups, 6u);  // two processes and both, two ops
}

// Two processes, two ops: launches spread like real ones (a long right tail), some preempted
// with off-CPU time and a preemptor, a few over 4.29 s; syncs as the loop's.
Calls stationary() {
  Calls c;
  std::mt19937_64 rng(17);
  std::lognormal_distribution<double> launch(std::log(8'000.0), 0.6);
  std::uniform_int_distribution<uint64_t> sync(2'000'000, 3'000'000);
  for (int i = 0; i < 60'000; ++i) {
    uint32_t pid = 100 + uint32_t(i % 2);
    c.add(pid, "cudaLaunchKernel", uint64_t(launch(rng)));
    if (i % 97 == 0) {
      Event& e = c.events.back();
      e.off_cpu_ns = e.dur_ns / 2;
      e.preempts = uint32_t(i % 3);
      e.set(hal::Field::kPeerPid, 900 + uint64_t(i % 4));
      e.set_peer_comm("tokenizer");
    }
    if (i % 20'011 == 0) c.events.back().dur_ns = 5'000'000'000 + uint64_t(i);
    if (i % 49 == 0) c.add(pid, "cudaStreamSynchronize", sync(rng));
  }
  return c;
}

TEST(OpStatsFirstPass, OneReadOfTheCallsGivesTheQuantilesAndTailsOfSortingThem) {
  Calls c = stationary();
  auto got = compute_op_stats(c, {});
  EXPECT_EQ(c.reads, 1);  // the first pass held every duration and every tail call
  expect_exact(c, got);
}

TEST(OpStatsFirstPass, PastItsLimitsEveryFurtherPassReadsTheCallsAgainForTheSameAnswer) {
  Calls c = stationary();
  auto got = compute_op_stats(c, {}, nullptr, nullptr, FirstPassLimits{0, 0});
  // The first pass, the quantiles' further pass, the tail.
  EXPECT_EQ(c.reads, 3);
  expect_exact(c, got);
  Calls d = stationary();
  expect_exact(d, compute_op_stats(d, {}, nullptr, nullptr, FirstPassLimits{0, 1'000'000}));
  EXPECT_EQ(d.reads, 2);  // the quantiles read again, the tail from the calls held
}

// A launch loop traced entry-only: one launch in 32 is timed, the others read back untimed with
// their process's timed mean (store/untimed_durations.h). They count, but the quantiles and
// tails are those of the timed launches alone (as the folded calls' sketches give them), and
// the first pass keeps none of them: it kept every one when their mean sat at the floor that
// the timed ones set, a million calls held at the end of a session.
TEST(OpStatsFirstPass, UntimedLaunchesCountButAreNeitherInTheQuantilesNorInTheTails) {
  Calls all = stationary();
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> timed_sum;  // pid -> sum, calls
  std::vector<bool> untimed(all.events.size());
  std::map<uint32_t, uint64_t> launches;
  for (size_t i = 0; i < all.events.size(); ++i) {
    const Event& e = all.events[i];
    if (e.op != "cudaLaunchKernel") continue;
    if (launches[e.pid]++ % 32 != 0) {
      untimed[i] = true;
    } else {
      timed_sum[e.pid].first += e.dur_ns;
      ++timed_sum[e.pid].second;
    }
  }
  Calls timed;
  for (size_t i = 0; i < all.events.size(); ++i) {
    Event& e = all.events[i];
    if (!untimed[i]) {
      timed.events.push_back(e);
      continue;
    }
    Event u;  // what an entry-only launch reads back as: no return, never off-CPU
    u.ts_ns = e.ts_ns;
    u.pid = e.pid;
    u.tid = e.tid;
    u.vendor = e.vendor;
    u.api = e.api;
    u.op = e.op;
    u.kind = e.kind;
    u.stack_id = e.stack_id;
    u.dur_ns = timed_sum[e.pid].first / timed_sum[e.pid].second;
    u.timed = false;
    e = u;
  }
  auto got = compute_op_stats(all, {});
  expect_exact(timed, got);
  for (const OpStats& s : got.per_process) {
    if (s.key.op == "cudaLaunchKernel") {
      EXPECT_EQ(s.count, launches[s.key.pid]);
    }
  }
  ASSERT_TRUE(got.kept);
  size_t kept = 0;
  got.kept->for_each([&](const KeptCall&) { ++kept; });
  EXPECT_GT(kept, 0u);
  EXPECT_LE(kept, timed.events.size());
  // Past the first pass's limits, the further passes read the calls again: the same answer.
  Calls again = all;
  again.reads = 0;
  expect_exact(timed, compute_op_stats(again, {}, nullptr, nullptr, FirstPassLimits{0, 0}));
}

// The first 4,096 launches of each process are slower than all the later ones: a floor set from
// them passes over calls that are, in the end, in the tail. The tail is read again.
TEST(OpStatsFirstPass, ATailCallTheFirstPassMissedHasTheTailReadAgain) {
  Calls c;
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<uint64_t> slow(10'000, 20'000), fast(1'000, 10'000);
  for (int i = 0; i < 120'000; ++i) {
    c.add(100 + uint32_t(i % 2), "cudaLaunchKernel", i < 8'192 ? slow(rng) : fast(rng));
    if (i % 49 == 0) c.add(100 + uint32_t(i % 2), "cudaStreamSynchronize", fast(rng));
  }
  auto got = compute_op_stats(c, {});
  EXPECT_EQ(c.reads, 2);  // the durations were held; a tail call was missed
  expect_exact(c, got);
}

// Chains about the launches of pid 100 (the whole window and, if `narrow`, a window of ~25
// calls) and of every process, attributed from the calls kept or by reading the calls again.
std::vector<Chain> attributed(Calls& c, bool from_kept, bool narrow) {
  Analysis a;
  a.stats = compute_op_stats(c, {});
  if (!from_kept) a.stats.kept = nullptr;
  for (const OpStats& s : a.stats.per_process)
    if (s.key.pid == 100 && s.key.op == "cudaLaunchKernel") {
      a.chains.push_back(chain_for_op("tail_latency", s));
      if (!narrow) continue;
      a.chains.push_back(chain_for_op("narrow", s));
      a.chains.back().window_start = 1'000'000 + 50'000'000;
      a.chains.back().window_end = 1'000'000 + 50'050'000;
    }
  for (const OpStats& s : a.stats.overall)
    if (s.key.op == "cudaLaunchKernel") a.chains.push_back(chain_for_op("overall", s));
  a.chains.back().pids.clear();
  attribute_stacks(c, a);
  return a.chains;
}

void expect_same_stacks(const std::vector<Chain>& kept, const std::vector<Chain>& read) {
  ASSERT_EQ(kept.size(), read.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    SCOPED_TRACE(kept[i].rule);
    ASSERT_EQ(kept[i].stacks.size(), read[i].stacks.size());
    ASSERT_FALSE(kept[i].stacks.empty());
    for (size_t k = 0; k < kept[i].stacks.size(); ++k) {
      const ChainStack &x = kept[i].stacks[k], &y = read[i].stacks[k];
      EXPECT_EQ(std::tie(x.stack_id, x.calls, x.examined, x.worst_ns, x.pid, x.tid, x.frames),
                std::tie(y.stack_id, y.calls, y.examined, y.worst_ns, y.pid, y.tid, y.frames));
    }
  }
}

// The slowest launches are among the calls the first pass kept: attribution reads no call.
// A chain over ~25 calls has too few of them kept to tell (fewer than its 20 slowest): the
// calls are read again, for the same stacks.
TEST(OpStatsFirstPass, StackAttributionFromTheKeptCallsIsThatOfReadingTheCallsAgain) {
  for (bool narrow : {false, true}) {
    SCOPED_TRACE(narrow ? "with the narrow chain" : "without");
    Calls c = stationary();
    auto kept = attributed(c, true, narrow);
    EXPECT_EQ(c.reads, narrow ? 2 : 1);  // the statistics' pass, and the narrow chain's read
    Calls d = stationary();
    auto read = attributed(d, false, narrow);
    EXPECT_EQ(d.reads, 2);
    ASSERT_EQ(kept.size(), narrow ? 3u : 2u);
    expect_same_stacks(kept, read);
    if (narrow) {
      EXPECT_EQ(kept[1].stacks[0].examined, 20u);  // the slowest 20 of its 25
    }
  }
}

}  // namespace
}  // namespace ingero::engine

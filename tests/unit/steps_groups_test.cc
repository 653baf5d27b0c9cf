// The step model groups consecutive calls of one op on a thread into one item
// (engine/steps_internal.h, Call::run): 8 bytes a call instead of 56. Groups change nothing:
// each test analyses one trace with groups and without, and compares every step, gap, op count,
// call site and tally the rules read.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "engine/steps_internal.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

void expect_same(const engine::Analysis& a, const engine::Analysis& b) {
  ASSERT_EQ(a.chains.size(), b.chains.size());
  for (size_t i = 0; i < a.chains.size(); ++i) {
    EXPECT_EQ(a.chains[i].id, b.chains[i].id);
    EXPECT_EQ(a.chains[i].summary, b.chains[i].summary);
  }
  ASSERT_EQ(a.steps.processes.size(), b.steps.processes.size());
  for (size_t p = 0; p < a.steps.processes.size(); ++p) {
    const engine::StepSeries &x = a.steps.processes[p], &y = b.steps.processes[p];
    EXPECT_EQ(x.cadence_note, y.cadence_note);
    EXPECT_EQ(x.summary.text, y.summary.text);
    EXPECT_EQ(std::tie(x.summary.preempted_op, x.summary.preempted_stack,
                       x.summary.preempted_before_ns, x.summary.preempted_tid),
              std::tie(y.summary.preempted_op, y.summary.preempted_stack,
                       y.summary.preempted_before_ns, y.summary.preempted_tid));
    EXPECT_EQ(x.calls_dropped, y.calls_dropped);
    ASSERT_EQ(x.steps.size(), y.steps.size());
    for (size_t i = 0; i < x.steps.size(); ++i) {
      const engine::Step &s = x.steps[i], &t = y.steps[i];
      EXPECT_EQ(std::tie(s.start_ns, s.end_ns, s.launches, s.syncs, s.copies, s.preempted_ns),
                std::tie(t.start_ns, t.end_ns, t.launches, t.syncs, t.copies, t.preempted_ns))
          << i;
      EXPECT_EQ(
          std::tie(s.wait_ns, s.enqueue_ns, s.api_ns, s.host_ns, s.gpu_idle_ns, s.host_gap_ns),
          std::tie(t.wait_ns, t.enqueue_ns, t.api_ns, t.host_ns, t.gpu_idle_ns, t.host_gap_ns))
          << i;
      EXPECT_EQ(std::tie(s.allocs, s.frees, s.alloc_free_ns, s.h2d_bytes, s.d2h_bytes,
                         s.collectives, s.round_trips),
                std::tie(t.allocs, t.frees, t.alloc_free_ns, t.h2d_bytes, t.d2h_bytes,
                         t.collectives, t.round_trips))
          << i;
    }
    ASSERT_EQ(x.sites.size(), y.sites.size());
    for (size_t i = 0; i < x.sites.size(); ++i) {
      const engine::SiteCount &u = x.sites[i], &v = y.sites[i];
      EXPECT_EQ(std::tie(u.site, u.stack, u.op, u.calls, u.host_ns, u.max_ns, u.bytes, u.steps_with,
                         u.max_per_step, u.median_per_step),
                std::tie(v.site, v.stack, v.op, v.calls, v.host_ns, v.max_ns, v.bytes, v.steps_with,
                         v.max_per_step, v.median_per_step))
          << i;
    }
    ASSERT_EQ(x.gaps.size(), y.gaps.size());
    for (size_t i = 0; i < x.gaps.size(); ++i) {
      const engine::HostGap &g = x.gaps[i], &h = y.gaps[i];
      EXPECT_EQ(std::tie(g.start_ns, g.end_ns, g.tid, g.after_op, g.after_stack, g.before_stack),
                std::tie(h.start_ns, h.end_ns, h.tid, h.after_op, h.after_stack, h.before_stack))
          << i;
    }
    ASSERT_EQ(x.ops.size(), y.ops.size());
    for (size_t i = 0; i < x.ops.size(); ++i)
      EXPECT_EQ(std::tie(x.ops[i].op, x.ops[i].calls, x.ops[i].nested, x.ops[i].sum_ns),
                std::tie(y.ops[i].op, y.ops[i].calls, y.ops[i].nested, y.ops[i].sum_ns));
  }
}

// The trace analysed with launches grouped, then one by one.
struct Both {
  engine::Analysis grouped, single;
  std::string path;
};
Both analyze_both(const std::string& name, std::vector<Event> calls) {
  std::stable_sort(calls.begin(), calls.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  std::string path = write_trace(name + ".db", calls);
  Both b;
  b.path = path;
  b.grouped = std::move(analyze(path).a);
  engine::steps_detail::group_calls = false;
  b.single = std::move(analyze(path).a);
  engine::steps_detail::group_calls = true;
  return b;
}

// Launches from eight call sites (each its own stack), and in steps 100-109 the thread is
// preempted between two launches by a hog: the call it makes next lies inside a group.
std::vector<Event> loop_with_preemptions() {
  std::vector<Event> out;
  int step = 0, in_step = 0;
  for (Event e : training_loop(200).calls) {
    if (e.kind == EventKind::kSync) {
      ++step;
      in_step = 0;
    }
    if (e.kind == EventKind::kLaunch) {
      e.stack_id = 0x1110 + uint64_t(in_step % 8);
      if (++in_step == 50 && step >= 100 && step < 110)
        out.push_back(switch_out(e.ts_ns + e.dur_ns + 5 * kUs, 10 * kUs, true));
    }
    out.push_back(e);
  }
  return out;
}

TEST(StepGroups, OneThreadsLaunchesGroupedGiveTheSameSteps) {
  Both b = analyze_both("groups-one-thread", loop_with_preemptions());
  expect_same(b.grouped, b.single);
  const engine::StepSeries& s = b.grouped.steps.processes.at(0);
  ASSERT_GE(s.steps.size(), 190u);
  EXPECT_EQ(s.steps[150].launches, 120u);
  // The preempted thread's next call: the 51st launch of a step, the third call site.
  EXPECT_EQ(s.summary.preempted_op, "cudaLaunchKernel");
  EXPECT_EQ(s.summary.preempted_stack, 0x1112u);
}

// Two threads' launches interleaved: every group overlaps the other thread's calls and is
// swept call by call.
TEST(StepGroups, InterleavedThreadsGroupedGiveTheSameSteps) {
  Both b = analyze_both("groups-two-threads", with_twin_thread(loop_with_preemptions(), 0x2220));
  expect_same(b.grouped, b.single);
  EXPECT_EQ(b.grouped.steps.processes.at(0).steps[150].launches, 240u);
}

// A driver launch recorded before the runtime launch that made it (same start, shorter) is part
// of its caller. In each step the first 60 launches call the driver directly (cuBLAS does) and
// group; the next 60 go through the runtime, and the first of their driver calls joins the
// direct ones' group before its caller comes.
TEST(StepGroups, ACalleeRecordedBeforeItsCallerLeavesItsGroup) {
  std::vector<Event> calls;
  uint64_t direct = 0, runtime = 0;
  int in_step = 0;
  for (Event e : training_loop(60).calls) {
    if (e.kind == EventKind::kSync) in_step = 0;
    if (e.kind == EventKind::kLaunch) {
      Event driver = e;
      driver.api = "cuda_driver";
      driver.op = "cuLaunchKernel";
      if (in_step++ < 60) {
        calls.push_back(driver);
        ++direct;
        continue;
      }
      driver.dur_ns = e.dur_ns - kUs;
      calls.push_back(driver);
      ++runtime;
    }
    calls.push_back(e);
  }
  Both b = analyze_both("groups-callee-first", calls);
  expect_same(b.grouped, b.single);
  const engine::StepSeries& s = b.grouped.steps.processes.at(0);
  ASSERT_EQ(s.ops.size(), 4u);  // and the copy and the sync
  EXPECT_EQ(std::tie(s.ops[0].op, s.ops[0].calls, s.ops[0].nested),
            std::make_tuple(std::string("cuLaunchKernel"), direct, runtime));
  EXPECT_EQ(std::tie(s.ops[1].op, s.ops[1].calls, s.ops[1].nested),
            std::make_tuple(std::string("cudaLaunchKernel"), runtime, uint64_t(0)));
  EXPECT_EQ(s.steps[30].launches, 120u);
  // In memory, per step: two groups of 60 launches (an item, and its 60 calls in its list),
  // the copy and the sync; and the runtime launches' first driver call, which joined the direct
  // group before its caller came.
  Read r = analyze(b.path);
  engine::HostContext host = engine::collect_host_context(*r.source, {});
  // One stack, interned once.
  using engine::steps_detail::Call, engine::steps_detail::Grouped, engine::steps_detail::GroupList;
  size_t need =
      48 + 60 * (4 * sizeof(Call) + (2 * 60 + 1) * sizeof(Grouped) + 2 * sizeof(GroupList));
  auto m = engine::compute_steps(*r.source, {}, host, need);
  EXPECT_EQ(m.processes.at(0).calls_dropped, 0u);
  m = engine::compute_steps(*r.source, {}, host, need - 1);
  EXPECT_EQ(m.processes.at(0).calls_dropped, 1u);  // the last sync
}

// A step that uploads its batch in two host-to-device copies, launches, and allocates and frees
// 30 buffers from three sites (cudaMalloc of one size is a group, whatever its stacks), then
// reads the loss back. Steps 40-59 allocate 60 more: the allocator-churn rule has something to
// find.
std::vector<Event> allocating_loop(int steps) {
  std::vector<Event> out;
  uint64_t t = 1000;
  auto add = [&](Event e, uint64_t gap) {
    out.push_back(e);
    t += e.dur_ns + gap;
  };
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < 2; ++i) {
      Event up = call(t, 30 * kUs, "cuda_runtime", "cudaMemcpyAsync", EventKind::kMemcpy);
      up.set(Field::kBytes, 1 << 20);
      up.set(Field::kDirection, 1);  // H2D
      up.stack_id = 0x4444;
      add(up, 10 * kUs);
    }
    for (int i = 0; i < 40; ++i) add(launch(t, 5 * kUs + uint64_t(i % 3) * kUs), 15 * kUs);
    int allocs = s >= 40 && s < 60 ? 90 : 30;
    for (int i = 0; i < allocs; ++i) {
      Event m = call(t, 40 * kUs + uint64_t(i % 7) * kUs, "cuda_runtime", "cudaMalloc",
                     EventKind::kAlloc);
      m.set(Field::kBytes, 1 << 20);
      m.stack_id = i < 10 ? 0x5551 : 0x5552;
      add(m, 5 * kUs);
    }
    for (int i = 0; i < allocs; ++i) {
      Event f = call(t, 20 * kUs, "cuda_runtime", "cudaFree", EventKind::kFree);
      f.stack_id = 0x5553;
      add(f, 5 * kUs);
    }
    Event copy = call(t, 2 * kMs, "cuda_runtime", "cudaMemcpyAsync", EventKind::kMemcpy);
    copy.set(Field::kBytes, 4);
    copy.set(Field::kDirection, 2);  // D2H
    copy.stack_id = 0x2222;
    add(copy, 5 * kUs);
    Event sync = call(t, 20 * kUs, "cuda_runtime", "cudaStreamSynchronize", EventKind::kSync);
    sync.stack_id = 0x2222;
    add(sync, 3 * kMs);
  }
  return out;
}

TEST(StepGroups, AllocationsAndCopiesGroupedGiveTheSameStepsAndSites) {
  Both b = analyze_both("groups-allocs", allocating_loop(100));
  expect_same(b.grouped, b.single);
  const engine::StepSeries& s = b.grouped.steps.processes.at(0);
  ASSERT_GE(s.steps.size(), 95u);
  EXPECT_EQ(std::tie(s.steps[20].allocs, s.steps[20].frees, s.steps[20].copies,
                     s.steps[20].h2d_bytes, s.steps[20].launches),
            std::make_tuple(30u, 30u, 3u, uint64_t(2 << 20), 40u));
  EXPECT_EQ(s.steps[50].allocs, 90u);
  // The three allocation sites keep their own counts: 10 a step from the first, the other 20
  // (80 in the 20 churning steps) from the second, all of them freed from the third.
  std::map<uint64_t, uint64_t> by_stack;
  for (const engine::SiteCount& c : s.sites)
    if (c.kind == EventKind::kAlloc || c.kind == EventKind::kFree) by_stack[c.stack] = c.calls;
  ASSERT_EQ(by_stack.size(), 3u);
  EXPECT_EQ(by_stack[0x5551], 10 * s.summary.steps);
  EXPECT_EQ(by_stack[0x5552], 20 * s.summary.steps + 20 * 60);
  EXPECT_EQ(by_stack[0x5553], by_stack[0x5551] + by_stack[0x5552]);
}

// With a second thread launching between the first's calls, every group is swept call by call.
TEST(StepGroups, AllocationsInterleavedWithAnotherThreadGiveTheSameSteps) {
  Both b = analyze_both("groups-allocs-twin", with_twin_thread(allocating_loop(100), 0x2220));
  expect_same(b.grouped, b.single);
  EXPECT_EQ(b.grouped.steps.processes.at(0).steps[20].launches, 80u);
}

// 16 threads calling cudaMalloc in a loop (issue 10's load): each thread's calls are one group of
// 8 bytes a call, one stack interned per thread.
TEST(StepGroups, AnAllocatingLoopTakesEightBytesACall) {
  std::vector<Event> calls;
  for (uint32_t tid = 100; tid < 116; ++tid) {
    uint64_t t = 1000 + tid * 3;
    for (int i = 0; i < 2000; ++i) {
      Event m = call(t, 2 * kUs, "cuda_runtime", "cudaMalloc", EventKind::kAlloc, 10, tid);
      m.set(Field::kBytes, 4096 * (tid - 99));
      m.stack_id = 0x7000 + tid;
      calls.push_back(m);
      t += 50 * kUs;
    }
  }
  Both b = analyze_both("groups-alloc-threads", calls);
  expect_same(b.grouped, b.single);
  Read r = analyze(b.path);
  engine::HostContext host = engine::collect_host_context(*r.source, {});
  using engine::steps_detail::Call, engine::steps_detail::Grouped, engine::steps_detail::GroupList;
  size_t need = 16 * (sizeof(Call) + 48 + sizeof(GroupList) + 2000 * sizeof(Grouped));
  EXPECT_EQ(sizeof(Grouped), 8u);
  auto m = engine::compute_steps(*r.source, {}, host, need);
  EXPECT_EQ(m.processes.at(0).calls_dropped, 0u);
  EXPECT_EQ(m.processes.at(0).ops.at(0).calls, 32000u);
  m = engine::compute_steps(*r.source, {}, host, need - 1);
  EXPECT_EQ(m.processes.at(0).calls_dropped, 1u);  // the last thread's last call
}

// A group holds 32-bit offsets: launches seconds apart, or one that hangs for five seconds (past
// a grouped call's 20-bit duration too), start new items, and nothing changes.
TEST(StepGroups, LaunchesPastThirtyTwoBitsStartNewItems) {
  std::vector<Event> calls;
  uint64_t t = 1000;
  for (int i = 0; i < 40; ++i) {
    Event e = launch(t, i == 20 ? 5'000 * kMs : 5 * kUs);
    calls.push_back(e);
    t += e.dur_ns + (i % 4 == 0 ? 1'500 * kMs : 30 * kUs);
  }
  Both b = analyze_both("groups-far-apart", calls);
  expect_same(b.grouped, b.single);
  const engine::StepSeries& s = b.grouped.steps.processes.at(0);
  EXPECT_EQ(s.ops.at(0).calls, 40u);
  EXPECT_EQ(s.ops.at(0).sum_ns, 39 * 5 * kUs + 5'000 * kMs);
}

// A grouped call holds its duration in 20 bits and its stack's index in 12: launches of 1.5 ms,
// and a process's launches past its first 4,096 distinct stacks, stay items of their own, and
// nothing changes (a duration or an index packed past its bits would change the steps' host
// time, or the call sites).
TEST(StepGroups, CallsPastAGroupedCallsBitsStayItems) {
  std::vector<Event> calls;
  uint64_t t = 1000, sum = 0;
  for (int i = 0; i < 6000; ++i) {
    Event e = launch(t, i % 50 == 7 ? 1'500 * kUs : 5 * kUs);
    e.stack_id = 0x100000 + uint64_t(i % 5000);  // 5,000 call sites
    calls.push_back(e);
    sum += e.dur_ns;
    t += e.dur_ns + 30 * kUs;
  }
  Both b = analyze_both("groups-past-bits", calls);
  expect_same(b.grouped, b.single);
  const engine::StepSeries& s = b.grouped.steps.processes.at(0);
  EXPECT_EQ(s.ops.at(0).calls, 6000u);
  EXPECT_EQ(s.ops.at(0).sum_ns, sum);
}

}  // namespace
}  // namespace ingero::store

// The step model groups consecutive launches of one op on a thread into one item
// (engine/steps_internal.h, Call::run): 16 bytes a launch instead of 56. Groups change nothing:
// each test analyses one trace with groups and without, and compares every step, gap, op count
// and tally the rules read.
#include <gtest/gtest.h>

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
  engine::steps_detail::group_launches = false;
  b.single = std::move(analyze(path).a);
  engine::steps_detail::group_launches = true;
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
  using engine::steps_detail::Call, engine::steps_detail::Grouped;
  size_t need =
      60 * (4 * sizeof(Call) + (2 * 60 + 1) * sizeof(Grouped) + 2 * sizeof(std::vector<Grouped>));
  auto m = engine::compute_steps(*r.source, {}, host, need);
  EXPECT_EQ(m.processes.at(0).calls_dropped, 0u);
  m = engine::compute_steps(*r.source, {}, host, need - 1);
  EXPECT_EQ(m.processes.at(0).calls_dropped, 1u);  // the last sync
}

// A group holds 32-bit offsets and durations: launches seconds apart, or one that hangs for
// five seconds, start new items, and nothing changes.
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

}  // namespace
}  // namespace ingero::store

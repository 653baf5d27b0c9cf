// Runs of folded calls read back whole (TraceSource::call_runs, engine/call_run.h): the same
// calls as TraceSource::calls gives, from the file and from the call cache, in any window, and
// the same op statistics as when every run is expanded call by call.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "engine/op_stats.h"
#include "tests/support/forwarding_source.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

using Key = std::tuple<uint64_t, uint64_t, uint32_t, std::string, uint64_t, bool>;
Key key(const Event& e) {
  return {e.ts_ns,        e.dur_ns, e.tid, std::string(e.op), e.get_or(Field::kStream, 0),
          e.stack_of_site};
}

struct Both {
  std::vector<Key> calls;      // calls()
  std::vector<Key> runs_read;  // call_runs(), runs expanded
  size_t whole = 0;            // runs given whole
  int64_t earliest_whole = INT64_MAX, latest_whole = INT64_MIN;
};

Both read_both(SqlTraceSource& src, const engine::Window& w) {
  Both b;
  src.calls(w, [&](const Event& e) { b.calls.push_back(key(e)); });
  src.call_runs(
      w, [&](const Event& e) { b.runs_read.push_back(key(e)); },
      [&](const engine::CallRun& r) {
        ++b.whole;
        b.earliest_whole = std::min(b.earliest_whole, r.ts_ns);
        b.latest_whole = std::max(b.latest_whole, r.last_start());
        r.for_each_call([&](const Event& e) { b.runs_read.push_back(key(e)); });
      });
  std::sort(b.runs_read.begin(), b.runs_read.end());
  EXPECT_TRUE(std::is_sorted(b.calls.begin(), b.calls.end()));  // calls() is in time order
  return b;
}

struct Folded {
  std::string path;
  std::unique_ptr<TraceReader> reader;
};

Folded folded_loop(const std::string& name) {
  Loop l = training_loop(200);
  Folded f;
  f.path = copy_of(write_trace(name + "-full.db", l.calls), name + ".db");
  fold_everything(f.path);
  auto reader = TraceReader::open(f.path, app::builtin_views());
  EXPECT_TRUE(reader);
  f.reader = std::move(*reader);
  return f;
}

TEST(CallRuns, RunsComeWholeAndReadBackAsTheCallsTheyReplaced) {
  Folded f = folded_loop("runs-whole");
  int64_t runs = test::query_int(f.path, "SELECT count(*) FROM call_runs");
  int64_t calls =
      test::query_int(f.path,
                      "SELECT (SELECT count(*) FROM calls WHERE kind != 'cpu_sample' "
                      "AND kind != 'sched_switch') + (SELECT sum(calls) FROM call_runs)");
  ASSERT_GT(runs, 1000);
  SqlTraceSource src(*f.reader);
  // The first read comes from the file and fills the cache; the second from the cache.
  Both file = read_both(src, {});
  EXPECT_GT(src.cached_calls(), 0u);
  Both cached = read_both(src, {});
  EXPECT_EQ(src.error(), "");
  for (const Both* b : {&file, &cached}) {
    EXPECT_EQ(b->runs_read, b->calls);
    EXPECT_EQ(b->whole, size_t(runs));
  }
  EXPECT_EQ(cached.calls, file.calls);
  EXPECT_EQ(int64_t(file.calls.size()), calls);
}

TEST(CallRuns, ARunAcrossTheWindowsEdgeComesAsItsCallsInsideTheWindow) {
  Folded f = folded_loop("runs-edge");
  auto edge = test::query_rows(
      f.path,
      "SELECT timestamp + span_ns / 2, timestamp FROM call_runs ORDER BY timestamp "
      "LIMIT 1 OFFSET 300");
  auto last = test::query_rows(
      f.path,
      "SELECT timestamp + span_ns / 3, timestamp FROM call_runs ORDER BY timestamp "
      "LIMIT 1 OFFSET 900");
  engine::Window w;
  w.from_ns = std::stoll(edge[0][0]);
  w.to_ns = std::stoll(last[0][0]);
  for (size_t cache : {size_t(0), SqlTraceSource::kMinCallCacheBytes}) {
    SqlTraceSource src(*f.reader);
    src.set_call_cache(cache);
    Both whole_trace = read_both(src, {});  // with a cache: what the window is read from
    Both b = read_both(src, w);
    EXPECT_EQ(src.error(), "");
    EXPECT_EQ(b.runs_read, b.calls) << cache;
    EXPECT_FALSE(b.calls.empty());
    for (const Key& k : b.calls) {
      EXPECT_GE(int64_t(std::get<0>(k)), w.from_ns);
      EXPECT_LE(int64_t(std::get<0>(k)), w.to_ns);
    }
    // The two runs cut by the edges came as calls; every run given whole lies inside.
    EXPECT_GE(b.earliest_whole, w.from_ns);
    EXPECT_LE(b.latest_whole, w.to_ns);
    EXPECT_EQ(b.whole, 900u - 300u - 1u) << cache;
    EXPECT_GT(whole_trace.calls.size(), b.calls.size());
  }
}

// A source that reads every run call by call (TraceSource's default call_runs).
using CallByCall = test::ForwardingSource;

TEST(CallRuns, OpStatisticsFromWholeRunsEqualThoseCallByCall) {
  Folded f = folded_loop("runs-stats");
  SqlTraceSource src(*f.reader);
  CallByCall slow(src);
  auto whole = engine::compute_op_stats(src, {});
  auto by_call = engine::compute_op_stats(slow, {});
  EXPECT_EQ(src.error(), "");
  ASSERT_EQ(whole.per_process.size(), by_call.per_process.size());
  ASSERT_EQ(whole.overall.size(), by_call.overall.size());
  size_t launches = 0;
  for (auto [x, y] : {std::pair{&whole.per_process, &by_call.per_process},
                      std::pair{&whole.overall, &by_call.overall}})
    for (size_t i = 0; i < x->size(); ++i) {
      const engine::OpStats &a = (*x)[i], &b = (*y)[i];
      SCOPED_TRACE(a.key.op);
      EXPECT_EQ(a.key, b.key);
      EXPECT_EQ(std::tie(a.count, a.errors, a.sum_ns, a.min_ns, a.max_ns, a.first_ts, a.last_ts),
                std::tie(b.count, b.errors, b.sum_ns, b.min_ns, b.max_ns, b.first_ts, b.last_ts));
      EXPECT_EQ(std::tie(a.p50, a.p95, a.p99), std::tie(b.p50, b.p95, b.p99));
      EXPECT_EQ(std::tie(a.off_cpu_ns, a.preempts, a.pids, a.tids),
                std::tie(b.off_cpu_ns, b.preempts, b.pids, b.tids));
      EXPECT_EQ(std::tie(a.tail_count, a.tail_dur_ns, a.tail_off_cpu_ns, a.tail_preempts),
                std::tie(b.tail_count, b.tail_dur_ns, b.tail_off_cpu_ns, b.tail_preempts));
      ASSERT_EQ(a.tail_windows.size(), b.tail_windows.size());
      for (size_t k = 0; k < a.tail_windows.size(); ++k)
        EXPECT_EQ(std::tie(a.tail_windows[k].start, a.tail_windows[k].end),
                  std::tie(b.tail_windows[k].start, b.tail_windows[k].end));
      if (a.key.op == "cudaLaunchKernel") launches += a.count;
    }
  EXPECT_EQ(launches, 2u * 200u * 120u);  // per process and overall
}

TEST(CallRuns, SpansWalkTheSameCallsAsTheEventsOneByOne) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    engine::CallRun r;
    r.ts_ns = int64_t(rng() % 1000000);
    r.calls = 1 + rng() % 40;
    r.min_ns = 100 + rng() % 1000;
    r.max_ns = r.min_ns + rng() % 5000;
    r.sum_ns = random_run_total(rng, r.calls, r.min_ns, r.max_ns);
    // Sometimes no idle time; a single call spans its duration.
    r.span_ns = r.sum_ns + (r.calls > 1 ? rng() % 3 * (rng() % 100000) : 0);
    std::vector<std::pair<int64_t, uint64_t>> spans, events;
    r.for_each_span([&](uint64_t k, int64_t start, uint64_t dur) {
      EXPECT_EQ(k, spans.size());
      spans.push_back({start, dur});
    });
    r.for_each_call([&](const Event& e) { events.push_back({int64_t(e.ts_ns), e.dur_ns}); });
    ASSERT_EQ(spans, events) << i;
    EXPECT_EQ(spans.back().first, r.last_start());
    uint64_t sum = 0;
    for (auto [start, dur] : spans) sum += dur;
    EXPECT_EQ(sum, r.sum_ns);
    EXPECT_EQ(uint64_t(spans.back().first - r.ts_ns) + spans.back().second,
              std::max(r.span_ns, r.sum_ns));
  }
}

// Two threads launching into one stream, interleaved: runs of one thread come before the
// other thread's calls that started meanwhile, and the step model puts them back in order.
// explain on a folded copy of `calls`, with runs whole and call by call: the same chains, and
// every step's breakdown and counts. Returns the first process's steps.
engine::StepSeries expect_same_explain(const std::string& name, std::vector<Event> calls) {
  std::stable_sort(calls.begin(), calls.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  std::string path = copy_of(write_trace(name + "-full.db", calls), name + ".db");
  fold_everything(path);
  EXPECT_GT(test::query_int(path, "SELECT count(*) FROM call_runs"), 10);
  auto reader = TraceReader::open(path, app::builtin_views());
  if (!reader) {
    ADD_FAILURE() << reader.error().message;
    return {};
  }
  SqlTraceSource src(**reader);
  CallByCall slow(src);
  engine::Analysis a = engine::analyze(src, {}), b = engine::analyze(slow, {});
  EXPECT_EQ(src.error(), "");
  EXPECT_EQ(a.chains.size(), b.chains.size());
  for (size_t i = 0; i < std::min(a.chains.size(), b.chains.size()); ++i) {
    EXPECT_EQ(a.chains[i].id, b.chains[i].id);
    EXPECT_EQ(a.chains[i].summary, b.chains[i].summary);
  }
  if (a.steps.processes.size() != 1 || b.steps.processes.size() != 1) {
    ADD_FAILURE() << a.steps.processes.size() << " " << b.steps.processes.size();
    return {};
  }
  const auto &x = a.steps.processes[0], &y = b.steps.processes[0];
  EXPECT_EQ(x.cadence_note, y.cadence_note);
  EXPECT_EQ(x.summary.text, y.summary.text);
  EXPECT_EQ(x.steps.size(), y.steps.size());
  for (size_t i = 0; i < std::min(x.steps.size(), y.steps.size()); ++i) {
    const engine::Step &p = x.steps[i], &q = y.steps[i];
    EXPECT_EQ(std::tie(p.start_ns, p.end_ns, p.launches, p.syncs, p.copies, p.warmup),
              std::tie(q.start_ns, q.end_ns, q.launches, q.syncs, q.copies, q.warmup))
        << i;
    EXPECT_EQ(std::tie(p.wait_ns, p.enqueue_ns, p.api_ns, p.host_ns, p.gpu_idle_ns, p.host_gap_ns),
              std::tie(q.wait_ns, q.enqueue_ns, q.api_ns, q.host_ns, q.gpu_idle_ns, q.host_gap_ns))
        << i;
  }
  EXPECT_EQ(x.gaps.size(), y.gaps.size());
  for (size_t i = 0; i < std::min(x.gaps.size(), y.gaps.size()); ++i)
    EXPECT_EQ(std::tie(x.gaps[i].start_ns, x.gaps[i].end_ns, x.gaps[i].after_op),
              std::tie(y.gaps[i].start_ns, y.gaps[i].end_ns, y.gaps[i].after_op))
        << i;
  EXPECT_EQ(x.ops.size(), y.ops.size());
  for (size_t i = 0; i < std::min(x.ops.size(), y.ops.size()); ++i)
    EXPECT_EQ(std::tie(x.ops[i].op, x.ops[i].calls, x.ops[i].sum_ns),
              std::tie(y.ops[i].op, y.ops[i].calls, y.ops[i].sum_ns));
  return x;
}

// Runs of one thread with nothing else of the process inside them: the step model takes each
// as one item (its launches and the host time between them, the GPU busy after the first).
TEST(CallRuns, ARunAloneInItsStepIsModelledWholeAsItsCallsWouldBe) {
  engine::StepSeries s = expect_same_explain("runs-alone", training_loop(200).calls);
  ASSERT_GE(s.steps.size(), 190u);
  EXPECT_EQ(s.steps[150].launches, 120u);
  EXPECT_EQ(s.cadence, engine::Cadence::kSync);
}

// Launches of two threads interleaved: every run overlaps the other thread's calls, so the
// step model takes them call by call.
TEST(CallRuns, ExplainFromWholeRunsEqualsExplainCallByCall) {
  engine::StepSeries s =
      expect_same_explain("runs-explain", with_twin_thread(training_loop(200).calls));
  ASSERT_GE(s.steps.size(), 190u);
  EXPECT_EQ(s.steps[150].launches, 240u);  // both threads' launches, one step of the slow phase
}

// Another thread's allocation open across some runs of every third step: those runs go call
// by call, the others whole, and the steps are the same.
TEST(CallRuns, RunsOverlappedByAnotherThreadsCallGoCallByCall) {
  std::vector<Event> calls;
  int step = 0;
  for (const Event& e : training_loop(200).calls) {
    calls.push_back(e);
    if (e.kind == EventKind::kSync) ++step;
    if (e.kind != EventKind::kLaunch || step % 3 != 0) continue;
    if (calls.size() % 40 != 0) continue;
    Event alloc =
        call(e.ts_ns + 2 * kUs, 300 * kUs, "cuda_runtime", "cudaMalloc", EventKind::kAlloc, 10, 12);
    alloc.stack_id = 0x4444;
    calls.push_back(alloc);
  }
  engine::StepSeries s = expect_same_explain("runs-overlapped", calls);
  ASSERT_GE(s.steps.size(), 190u);
  EXPECT_EQ(s.steps[150].launches, 120u);
}

// Launches and nothing else: no cadence, one-second windows, and runs across the windows' edges
// are split there.
TEST(CallRuns, RunsAcrossFixedWindowsAreCountedInEachWindow) {
  std::mt19937_64 rng(5);
  std::vector<Event> calls;
  for (uint64_t t = 1000; t < 3500 * kMs;) {
    uint64_t dur = 4 * kUs + rng() % (3 * kUs);
    calls.push_back(launch(t, dur));
    t += dur + 20 * kUs + rng() % (10 * kUs);
  }
  engine::StepSeries s = expect_same_explain("runs-windows", calls);
  EXPECT_EQ(s.cadence, engine::Cadence::kWindows);
  ASSERT_EQ(s.steps.size(), 4u);
  uint64_t launches = 0;
  for (const engine::Step& st : s.steps) launches += st.launches;
  EXPECT_EQ(launches, calls.size());
}

}  // namespace
}  // namespace ingero::store

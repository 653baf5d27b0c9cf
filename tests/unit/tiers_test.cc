// Tiered retention (store/tiers.h): per-second summaries of every call, launches folded into
// runs, and what the engine reads back from a folded trace.
#include "store/tiers.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "app/builtin_backends.h"
#include "engine/analysis.h"
#include "store/call_summaries.h"
#include "store/sketch_sql.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;

constexpr int64_t kOffset = 1'800'000'000'000'000'000;  // wall = mono + offset
constexpr uint64_t kUs = 1000, kMs = 1000000;

Event call(uint64_t ts, uint64_t dur, const char* api, const char* op, EventKind kind,
           uint32_t pid = 10, uint32_t tid = 10) {
  Event e;
  e.ts_ns = ts;
  e.dur_ns = dur;
  e.pid = pid;
  e.tid = tid;
  e.set_comm("python3");
  e.vendor = "nvidia";
  e.api = api;
  e.op = op;
  e.kind = kind;
  e.has_ret = true;
  e.set(Field::kStream, 0x7f0000001000);
  return e;
}

Event launch(uint64_t ts, uint64_t dur, uint32_t tid = 10) {
  Event e = call(ts, dur, "cuda_runtime", "cudaLaunchKernel", EventKind::kLaunch, 10, tid);
  e.stack_id = 0x1111;
  return e;
}

// A training loop on one thread: per step 120 launches 20 us apart, some slow, failed or
// preempted ones, a device-to-host copy and a sync that waits 3 ms (the GPU is busy), then
// 8 ms of host work before the next step (the GPU idles: the step rules have something to
// find), 17 ms in steps 120-159.
constexpr uint64_t kDatasetStack = 0x3333;

struct Loop {
  std::vector<Event> calls;
  uint64_t launches = 0, kept_launches = 0, others = 0;
};

Loop training_loop(int steps) {
  std::mt19937_64 rng(11);
  Loop l;
  uint64_t t = 1000;
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < 120; ++i) {
      uint64_t dur = 4 * kUs + rng() % (2 * kUs);
      Event e = launch(t, dur);
      if (i == 7 && s % 10 == 0) e.dur_ns = 400 * kUs;  // slow
      if (i == 9 && s % 20 == 0) e.ret = 1;             // failed
      if (i == 11 && s % 25 == 0) {                     // preempted
        e.off_cpu_ns = 50 * kUs;
        e.preempts = 1;
        e.switches = 1;
        e.dur_ns = 60 * kUs;
      }
      l.calls.push_back(e);
      ++l.launches;
      t += e.dur_ns + 20 * kUs;
    }
    Event copy = call(t, 3 * kMs, "cuda_runtime", "cudaMemcpyAsync", EventKind::kMemcpy);
    copy.set(Field::kBytes, 4);
    copy.set(Field::kDirection, 2);  // D2H
    copy.stack_id = 0x2222;
    l.calls.push_back(copy);
    Event sleep;  // the copy waits for the GPU off-CPU, as the tracer records it
    sleep.ts_ns = copy.ts_ns + 100 * kUs;
    sleep.dur_ns = 2500 * kUs;
    sleep.pid = sleep.tid = 10;
    sleep.set_comm("python3");
    sleep.vendor = "host";
    sleep.api = "kernel";
    sleep.op = "sched_switch";
    sleep.kind = EventKind::kSchedSwitch;
    sleep.set(Field::kFlags, 0);
    sleep.set(Field::kState, 1);
    l.calls.push_back(sleep);
    t += copy.dur_ns + 5 * kUs;
    Event sync = call(t, 20 * kUs, "cuda_runtime", "cudaStreamSynchronize", EventKind::kSync);
    sync.stack_id = 0x2222;
    l.calls.push_back(sync);
    l.others += 2;
    t += sync.dur_ns;
    // The host works on-CPU in the dataset (on-CPU samples every millisecond) while the GPU idles.
    uint64_t work = (s >= 120 && s < 160 ? 17 : 8) * kMs;
    for (uint64_t at = 500 * kUs; at < work; at += kMs) {
      Event sample;
      sample.ts_ns = t + at;
      sample.pid = sample.tid = 10;
      sample.set_comm("python3");
      sample.vendor = "host";
      sample.api = "kernel";
      sample.op = "cpu_sample";
      sample.kind = EventKind::kCpuSample;
      sample.stack_id = kDatasetStack;
      l.calls.push_back(sample);
    }
    t += work;
  }
  return l;
}

std::string write_trace(const std::string& name, const std::vector<Event>& calls) {
  std::string path = test::temp_path(name);
  auto w = TraceWriter::open(path);
  EXPECT_TRUE(w) << (w ? "" : w.error().message);
  SessionInfo si;
  si.node = "n1";
  si.mono_offset_ns = kOffset;
  EXPECT_TRUE((*w)->begin_session(si));
  hal::StackFrame f;
  f.python = true;
  f.function = "SlowDS.__getitem__";
  f.file = "train.py";
  f.line = 15;
  EXPECT_TRUE((*w)->add_stack(kDatasetStack, {f}));
  size_t n = 0;
  for (const Event& e : calls) {
    EXPECT_TRUE((*w)->add(e));
    if (++n % 5000 == 0) {  // summaries are flushed as it goes
      EXPECT_TRUE((*w)->commit());
    }
  }
  EXPECT_TRUE((*w)->finish(SessionEnd{}));
  return path;
}

std::string copy_of(const std::string& path, const std::string& name) {
  std::string out = test::temp_path(name);
  std::filesystem::copy_file(path, out, std::filesystem::copy_options::overwrite_existing);
  return out;
}

// Folds every launch the policy allows (the whole trace is older than the full-row window).
Compacted fold_everything(const std::string& path) {
  auto r = compact_trace(path, 1, app::builtin_views());
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : Compacted{};
}

struct Read {
  std::unique_ptr<TraceReader> reader;
  std::unique_ptr<SqlTraceSource> source;
  engine::Analysis a;
};

Read analyze(const std::string& path) {
  Read r;
  auto reader = TraceReader::open(path, app::builtin_views());
  EXPECT_TRUE(reader) << (reader ? "" : reader.error().message);
  r.reader = std::move(*reader);
  r.source = std::make_unique<SqlTraceSource>(*r.reader);
  r.a = engine::analyze(*r.source, engine::Window{});
  EXPECT_EQ(r.source->error(), "");
  return r;
}

// The chains' ids and severities. Chains of one severity are ranked by their figures, which
// move within the quantiles' error: the set is compared, and the first chain exactly.
std::set<std::string> chain_keys(const engine::Analysis& a) {
  std::set<std::string> out;
  for (const auto& c : a.chains) out.insert(c.id + " " + engine::severity_name(c.severity));
  return out;
}

TEST(Tiers, SummariesAddUpToTheRowsTheyCoverEverySecond) {
  std::mt19937_64 rng(5);
  std::vector<Event> calls;
  uint64_t t = 0;
  for (int i = 0; i < 30000; ++i) {
    t += rng() % 400 * kUs;
    Event e = rng() % 3 ? launch(t, rng() % (50 * kUs), 10 + uint32_t(rng() % 3))
                        : call(t, rng() % (5 * kMs), "cuda_runtime", "cudaMemcpyAsync",
                               EventKind::kMemcpy, 20, 20);
    if (rng() % 50 == 0) e.ret = 2;
    if (rng() % 97 == 0) {
      e.has_ret = false;
      e.unfinished = true;
    }
    if (e.kind == EventKind::kMemcpy) e.set(Field::kBytes, rng() % 100000);
    if (rng() % 7 == 0) {
      e.off_cpu_ns = rng() % (e.dur_ns + 1);
      e.preempts = uint32_t(rng() % 3);
    }
    calls.push_back(e);
  }
  // A late call: its second was written already when it arrives.
  calls.push_back(launch(1000 * kMs + 17, 3 * kUs, 10));
  std::string db = write_trace("summaries.db", calls);
  std::string by_key =
      " GROUP BY timestamp / 1000000000, pid, tid, source, op ORDER BY 1, 2, 3, 4, 5";
  auto rows = test::query_rows(
      db,
      "SELECT timestamp / 1000000000, pid, tid, source, op, count(*), "
      "sum(ret_code IS NOT NULL AND ret_code <> 0 AND status = 0), sum(status = 1), "
      "sum(duration), min(duration), max(duration), sum(off_cpu_ns), sum(preempts), "
      "sum(coalesce(bytes, 0)) FROM events WHERE source <> 3" +
          by_key);
  auto sums = test::query_rows(
      db,
      "SELECT timestamp / 1000000000, pid, tid, source, op, sum(calls), sum(errors), "
      "sum(unfinished), sum(sum_ns), min(min_ns), max(max_ns), sum(off_cpu_ns), sum(preempts), "
      "sum(bytes) FROM call_seconds" +
          by_key);
  EXPECT_GT(rows.size(), 20u);
  EXPECT_EQ(sums, rows);
  // The late call made a second row for its second; readers add them up (above).
  EXPECT_GT(test::query_int(db, "SELECT count(*) FROM call_seconds"), int64_t(rows.size()));
  // Each row's sketch holds exactly its calls.
  auto db2 = Db::open(db, Db::Mode::kReadOnly);
  ASSERT_TRUE(db2);
  auto st = (*db2)->prepare("SELECT calls, min_ns, max_ns, sketch FROM call_seconds");
  ASSERT_TRUE(st);
  size_t n = 0;
  while (*st->step()) {
    auto sk = sketch_column(st->get(), 3);
    ASSERT_TRUE(sk);
    EXPECT_EQ(int64_t(sk->count()), st->int64(0));
    EXPECT_EQ(int64_t(sk->min()), st->int64(1));
    EXPECT_EQ(int64_t(sk->max()), st->int64(2));
    ++n;
  }
  EXPECT_GT(n, rows.size());
}

TEST(Tiers, FoldingKeepsWhatTheRulesNeedAndRunsHoldTheRest) {
  Loop l = training_loop(200);
  std::string full = write_trace("loop-full.db", l.calls);
  std::string tiered = copy_of(full, "loop-tiered.db");
  Compacted c = fold_everything(tiered);
  int64_t launches_kept =
      test::query_int(tiered, "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel'");
  // Every failed and preempted launch keeps its row, and every slow one (400 us, 20 of them).
  EXPECT_EQ(test::query_int(tiered,
                            "SELECT count(*) FROM calls WHERE op = 'cudaLaunchKernel' "
                            "AND (status <> 'ok' OR preempts > 0 OR dur_ns >= 400000)"),
            20 + 10 + 8);
  // Copies and syncs are never folded.
  EXPECT_EQ(test::query_int(tiered, "SELECT count(*) FROM calls WHERE op <> 'cudaLaunchKernel'"),
            int64_t(l.others));
  // The rest of the launches are in runs, counted once.
  EXPECT_EQ(c.folded + uint64_t(launches_kept), l.launches);
  EXPECT_EQ(uint64_t(test::query_int(tiered, "SELECT sum(calls) FROM call_runs")), c.folded);
  EXPECT_EQ(uint64_t(test::query_int(tiered, "SELECT count(*) FROM call_runs")), c.runs);
  // Fewer than a tenth of the launches keep a row, and runs are long.
  EXPECT_LT(uint64_t(launches_kept) * 10, l.launches);
  EXPECT_GT(c.folded / c.runs, 8u);
  // The summaries still cover every call.
  EXPECT_EQ(test::query_int(tiered, "SELECT sum(calls) FROM call_seconds"),
            int64_t(l.launches + l.others));
}

TEST(Tiers, FoldedCallsReadBackWithTheirCountsSumsExtremesAndGaps) {
  Loop l = training_loop(200);
  std::string full = write_trace("gaps-full.db", l.calls);
  std::string tiered = copy_of(full, "gaps-tiered.db");
  fold_everything(tiered);
  struct Totals {
    uint64_t n = 0, sum = 0, min = UINT64_MAX, max = 0;
    std::vector<std::pair<uint64_t, uint64_t>> gaps;  // (end, next start) over 500 us
    std::vector<uint64_t> after_sync;                 // start of the first launch after a sync
  };
  auto totals = [](const std::string& path) {
    Totals t;
    auto reader = TraceReader::open(path, app::builtin_views());
    EXPECT_TRUE(reader);
    SqlTraceSource src(**reader);
    uint64_t end = 0;
    bool synced = false;
    src.calls({}, [&](const Event& e) {
      if (end && e.ts_ns > end + 500 * kUs) t.gaps.push_back({end, e.ts_ns});
      end = std::max(end, e.ts_ns + e.dur_ns);
      if (e.kind == EventKind::kSync) synced = true;
      if (e.kind != EventKind::kLaunch) return;
      if (synced) t.after_sync.push_back(e.ts_ns);
      synced = false;
      ++t.n;
      t.sum += e.dur_ns;
      t.min = std::min(t.min, e.dur_ns);
      t.max = std::max(t.max, e.dur_ns);
    });
    EXPECT_EQ(src.error(), "");
    return t;
  };
  Totals a = totals(full), b = totals(tiered);
  EXPECT_EQ(b.n, a.n);
  EXPECT_EQ(b.sum, a.sum);
  EXPECT_EQ(b.min, a.min);
  EXPECT_EQ(b.max, a.max);
  EXPECT_EQ(b.after_sync, a.after_sync);
  EXPECT_EQ(b.gaps, a.gaps);
  EXPECT_EQ(a.gaps.size(), 199u);  // the host work between steps
}

TEST(Tiers, SameChainsStepsAndQuantilesWithinTheBoundOnAFoldedCopy) {
  Loop l = training_loop(200);
  std::string full = write_trace("chains-full.db", l.calls);
  std::string tiered = copy_of(full, "chains-tiered.db");
  fold_everything(tiered);
  Read a = analyze(full), b = analyze(tiered);
  ASSERT_FALSE(a.a.chains.empty());
  EXPECT_EQ(chain_keys(b.a), chain_keys(a.a));
  EXPECT_EQ(b.a.chains[0].summary, a.a.chains[0].summary);
  EXPECT_EQ(b.a.events, a.a.events);
  ASSERT_EQ(a.a.steps.processes.size(), 1u);
  ASSERT_EQ(b.a.steps.processes.size(), 1u);
  const auto& sa = a.a.steps.processes[0];
  const auto& sb = b.a.steps.processes[0];
  EXPECT_EQ(sb.steps.size(), sa.steps.size());
  EXPECT_EQ(sb.summary.median_ns, sa.summary.median_ns);
  EXPECT_EQ(sb.summary.launches_per_step, sa.summary.launches_per_step);
  EXPECT_NEAR(sb.summary.host_gap, sa.summary.host_gap, 0.001);
  EXPECT_EQ(sb.summary.gap_cause, sa.summary.gap_cause);
  // Quantiles come from the sketches: within 1% (and half a nanosecond) of the exact ones.
  for (const auto& s : a.a.stats.per_process) {
    const engine::OpStats* t = nullptr;
    for (const auto& x : b.a.stats.per_process)
      if (x.key == s.key) t = &x;
    ASSERT_TRUE(t) << s.key.op;
    EXPECT_EQ(t->count, s.count);
    EXPECT_EQ(t->sum_ns, s.sum_ns);
    EXPECT_EQ(t->min_ns, s.min_ns);
    EXPECT_EQ(t->max_ns, s.max_ns);
    EXPECT_EQ(t->errors, s.errors);
    for (auto [x, y] : {std::pair{s.p50, t->p50}, {s.p95, t->p95}, {s.p99, t->p99}})
      EXPECT_LE(std::abs(double(y) - double(x)), 0.01 * double(x) + 0.5) << s.key.op;
  }
}

// The real H100 traces (tests/fixtures/h100): the same chains, in the same order, with the
// same severities, whether the launches have rows or are folded.
std::string fixture(const std::string& name) {
  std::string out = test::temp_path("h100-" + name + ".db");
  std::string cmd = "xz -dc '" INGERO_FIXTURES_DIR "/h100/" + name + ".db.xz' > '" + out + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

TEST(Tiers, H100TracesGiveTheSameChainsFullAndFolded) {
  for (const char* name : {"starve", "emptycache", "resnet-clean", "resnet-contended"}) {
    std::string full = fixture(name);
    std::string tiered = copy_of(full, std::string(name) + "-tiered.db");
    Compacted c = fold_everything(tiered);
    // Traces of schema < 5 store a runtime launch and its driver launch as two rows, one
    // inside the other: those keep their rows (store/tiers.h), and cuDNN's own launches fold.
    EXPECT_GT(c.folded, 300u) << name;
    Read a = analyze(full), b = analyze(tiered);
    EXPECT_EQ(chain_keys(b.a), chain_keys(a.a)) << name;
    ASSERT_FALSE(b.a.chains.empty()) << name;
    EXPECT_EQ(b.a.chains[0].summary, a.a.chains[0].summary) << name;
    EXPECT_EQ(b.a.events, a.a.events) << name;
  }
}

TEST(Tiers, DamagedRunsAreAnErrorNotInventedCalls) {
  Loop l = training_loop(20);
  std::string db = write_trace("damaged-runs.db", l.calls);
  fold_everything(db);
  {
    auto w = Db::open(db, Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->exec("UPDATE call_runs SET sum_ns = 1 WHERE id = 1"));
  }
  auto reader = TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource src(**reader);
  uint64_t n = 0;
  src.calls({}, [&](const Event&) { ++n; });
  EXPECT_EQ(n, 0u);
  EXPECT_NE(src.error().find("damaged call_runs row"), std::string::npos) << src.error();
}

TEST(Tiers, ADamagedSketchIsAnErrorNotAQuantile) {
  Loop l = training_loop(20);
  std::string db = write_trace("damaged-sketch.db", l.calls);
  fold_everything(db);
  {
    auto w = Db::open(db, Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->exec("UPDATE call_seconds SET sketch = x'01ff' WHERE rowid = 1"));
  }
  auto reader = TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource src(**reader);
  EXPECT_FALSE(src.folded_call_sketches({}).has_value());
  EXPECT_NE(src.error().find("damaged call_seconds sketch"), std::string::npos) << src.error();
  // Folding more of it refuses too, rather than folding with a wrong p95.
  auto more = Db::open(db, Db::Mode::kReadWrite);
  ASSERT_TRUE(more);
  auto pass = fold_calls(**more, INT64_MAX);
  ASSERT_FALSE(pass);
  EXPECT_NE(pass.error().message.find("damaged call_seconds sketch"), std::string::npos);
}

TEST(Tiers, CompactRefusesTheOriginalImplementationsFilesAndLeavesThemAsTheyWere) {
  std::string go =
      copy_of(INGERO_FIXTURES_DIR "/ingero-go/pytorch-dataloader-starvation.db", "go-compact.db");
  std::string before = test::sha256_file(go);
  auto r = compact_trace(go, 1, app::builtin_views());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("original Go implementation"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(test::sha256_file(go), before);
}

TEST(Tiers, AFileFromBeforeSummariesGetsThemWhenCompacted) {
  Loop l = training_loop(50);
  std::string db = write_trace("old-schema.db", l.calls);
  {  // as a schema-6 file: no summaries, no runs
    auto w = Db::open(db, Db::Mode::kReadWrite);
    ASSERT_TRUE(w);
    ASSERT_TRUE(
        (*w)->exec("DROP TABLE call_seconds; DROP TABLE call_runs; DROP TABLE "
                   "call_folding; PRAGMA user_version = 6"));
  }
  Compacted c = fold_everything(db);
  EXPECT_EQ(c.calls_before, l.launches + l.others);
  EXPECT_GT(c.folded, l.launches / 2);
  EXPECT_EQ(test::query_int(db, "SELECT sum(calls) FROM call_seconds"),
            int64_t(l.launches + l.others));
  EXPECT_EQ(test::query_int(db, "PRAGMA user_version"), 7);
}

}  // namespace
}  // namespace ingero::store

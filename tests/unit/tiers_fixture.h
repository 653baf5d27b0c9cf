// Traces for the tiered-retention tests (tiers_test.cc, call_runs_test.cc): a synthetic
// training loop, written to a file, copied and folded, and analysed.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/builtin_backends.h"
#include "app/merge_traces.h"
#include "engine/analysis.h"
#include "store/compact.h"
#include "store/schema.h"
#include "store/sql_trace_source.h"
#include "store/tiers.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::store::tiers_fixture {

using hal::Event;
using hal::EventKind;
using hal::Field;

inline constexpr int64_t kOffset = 1'800'000'000'000'000'000;  // wall = mono + offset
inline constexpr uint64_t kUs = 1000, kMs = 1000000;

// Every member the engine reads of an event, as text.
inline std::string describe(const Event& e) {
  std::ostringstream o;
  o << e.ts_ns << ' ' << e.dur_ns << ' ' << e.pid << ' ' << e.tid << ' ' << e.comm_view() << ' '
    << e.cgroup_id << ' ' << e.vendor << ' ' << e.api << ' ' << e.op << ' ' << int(e.kind) << ' '
    << e.has_ret << ' ' << e.ret << ' ' << e.unfinished << ' ' << e.off_cpu_ns << ' ' << e.preempts
    << ' ' << e.switches << ' ' << e.peer_comm_view() << ' ' << e.stack_id << " [" << e.detail
    << "] [" << e.saddr << "] [" << e.daddr << "]";
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    if (e.has(Field(i))) o << ' ' << hal::field_name(Field(i)) << '=' << e.fields[i];
  return o.str();
}

// A run's total for `n` calls whose extremes are `lo` and `hi` (the middle ones anywhere
// between), drawn from `rng`: the shape a folded run's counts can have.
inline uint64_t random_run_total(std::mt19937_64& rng, uint64_t n, uint64_t lo, uint64_t hi) {
  uint64_t middle = n > 2 ? n - 2 : 0;
  return n == 1 ? lo : n == 2 ? lo + hi : lo + hi + middle * lo + rng() % (middle * (hi - lo) + 1);
}

inline Event call(uint64_t ts, uint64_t dur, const char* api, const char* op, EventKind kind,
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

inline Event launch(uint64_t ts, uint64_t dur, uint32_t tid = 10) {
  Event e = call(ts, dur, "cuda_runtime", "cudaLaunchKernel", EventKind::kLaunch, 10, tid);
  e.stack_id = 0x1111;
  return e;
}

// A training loop on one thread: per step 120 launches 20 us apart, some slow, failed or
// preempted ones, a device-to-host copy and a sync that waits 3 ms (the GPU is busy), then
// 8 ms of host work before the next step (the GPU idles: the step rules have something to
// find), 17 ms in steps 120-159.
inline constexpr uint64_t kDatasetStack = 0x3333;

// A kernel event of the thread pid 10 at ts.
inline Event host_event(uint64_t ts, const char* op, EventKind kind) {
  Event e;
  e.ts_ns = ts;
  e.pid = e.tid = 10;
  e.set_comm("python3");
  e.vendor = "host";
  e.api = "kernel";
  e.op = op;
  e.kind = kind;
  return e;
}

// The thread off the CPU from ts for dur: asleep, or preempted by "hog" (pid 999).
inline Event switch_out(uint64_t ts, uint64_t dur, bool preempted) {
  Event e = host_event(ts, "sched_switch", EventKind::kSchedSwitch);
  e.dur_ns = dur;
  e.set(Field::kFlags, preempted ? 1 : 0);
  e.set(Field::kState, preempted ? 0 : 1);
  if (preempted) {
    e.set(Field::kPeerPid, 999);
    e.set(Field::kPeerTid, 999);
    e.set_peer_comm("hog");
  }
  return e;
}

// `calls` with a second thread (tid 11) launching 7 us after each launch, for 3 us; `stack`,
// when not 0, is its launches' stack.
inline std::vector<Event> with_twin_thread(const std::vector<Event>& calls, uint64_t stack = 0) {
  std::vector<Event> out;
  for (const Event& e : calls) {
    out.push_back(e);
    if (e.kind != EventKind::kLaunch) continue;
    Event twin = e;
    twin.tid = 11;
    twin.ts_ns += 7 * kUs;
    twin.dur_ns = 3 * kUs;
    if (stack) twin.stack_id = stack;
    out.push_back(twin);
  }
  return out;
}

struct Loop {
  std::vector<Event> calls;
  uint64_t launches = 0, kept_launches = 0, others = 0;
};

inline Loop training_loop(int steps) {
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
    // The copy waits for the GPU off-CPU, as the tracer records it.
    l.calls.push_back(switch_out(copy.ts_ns + 100 * kUs, 2500 * kUs, false));
    t += copy.dur_ns + 5 * kUs;
    Event sync = call(t, 20 * kUs, "cuda_runtime", "cudaStreamSynchronize", EventKind::kSync);
    sync.stack_id = 0x2222;
    l.calls.push_back(sync);
    l.others += 2;
    t += sync.dur_ns;
    // The host works on-CPU in the dataset (on-CPU samples every millisecond) while the GPU idles.
    uint64_t work = (s >= 120 && s < 160 ? 17 : 8) * kMs;
    for (uint64_t at = 500 * kUs; at < work; at += kMs) {
      Event sample = host_event(t + at, "cpu_sample", EventKind::kCpuSample);
      sample.stack_id = kDatasetStack;
      l.calls.push_back(sample);
    }
    t += work;
  }
  return l;
}

// A writer of `path` with its session begun (node n1) and the dataset's stack; `folding` off
// (as `trace --keep-all`): every call keeps its row, and the engine reads every call.
inline std::unique_ptr<TraceWriter> begin_trace(const std::string& path, bool folding = false,
                                                const std::string& node = "n1") {
  auto w = TraceWriter::open(path);
  EXPECT_TRUE(w) << (w ? "" : w.error().message);
  if (!w) return nullptr;
  (*w)->set_folding(folding);
  SessionInfo si;
  si.node = node;
  si.mono_offset_ns = kOffset;
  EXPECT_TRUE((*w)->begin_session(si));
  hal::StackFrame f;
  f.python = true;
  f.function = "SlowDS.__getitem__";
  f.file = "train.py";
  f.line = 15;
  EXPECT_TRUE((*w)->add_stack(kDatasetStack, {f}));
  return std::move(*w);
}

inline std::string write_trace(const std::string& name, const std::vector<Event>& calls,
                               bool folding = false, const std::string& node = "n1") {
  std::string path = test::temp_path(name);
  auto w = begin_trace(path, folding, node);
  size_t n = 0;
  for (const Event& e : calls) {
    EXPECT_TRUE(w->add(e));
    if (++n % 5000 == 0) {  // summaries are flushed as it goes
      EXPECT_TRUE(w->commit());
    }
  }
  EXPECT_TRUE(w->finish(SessionEnd{}));
  return path;
}

inline std::string copy_of(const std::string& path, const std::string& name) {
  std::string out = test::temp_path(name);
  std::filesystem::copy_file(path, out, std::filesystem::copy_options::overwrite_existing);
  return out;
}

// What folding made of a trace: the calls in runs, the runs.
struct FoldCount {
  uint64_t folded = 0, runs = 0;
};

// Folds every launch the policy allows (the whole trace is older than the full-row window),
// as `ingero compact` with a --full-rows of 0 would.
inline FoldCount fold_everything(const std::string& path) {
  if (test::query_int(path, "PRAGMA user_version") < kSchemaVersion) {  // an older file
    auto c = app::convert_trace(path);
    EXPECT_TRUE(c) << (c ? "" : c.error().message);
  }
  auto r = compact_trace(path, 0, app::builtin_views());
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return {uint64_t(test::query_int(path, "SELECT coalesce(sum(calls), 0) FROM call_runs")),
          uint64_t(test::query_int(path, "SELECT count(*) FROM call_runs"))};
}

struct Read {
  std::unique_ptr<TraceReader> reader;
  std::unique_ptr<SqlTraceSource> source;
  engine::Analysis a;
};

inline Read analyze(const std::string& path) {
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
inline std::set<std::string> chain_keys(const engine::Analysis& a) {
  std::set<std::string> out;
  for (const auto& c : a.chains) out.insert(c.id + " " + engine::severity_name(c.severity));
  return out;
}

// What tiered retention keeps of an analysis (`tiered`) against the same trace with every row
// (`full`): the same chains (the first one word for word), events and steps, counts, totals
// and extremes exact, and quantiles from the sketches within 1% (and half a nanosecond).
inline void expect_same_answers(const engine::Analysis& full, const engine::Analysis& tiered) {
  ASSERT_FALSE(full.chains.empty());
  EXPECT_EQ(chain_keys(tiered), chain_keys(full));
  EXPECT_EQ(tiered.chains[0].summary, full.chains[0].summary);
  EXPECT_EQ(tiered.events, full.events);
  ASSERT_EQ(tiered.steps.processes.size(), full.steps.processes.size());
  for (size_t i = 0; i < full.steps.processes.size(); ++i) {
    const auto& sa = full.steps.processes[i];
    const auto& sb = tiered.steps.processes[i];
    EXPECT_EQ(sb.steps.size(), sa.steps.size());
    EXPECT_EQ(sb.summary.median_ns, sa.summary.median_ns);
    EXPECT_EQ(sb.summary.launches_per_step, sa.summary.launches_per_step);
    EXPECT_NEAR(sb.summary.host_gap, sa.summary.host_gap, 0.001);
    EXPECT_EQ(sb.summary.gap_cause, sa.summary.gap_cause);
  }
  for (const auto& s : full.stats.per_process) {
    const engine::OpStats* t = nullptr;
    for (const auto& x : tiered.stats.per_process)
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

}  // namespace ingero::store::tiers_fixture

// explain names the tracer as the tracer where it preempts the training threads (issue 44,
// "Text glitches seen in real output"): on a planted trace whose session names the tracer's
// pid, on a file from before that column, and on a real trace.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "app/explain_report.h"
#include "engine/analysis.h"
#include "engine/result_json.h"
#include "store/sql_trace_source.h"
#include "store/sqlite_db.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"
#include "tests/unit/engine_replay.h"

namespace ingero::app {
namespace {

using engine::Chain;
using hal::Event;
using hal::EventKind;
using hal::Field;

constexpr uint64_t kMs = 1'000'000;

size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

// A trace whose sessions row names the tracer's pid, and a process that preempts 100 of 200
// syncs for 1 ms each (13 more by a kernel thread for 3 ms): `comm` and whether the session
// names it as the tracer.
engine::Analysis preempted_by(const std::string& path, const char* comm, uint32_t tracer_pid) {
  {
    auto w = store::TraceWriter::open(path);
    EXPECT_TRUE(w);
    store::SessionInfo si;
    si.node = "test";
    si.mono_offset_ns = 1'700'000'000'000'000'000;
    si.tracer_pid = tracer_pid;
    EXPECT_TRUE((*w)->begin_session(si));
    for (int i = 0; i < 200; ++i) {
      bool kthread = i % 16 == 0, hog = !kthread && i % 2 == 1;
      uint64_t off = kthread ? 3 * kMs : hog ? 1 * kMs : 0;
      Event e;
      e.ts_ns = uint64_t(i) * 10 * kMs;
      e.dur_ns = 2 * kMs + off;
      e.pid = e.tid = 100;
      e.set_comm("trainer");
      e.vendor = "nvidia";
      e.api = "cuda_runtime";
      e.op = "cudaStreamSynchronize";
      e.kind = EventKind::kSync;
      e.has_ret = true;
      if (off) preempt(e, off, kthread ? 77 : 4411, kthread ? "kdamond.0" : comm);
      EXPECT_TRUE((*w)->add(e));
    }
    EXPECT_TRUE((*w)->finish({}));
  }
  auto r = store::TraceReader::open(path);
  EXPECT_TRUE(r);
  store::SqlTraceSource src(**r);
  EXPECT_EQ(src.tracer_pids(std::nullopt),
            tracer_pid ? std::set<uint32_t>{tracer_pid} : std::set<uint32_t>{});
  return engine::analyze(src, engine::Window{});
}

const Chain* find_rule(const engine::Analysis& a, const std::string& rule) {
  for (const auto& c : a.chains)
    if (c.rule == rule) return &c;
  return nullptr;
}

// The tracer among the preemptors is named as the tracer, with the CPU it took, and the fix is
// about tracing, not about lowering a stranger's priority.
TEST(ExplainText, TheTracerAmongThePreemptorsIsNamedAsTheTracer) {
  auto a = preempted_by(test::temp_path("tracer.db"), "ingero", 4411);
  const Chain* c = find_rule(a, "cpu_contention");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->summary,
            "cudaStreamSynchronize avg=2.7ms (p50=3.0ms, p99=5.0ms, 26% of it off-CPU) \u2014 113 "
            "preemptions, 139ms off-CPU, the most (100, 100ms) by the tracer itself (ingero, pid "
            "4411, 100ms of CPU taken)");
  EXPECT_EQ(c->root_cause,
            "CPU contention: pid 100 was off-CPU for 26% of its cudaStreamSynchronize "
            "time; the CPU went mostly to the tracer itself (ingero, pid 4411, 100ms of CPU "
            "taken)");
  ASSERT_EQ(c->fixes.size(), 2u);
  EXPECT_EQ(c->fixes[1],
            "The tracer (ingero, pid 4411) took 100ms of CPU from these calls: give it a core of "
            "its own (taskset -c) away from the GPU-feeding threads, or trace with less "
            "(--no-stack, fewer backends)");

  // Another process of the same name is not the tracer when the session names another pid.
  auto other = preempted_by(test::temp_path("other.db"), "ingero", 999);
  const Chain* o = find_rule(other, "cpu_contention");
  ASSERT_NE(o, nullptr);
  EXPECT_NE(o->summary.find("113 preemptions, 139ms off-CPU, the most (100, 100ms) by ingero (pid "
                            "4411)"),
            std::string::npos)
      << o->summary;
  ASSERT_EQ(o->fixes.size(), 2u);
  EXPECT_EQ(o->fixes[1],
            "Lower the priority of ingero (pid 4411): nice -n 19, or move it to "
            "another cpuset");
}

// A file written before sessions.tracer_pid gains the column when a writer opens it: its
// sessions read 0 ("not recorded"), a new session its tracer's pid.
TEST(ExplainText, AFileFromBeforeTracerPidGainsTheColumn) {
  std::string path = test::temp_path("before-tracer-pid.db");
  {
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w);
    store::SessionInfo si;
    si.tracer_pid = 77;
    ASSERT_TRUE((*w)->begin_session(si));
    ASSERT_TRUE((*w)->finish({}));
  }
  {
    auto raw = store::Db::open(path, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(raw);
    ASSERT_TRUE((*raw)->exec("ALTER TABLE sessions DROP COLUMN tracer_pid"));
  }
  {
    auto r = store::TraceReader::open(path);
    ASSERT_TRUE(r);
    store::SqlTraceSource src(**r);
    EXPECT_EQ(src.tracer_pids(std::nullopt), std::set<uint32_t>{});
  }
  {
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w) << w.error().message;
    store::SessionInfo si;
    si.node = "b";
    si.tracer_pid = 4242;
    ASSERT_TRUE((*w)->begin_session(si));
    ASSERT_TRUE((*w)->finish({}));
  }
  EXPECT_EQ(test::query_rows(path, "SELECT tracer_pid FROM sessions ORDER BY id"),
            (std::vector<std::vector<std::string>>{{"0"}, {"4242"}}));
  auto r = store::TraceReader::open(path);
  ASSERT_TRUE(r);
  store::SqlTraceSource src(**r);
  EXPECT_EQ(src.tracer_pids(std::nullopt), std::set<uint32_t>{4242});
  EXPECT_EQ(src.tracer_pids(std::string("b")), std::set<uint32_t>{4242});
  EXPECT_EQ(src.tracer_pids(std::string("a")), std::set<uint32_t>{});
}

// The real contended trace (tests/fixtures/h100/resnet-contended), with its sessions row saying
// that the CPU hog (noisy_neighbor, pid 579) was the tracer, as a file from before
// sessions.tracer_pid gains the column: every chain and the step summary name it as the tracer.
TEST(ExplainText, TheTracerIsNamedAsTheTracerOnARealTrace) {
  std::string db = test::temp_path("h100-contended.db");
  ASSERT_TRUE(test::unpack_fixture("h100/resnet-contended", db));
  {
    auto raw = store::Db::open(db, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(raw);
    ASSERT_TRUE(
        (*raw)->exec("ALTER TABLE sessions ADD COLUMN tracer_pid INTEGER NOT NULL "
                     "DEFAULT 0; UPDATE sessions SET tracer_pid = 579"));
  }
  auto r = store::TraceReader::open(db);
  ASSERT_TRUE(r) << r.error().message;
  store::SqlTraceSource src(**r);
  auto a = engine::analyze(src, engine::Window{});
  ASSERT_EQ(a.steps.processes.size(), 1u);
  EXPECT_EQ(
      a.steps.processes[0].summary.text,
      "median step 32.9ms: GPU idle \u2265 11% (no device data: lower bound): a thread feeding "
      "the GPU preempted 61% of the step, by the tracer itself (noisy_neighbor, pid 579) 23%, "
      "pt_data_worker "
      "(pid 599) 12%, pt_data_worker (pid 598) 8%, its own threads (cuda-EvtHandlr, "
      "pt_autograd_0, pt_data_pin, python3) 51%");
  ASSERT_FALSE(a.chains.empty());
  const Chain& c = a.chains[0];
  EXPECT_EQ(c.summary,
            "CPU contention in the training steps: the threads of python3 (pid 580) that feed the "
            "GPU were preempted 61% of the step time, 23% of it by the tracer itself "
            "(noisy_neighbor, pid 579, 813ms of CPU taken)");
  ASSERT_EQ(c.fixes.size(), 2u);
  EXPECT_EQ(c.fixes[1],
            "The tracer (noisy_neighbor, pid 579) took 813ms of CPU from these calls: give it a "
            "core of its own (taskset -c) away from the GPU-feeding threads, or trace with less "
            "(--no-stack, fewer backends)");
  // Nowhere is it named as a stranger.
  std::ostringstream out;
  print_report(out, a, ReportOptions{});
  EXPECT_EQ(out.str().find("noisy_neighbor (pid 579)"), std::string::npos) << out.str();
  EXPECT_EQ(count_of(out.str(), "Lower the priority of noisy_neighbor"), 0u);
  // Six per-op chains say it in their summary and their timeline, the steps chain in its summary.
  EXPECT_EQ(count_of(out.str(), " by the tracer itself (noisy_neighbor, pid 579, "), 13u)
      << out.str();
}

}  // namespace
}  // namespace ingero::app

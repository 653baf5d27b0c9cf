// The step model and the step rules on the real H100 traces (tests/fixtures/h100; ground truth
// in its README), replayed through the real store::SqlTraceSource. The traces are exact, so are the
// expectations: step counts, median steps, the breakdown, the first chain.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "app/demo_scenarios.h"
#include "app/explain_report.h"
#include "engine/analysis.h"
#include "store/sql_trace_source.h"
#include "test_paths.h"
#include "tests/support/h100_fixture.h"
#include "tests/support/trace_db.h"

namespace ingero::app {
namespace {

using engine::Severity;

// Decompressed once per test binary run, under the per-run temporary directory.
std::string fixture(const std::string& name) { return test::h100_fixture(name); }

struct Fixture {
  std::unique_ptr<store::TraceReader> reader;
  std::unique_ptr<store::SqlTraceSource> source;
  engine::Analysis a;
  const engine::StepSeries& only() const {
    EXPECT_EQ(a.steps.processes.size(), 1u);
    return a.steps.processes.at(0);
  }
  const engine::Chain& first() const { return a.chains.at(0); }
};

Fixture analyze_fixture(const std::string& name) {
  auto r = store::TraceReader::open(fixture(name));
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  Fixture f;
  f.reader = std::move(*r);
  f.source = std::make_unique<store::SqlTraceSource>(*f.reader);
  f.a = engine::analyze(*f.source, engine::Window{});
  EXPECT_EQ(f.source->error(), "");
  return f;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

uint64_t top_level(const engine::StepSeries& s, const std::string& op, uint64_t* nested = nullptr) {
  for (const auto& o : s.ops)
    if (o.op == op) {
      if (nested) *nested = o.nested;
      return o.calls;
    }
  return 0;
}

void no_false_causes(const engine::Analysis& a) {
  for (const auto& c : a.chains) {
    EXPECT_FALSE(has(c.summary, "memory pressure")) << c.summary;
    EXPECT_FALSE(has(c.summary, "block I/O")) << c.summary;
    for (const auto& f : c.fixes) EXPECT_FALSE(has(f, "checkpoint")) << c.summary << ": " << f;
  }
}

// DataLoader without workers, 0.2 ms of CPU per sample: the GPU idles ~80% of each ~16 ms step
// while the host builds the batch that next(dl).to(dev) at faults.py:35 uploads.
// `explain` opens with the step summary, before the call tables and chains.
TEST(StepsFixtures, ExplainOpensWithTheStepSummary) {
  auto f = analyze_fixture("starve");
  std::ostringstream out;
  print_report(out, f.a, ReportOptions{"starve", "", false, std::nullopt});
  std::string text = out.str();
  size_t steps = text.find("Training steps\n");
  ASSERT_NE(steps, std::string::npos) << text;
  EXPECT_LT(steps, text.find("GPU API calls"));
  std::string line = text.substr(steps + 15, text.find('\n', steps + 15) - steps - 15);
  EXPECT_EQ(line, "  " + f.a.process_name(f.only().pid) + " (pid " + std::to_string(f.only().pid) +
                      "): median step 16.0ms: GPU idle ≥ 86% (no device data: lower bound): "
                      "host on-CPU before <module> (faults.py:35)");
  // Nowhere a bare "GPU idle N%": the fixtures have no device data.
  EXPECT_EQ(text.find("GPU idle 8"), std::string::npos) << text;
}

TEST(StepsFixtures, StarveIsDataLoaderStarvationAtTheUploadLine) {
  auto f = analyze_fixture("starve");
  const auto& s = f.only();
  EXPECT_EQ(s.cadence, engine::Cadence::kSync);
  // 40 iterations: the loss read (faults.py:43) marks 40 step ends, so 39 steps.
  EXPECT_TRUE(has(s.cadence_note, "faults.py:43")) << s.cadence_note;
  EXPECT_EQ(s.steps.size(), 39u);
  EXPECT_EQ(s.summary.steps, 39u);
  EXPECT_EQ(s.summary.median_ns, 15'986'544u);
  EXPECT_NEAR(s.summary.gpu_idle, 0.862, 0.001);
  EXPECT_NEAR(s.summary.host_gap, 0.857, 0.001);
  EXPECT_EQ(s.summary.gap_cause, "on-CPU");
  EXPECT_EQ(s.summary.gap_where, "<module> (faults.py:35)");
  EXPECT_EQ(s.summary.text,
            "median step 16.0ms: GPU idle ≥ 86% (no device data: lower bound): host on-CPU "
            "before <module> (faults.py:35)");
  EXPECT_FALSE(s.summary.device_data);
  EXPECT_FALSE(s.summary.busy_measured);
  for (const auto& st : s.steps) {
    EXPECT_EQ(st.launches, 26u);
    EXPECT_EQ(st.round_trips, 2u);  // the upload's sync (line 35) and the loss read (line 43)
    EXPECT_EQ(st.wait_ns + st.enqueue_ns + st.api_ns + st.host_ns, st.duration());
    EXPECT_EQ(st.gap.total(), st.host_gap_ns);
  }
  // Runtime calls and the driver calls inside them count once.
  uint64_t nested = 0;
  EXPECT_EQ(top_level(s, "cudaLaunchKernel"), 728u);
  EXPECT_EQ(top_level(s, "cuLaunchKernel", &nested), 240u);
  EXPECT_EQ(nested, 728u);
  EXPECT_EQ(top_level(s, "cuStreamSynchronize", &nested), 0u);
  EXPECT_EQ(nested, 84u);

  const auto& c = f.first();
  EXPECT_EQ(c.rule, "data_loader_starvation");
  EXPECT_EQ(c.severity, Severity::kHigh);
  EXPECT_TRUE(has(c.summary, "idle \u2265 85% of each 16.0ms step")) << c.summary;
  EXPECT_TRUE(has(c.summary, "<module> (faults.py:35)")) << c.summary;
  EXPECT_TRUE(has(c.root_cause, "forked no worker process")) << c.root_cause;
  ASSERT_FALSE(c.stacks.empty());
  EXPECT_TRUE(has(c.stacks[0].frames.back(), "faults.py:35")) << c.stacks[0].frames.back();
  ASSERT_FALSE(c.fixes.empty());
  EXPECT_TRUE(has(c.fixes[0], "num_workers > 0")) << c.fixes[0];
  for (const auto& other : f.a.chains) {
    if (&other == &c) continue;
    EXPECT_EQ(other.severity, Severity::kLow) << other.summary;
  }
  no_false_causes(f.a);
}

// torch.cuda.empty_cache() after every step (faults.py:47).
TEST(StepsFixtures, EmptyCacheIsAllocatorChurnAtTheEmptyCacheLine) {
  auto f = analyze_fixture("emptycache");
  const auto& s = f.only();
  EXPECT_EQ(s.cadence, engine::Cadence::kSync);
  EXPECT_EQ(s.steps.size(), 59u);
  EXPECT_EQ(s.summary.median_ns, 2'525'290u);
  for (const auto& st : s.steps) {
    EXPECT_EQ(st.frees, 3u);
    EXPECT_EQ(st.allocs, 3u);
  }
  const auto& c = f.first();
  EXPECT_EQ(c.rule, "allocator_churn");
  EXPECT_EQ(c.severity, Severity::kHigh);
  EXPECT_TRUE(
      has(c.summary,
          "3 frees per step at <module> (faults.py:47); 3 allocations, 2 of them at <module> "
          "(faults.py:42)"))
      << c.summary;
  ASSERT_GE(c.stacks.size(), 1u);
  EXPECT_TRUE(has(c.stacks[0].frames.back(), "faults.py:47")) << c.stacks[0].frames.back();
  ASSERT_FALSE(c.fixes.empty());
  EXPECT_EQ(c.fixes[0].rfind("Remove the empty_cache() call at <module> (faults.py:47)", 0), 0u)
      << c.fixes[0];
  no_false_causes(f.a);
}

// A healthy loop: nothing above LOW, and no invented memory pressure.
TEST(StepsFixtures, ResnetCleanHasNoHighOrMediumChain) {
  auto f = analyze_fixture("resnet-clean");
  const auto& s = f.only();
  EXPECT_EQ(s.cadence, engine::Cadence::kSync);
  EXPECT_TRUE(has(s.cadence_note, "step (train.py:40)")) << s.cadence_note;  // loss.item()
  EXPECT_EQ(s.steps.size(), 149u);
  EXPECT_EQ(s.summary.steps, 149u);
  EXPECT_EQ(s.summary.median_ns, 18'154'297u);  // README: median step 18 ms traced
  EXPECT_EQ(s.summary.launches_per_step, 339u);
  // Where the launches come from: the forward pass, out = model(x).
  EXPECT_EQ(s.summary.launch_where, "step (train.py:35)");
  EXPECT_EQ(s.summary.launch_site_calls, 22'499u);
  EXPECT_EQ(s.summary.launches, 50'507u);
  for (const auto& c : f.a.chains) {
    if (c.rule != "launch_bound") continue;
    EXPECT_TRUE(has(c.summary,
                    ", the most (45%) from step (train.py:35) and waits for the GPU "
                    "only 0% of the step; GPU idle ≥ 7% (no device data: lower "
                    "bound)"))
        << c.summary;
  }
  EXPECT_LT(s.summary.host_gap, 0.10);
  EXPECT_LT(s.summary.preempted, 0.01);
  for (const auto& c : f.a.chains) EXPECT_EQ(c.severity, Severity::kLow) << c.summary;
  no_false_causes(f.a);
  // The model-load tails are warm-up.
  for (const auto& c : f.a.chains) {
    if (c.rule != "tail_latency") continue;
    EXPECT_TRUE(has(c.summary, "(warm-up)")) << c.summary;
  }
}

// The loop, its workers and noisy_neighbor share CPU 0: steps of ~32 ms.
TEST(StepsFixtures, ResnetContendedIsCpuContentionByNoisyNeighbor) {
  auto f = analyze_fixture("resnet-contended");
  const auto& s = f.only();
  EXPECT_EQ(s.steps.size(), 149u);
  EXPECT_EQ(s.summary.warmup_steps, 1u);
  EXPECT_EQ(s.summary.median_ns, 32'870'469u);  // README: median step 32 ms
  EXPECT_NEAR(s.summary.preempted, 0.614, 0.001);
  ASSERT_FALSE(s.summary.preemptors.empty());
  EXPECT_EQ(s.summary.preemptors[0].comm, "noisy_neighbor");
  EXPECT_EQ(s.summary.preemptors[0].pid, 579u);
  const auto& c = f.first();
  EXPECT_EQ(c.rule, "cpu_contention");
  EXPECT_EQ(c.severity, Severity::kHigh);
  // 23% of the preempted time: its own threads took 51%, so not "mostly" (helper-76).
  EXPECT_TRUE(
      has(c.summary, "preempted 61% of the step time, 23% of it by noisy_neighbor (pid 579)"))
      << c.summary;
  ASSERT_GE(c.fixes.size(), 2u);
  EXPECT_TRUE(has(c.fixes[0], "away from noisy_neighbor (pid 579)")) << c.fixes[0];
  // The per-op contention chains still name the hog, without the false memory pressure.
  size_t per_op = 0;
  for (const auto& x : f.a.chains)
    if (x.rule == "cpu_contention" && x.op == "cudaLaunchKernel" && &x != &c) {
      ++per_op;
      EXPECT_TRUE(has(x.summary, "noisy_neighbor (pid 579)")) << x.summary;
    }
  EXPECT_EQ(per_op, 1u);
  no_false_causes(f.a);
}

// One rank's collectives: 40 all_reduce, 10 broadcast (ncclBcast calls ncclBroadcast inside:
// counted once), 5 all_gather; no training loop, so no steps and no chain.
TEST(StepsFixtures, NcclOneRankCountsCollectivesOnceAndHasNoCadence) {
  auto f = analyze_fixture("nccl-1rank");
  const auto& s = f.only();
  uint64_t nested = 0;
  EXPECT_EQ(top_level(s, "ncclAllReduce"), 40u);
  EXPECT_EQ(top_level(s, "ncclBcast"), 10u);
  EXPECT_EQ(top_level(s, "ncclBroadcast", &nested), 0u);
  EXPECT_EQ(nested, 10u);
  EXPECT_EQ(top_level(s, "ncclAllGather"), 5u);
  EXPECT_EQ(s.cadence, engine::Cadence::kWindows);
  EXPECT_EQ(s.cadence_note.rfind("no periodic step: ", 0), 0u) << s.cadence_note;
  // A 1 s window and the 55.7 ms left at the end: their "median window" was the remainder.
  EXPECT_EQ(s.summary.text.rfind("no periodic step (2 windows of at most 1.0s): GPU idle ", 0), 0u)
      << s.summary.text;
  uint32_t collectives = 0;
  for (const auto& st : s.steps) collectives += st.collectives;
  EXPECT_EQ(collectives, 55u);
  EXPECT_TRUE(f.a.chains.empty()) << f.a.chains[0].summary;
}

// A straggler rank's own step findings say why it is late: they join its straggler chain
// instead of competing with it (demo: rank 5, pid 5005, ~290 ms late every collective).
TEST(StepsFixtures, StragglerStepFindingsJoinTheStragglerChain) {
  std::string path = test::temp_path("straggler.db");
  {
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE(write_demo("nccl-straggler", **w));
    ASSERT_TRUE((*w)->finish({}));
  }
  auto r = store::TraceReader::open(path);
  ASSERT_TRUE(r);
  store::SqlTraceSource src(**r);
  auto a = engine::analyze(src, engine::Window{});
  ASSERT_FALSE(a.chains.empty());
  const auto& c = a.chains[0];
  EXPECT_EQ(c.rule, "collective_straggler");
  size_t steps = 0;
  for (const auto& t : c.timeline) {
    if (t.layer != "STEPS") continue;
    ++steps;
    EXPECT_TRUE(has(t.detail, "(pid 5005)")) << t.detail;
  }
  EXPECT_GE(steps, 1u);
  for (const auto& x : a.chains) {
    if (x.rule == "collective_straggler") continue;
    EXPECT_NE(x.pids, std::vector<uint32_t>{5005}) << x.summary;
  }
}

}  // namespace
}  // namespace ingero::app

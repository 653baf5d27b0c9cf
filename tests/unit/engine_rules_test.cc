// Every engine rule, through the replay path: synthetic events are written by the same
// TraceWriter the tracer uses and read back through the same TraceSource `explain` uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "app/demo_scenarios.h"
#include "engine/analysis.h"
#include "engine/host_context.h"
#include "store/sql_trace_source.h"
#include "tests/support/trace_db.h"
#include "tests/unit/engine_replay.h"

namespace ingero::app {
namespace {

size_t count_severity(const engine::Analysis& a, Severity s) {
  size_t n = 0;
  for (const auto& c : a.chains) n += c.severity == s;
  return n;
}

engine::Analysis demo(const std::string& name) {
  std::string path = test::temp_path(name + ".db");
  {
    auto w = store::TraceWriter::open(path);
    EXPECT_TRUE(w);
    EXPECT_TRUE(write_demo(name, **w));
    EXPECT_TRUE((*w)->finish({}));
  }
  static std::vector<std::unique_ptr<store::TraceReader>> keep;
  keep.push_back(std::move(*store::TraceReader::open(path)));
  store::SqlTraceSource src(*keep.back());
  return engine::analyze(src, engine::Window{});
}

TEST(EngineRules, CpuContentionNamesOpProcessAndPreemptor) {
  auto a = demo("incident");
  const auto* c = find(a, "cpu_contention");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_EQ(c->op, "cudaStreamSynchronize");
  EXPECT_EQ(c->pids, std::vector<uint32_t>{4242});
  EXPECT_NE(c->summary.find("by noisy_neighbor (pid 4411)"), std::string::npos) << c->summary;
  EXPECT_GE(c->tail_ratio, 10.0);
  std::vector<std::string> layers;
  for (const auto& t : c->timeline) layers.push_back(t.layer);
  EXPECT_EQ(layers, (std::vector<std::string>{"SYSTEM", "HOST", "CUDA"}));
  EXPECT_FALSE(c->fixes.empty());
  // The neighbour runs in another cgroup: named with its path.
  const auto* n = find(a, "noisy_neighbour");
  ASSERT_NE(n, nullptr);
  EXPECT_NE(n->summary.find("/system.slice/batch-reindex.service"), std::string::npos)
      << n->summary;
}

TEST(EngineRules, DataloaderStarvationIsHostContentionWithWorkers) {
  auto a = demo("dataloader-starvation");
  const auto* c = find(a, "host_cpu_contention");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->pids, std::vector<uint32_t>{2233});
  EXPECT_NE(c->summary.find("4 worker processes forked (pt_data_worker x4)"), std::string::npos)
      << c->summary;
  const auto* t = find(a, "cpu_contention");
  ASSERT_NE(t, nullptr);
  EXPECT_NE(t->summary.find("pt_data_worker"), std::string::npos);
  // The breakdown names the workers separately.
  size_t workers = 0;
  for (const auto& p : a.processes) workers += p.role == "worker of 2233";
  EXPECT_EQ(workers, 4u);
}

// A process without workers losing its CPU to another process on a busy host: the chain names
// who took it, and its fixes are about that process, not about DataLoader workers it has none of.
TEST(EngineRules, HostContentionNamesItsPreemptorAndNoWorkerFixesWithoutWorkers) {
  Replay r;
  for (int i = 0; i < 1000; ++i) {  // 10 s of steps: launches and a sync every 10 ms
    uint64_t t = uint64_t(i) * 10 * kMs;
    for (int k = 0; k < 4; ++k)
      r.add(
          r.call(100, "cudaLaunchKernel", EventKind::kLaunch, t + uint64_t(k) * 20 * kUs, 8 * kUs));
    r.add(r.call(100, "cudaStreamSynchronize", EventKind::kSync, t + 200 * kUs, 1 * kMs));
  }
  for (int i = 0; i < 500; ++i) {  // preempted 50 times a second, 2 ms each: 10% of the time
    bool slept = i % 5 == 0;       // one in five slept instead
    r.add(r.switched_out(100, uint64_t(i) * 20 * kMs + 3 * kMs, 2 * kMs, !slept, slept ? 0 : 200,
                         "hog"));
  }
  for (int s = 0; s < 12; ++s)
    ASSERT_TRUE(r.writer().add_snapshot(
        {int64_t(1'700'000'000 + s) * int64_t(kS), 97.0, 30.0, 4.0, 16000, 0, 1}));
  auto a = r.analyze();
  const auto* c = find(a, "host_cpu_contention");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->summary.find(", preempted mostly by hog (pid 200)"), std::string::npos)
      << c->summary;
  // Its sleeps are no contention: 400 preemptions of 2 ms, not 500 switches and 1 s off-CPU.
  EXPECT_NE(c->summary.find(" preempted 400 times (800ms waiting for a CPU, the longest 2.0ms)"),
            std::string::npos)
      << c->summary;
  EXPECT_NE(c->root_cause.find("keeps losing the CPU to hog (pid 200)"), std::string::npos)
      << c->root_cause;
  EXPECT_NE(c->explanation.find("Preempted by: hog (pid 200) 100%."), std::string::npos)
      << c->explanation;
  EXPECT_EQ(c->fixes, (std::vector<std::string>{
                          "Pin the training process to dedicated cores (taskset -c), away from "
                          "hog (pid 200)",
                          "Lower the priority of hog (pid 200): nice -n 19, or move it to other "
                          "cores"}));
}

TEST(EngineRules, HiddenSyncIsRepeatedSynchronisation) {
  auto a = demo("hidden-sync");
  const auto* c = find(a, "repeated_sync");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_NE(c->summary.find("15,360 host round-trips (7,680 syncs, 7,680 small D2H copies)"),
            std::string::npos)
      << c->summary;
}

TEST(EngineRules, GraphRecaptureStormAndCollapse) {
  auto a = demo("graph-recapture");
  ASSERT_NE(find(a, "graph_recapture"), nullptr);
  ASSERT_NE(find(a, "graph_launch_collapse"), nullptr);
  ASSERT_NE(find(a, "launch_collapse"), nullptr);
  EXPECT_EQ(find(a, "launch_collapse")->pids, std::vector<uint32_t>{8100});
}

TEST(EngineRules, CollectiveStraggler) {
  auto a = demo("nccl-straggler");
  const auto* c = find(a, "collective_straggler");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_NE(
      c->summary.find("rank 5 (torchrun-rank, pid 5005) arrives last in 100% of 100 collectives"),
      std::string::npos)
      << c->summary;
  EXPECT_NE(c->root_cause.find("off-CPU"), std::string::npos) << c->root_cause;
}

// Severity means something: a steady loop on an idle machine raises nothing HIGH (nothing at all).
// The launch-bound demo: the chain names the kernels that make up the step and the line that
// launches them, and says how many launches had no name.
TEST(EngineRules, LaunchBoundNamesItsKernelsAndTheirLine) {
  auto a = demo("launch-bound");
  const engine::Chain* lb = nullptr;
  for (const auto& c : a.chains)
    if (c.rule == "launch_bound") lb = &c;
  ASSERT_NE(lb, nullptr);
  EXPECT_NE(lb->summary.find(": 400 \u00d7 `add` and 400 \u00d7 `mul` per step from tiny_step "
                             "(train.py:8)"),
            std::string::npos)
      << lb->summary;
  EXPECT_NE(lb->explanation.find("960 of its 96,960 launches have no kernel name"),
            std::string::npos)
      << lb->explanation;
  const engine::ProcessKernels* k = a.kernels.find(5151);
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->kernels.size(), 3u);
  EXPECT_EQ(k->kernels[0].full_name, "add(float*, float const*, float const*, int)");
  EXPECT_EQ(k->kernels[0].launches, 48000u);
  EXPECT_EQ(k->kernels[0].source, "registration");
  EXPECT_EQ(k->kernels[2].label(), "function 0x55d0c0a02000");
  EXPECT_EQ(k->kernels[2].per_step_median, 8u);
}

TEST(EngineRules, SteadyWorkloadOnIdleHostHasNoHighChain) {
  Replay r;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 5000; ++i) {
    uint64_t t = uint64_t(i) * 10 * kMs;
    for (int k = 0; k < 8; ++k)
      r.add(r.call(100, "cudaLaunchKernel", EventKind::kLaunch, t + uint64_t(k) * 20 * kUs,
                   8 * kUs + rng() % (2 * kUs)));
    r.add(r.call(100, "cudaStreamSynchronize", EventKind::kSync, t + 200 * kUs,
                 2 * kMs + rng() % (200 * kUs)));
  }
  for (int s = 0; s < 50; ++s)
    ASSERT_TRUE(r.writer().add_snapshot(
        {int64_t(1'700'000'000 + s) * int64_t(kS), 12.0, 30.0, 0.3, 16000, 0, 1}));
  auto a = r.analyze();
  EXPECT_EQ(count_severity(a, Severity::kHigh), 0u);
  EXPECT_TRUE(a.chains.empty()) << a.chains[0].summary;
}

TEST(EngineRules, TailWithoutHostCauseIsLow) {
  Replay r;
  for (int i = 0; i < 200; ++i)
    r.add(r.call(100, "cudaMalloc", EventKind::kAlloc, uint64_t(i) * kMs,
                 i % 50 == 0 ? 5 * kMs : 100 * kUs));
  auto a = r.analyze();
  ASSERT_EQ(a.chains.size(), 1u);
  EXPECT_EQ(a.chains[0].rule, "tail_latency");
  EXPECT_EQ(a.chains[0].severity, Severity::kLow);
}

// The process's own writes during its slow calls.
TEST(EngineRules, BlockIoDuringTheTail) {
  Replay r;
  for (int i = 0; i < 200; ++i) {
    uint64_t t = uint64_t(i) * 10 * kMs;
    bool slow = i % 20 == 0;
    r.add(
        r.call(100, "cuMemAlloc", EventKind::kAlloc, t, slow ? 8 * kMs : 100 * kUs, "cuda_driver"));
    if (slow) {
      for (int k = 0; k < 12; ++k) {
        Event b =
            r.host(100, "block_write", EventKind::kBlockIo, t + uint64_t(k) * 500 * kUs, 15 * kMs);
        b.set(Field::kBytes, 1 << 20);
        r.add(b);
      }
    }
  }
  auto a = r.analyze();
  const auto* c = find(a, "io_pressure");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->op, "cuMemAlloc");
  EXPECT_EQ(c->severity, Severity::kHigh);
  EXPECT_NE(c->summary.find("heavy block I/O"), std::string::npos);
  bool io_layer = false;
  for (const auto& t : c->timeline) io_layer |= t.layer == "IO";
  EXPECT_TRUE(io_layer);
}

// Another process's I/O at the same time is not a cause unless it saturates the device: in
// flight through 90% of the slow calls' time, one request 10 ms or more. Here a request of
// another process in each of the ten 8 ms calls: 2 ms is not a cause; 15 ms from 0.5 ms in is
// (the disk busy 94% of those calls' time). The slowest 5% reach down to p95, which here is a
// call of 100 us: judged over all 200 calls, the disk was busy 76% of their time, and the
// saturation was missed.
TEST(EngineRules, OtherProcessIoIsACauseOnlyWhenItSaturatesTheDevice) {
  for (uint64_t io : {2 * kMs, 15 * kMs}) {
    SCOPED_TRACE(io);
    Replay r;
    for (int i = 0; i < 200; ++i) {
      uint64_t t = uint64_t(i) * 10 * kMs;
      bool slow = i % 20 == 0;
      r.add(r.call(100, "cuMemAlloc", EventKind::kAlloc, t, slow ? 8 * kMs : 100 * kUs,
                   "cuda_driver"));
      if (slow) {
        Event b = r.host(200, "block_write", EventKind::kBlockIo, t + 500 * kUs, io);
        b.set(Field::kBytes, 1 << 20);
        r.add(b);
      }
    }
    auto a = r.analyze();
    const auto* c = find(a, "io_pressure");
    if (io == 2 * kMs) {
      EXPECT_EQ(c, nullptr);
      for (const auto& x : a.chains) {
        EXPECT_EQ(x.summary.find("block I/O"), std::string::npos) << x.summary;
        for (const auto& f : x.fixes) EXPECT_EQ(f.find("checkpoint"), std::string::npos) << f;
      }
      continue;
    }
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->op, "cuMemAlloc");
    EXPECT_NE(std::find(c->fixes.begin(), c->fixes.end(),
                        "Move the other I/O on this device away from the training volume, or cap "
                        "it (io.max on its cgroup)"),
              c->fixes.end());
  }
}

TEST(EngineRules, OomKillAndGpuOutOfMemory) {
  Replay r;
  Event k = r.host(300, "oom_kill", EventKind::kOomKill, kS, 0);
  k.set_comm("python3");
  k.set(Field::kPeerPid, 301);
  k.set_peer_comm("pt_data_worker");
  r.add(k);
  for (int i = 0; i < 5; ++i) {
    Event m = r.call(300, "cudaMalloc", EventKind::kAlloc, uint64_t(i) * kMs, 50 * kUs);
    m.set(Field::kBytes, 8ull << 30);
    if (i >= 3) {
      m.ret = 2;
      m.set(Field::kErrClass, uint64_t(hal::ErrorClass::kOutOfMemory));
    }
    r.add(m);
  }
  auto a = r.analyze();
  const auto* oom = find(a, "oom_kill");
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->severity, Severity::kHigh);
  EXPECT_EQ(oom->pids, std::vector<uint32_t>{300});
  const auto* gpu = find(a, "gpu_oom");
  ASSERT_NE(gpu, nullptr);
  EXPECT_NE(gpu->summary.find("2 of 5 cudaMalloc calls failed with out-of-memory"),
            std::string::npos)
      << gpu->summary;
}

// A rank whose init failed (its stale handle passed on) and whose 4 all-reduces then failed:
// the collectives report had them as 16 KiB reduced by rank 3 of 8 of that communicator. A
// failed init made no communicator, and a failed collective moved nothing: the 4 calls stand
// on their own handle, rank unknown (the process stands in), 0 bytes; rank 0's 2 good
// all-reduces are its communicator's.
TEST(EngineRules, FailedCollectivesAndInitsAreNoRanksWork) {
  Replay r;
  constexpr uint64_t kStale = 0x55d900001000, kGood = 0x77;
  Event bad = r.call(100, "ncclCommInitRank", EventKind::kCommInit, kMs, kMs, "nccl");
  bad.has_ret = true;
  bad.ret = 1;  // ncclUnhandledCudaError
  bad.set(Field::kCommunicator, kStale);
  bad.set(Field::kRank, 3);
  bad.set(Field::kNranks, 8);
  r.add(bad);
  Event good = r.call(200, "ncclCommInitRank", EventKind::kCommInit, kMs, kMs, "nccl");
  good.set(Field::kCommunicator, kGood);
  good.set(Field::kRank, 0);
  good.set(Field::kNranks, 2);
  r.add(good);
  for (int i = 0; i < 4; ++i) {
    Event c =
        r.call(100, "ncclAllReduce", EventKind::kCollective, (10 + uint64_t(i)) * kMs, kMs, "nccl");
    c.has_ret = true;
    c.ret = 4;  // ncclInvalidArgument
    c.set(Field::kCommunicator, kStale);
    c.set(Field::kBytes, 4096);
    r.add(c);
  }
  for (int i = 0; i < 2; ++i) {
    Event c =
        r.call(200, "ncclAllReduce", EventKind::kCollective, (10 + uint64_t(i)) * kMs, kMs, "nccl");
    c.set(Field::kCommunicator, kGood);
    c.set(Field::kBytes, 1024);
    r.add(c);
  }
  r.analyze();
  auto rep = engine::compute_collectives(r.source(), engine::Window{});
  ASSERT_EQ(rep.groups.size(), 2u);
  const auto& good_ranks = rep.groups.at(kGood).at("ncclAllReduce");
  ASSERT_EQ(good_ranks.size(), 1u);
  EXPECT_EQ(good_ranks.begin()->second.rank, 0u);
  EXPECT_EQ(good_ranks.begin()->second.bytes, 2048u);
  const auto& stale = rep.groups.at(kStale).at("ncclAllReduce");
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale.begin()->first, 100u);  // no rank: the process's pid stands in
  EXPECT_EQ(stale.begin()->second.nranks, 0u);
  EXPECT_EQ(stale.begin()->second.bytes, 0u);
  EXPECT_EQ(stale.begin()->second.starts.size(), 4u);
}

// 100 all-reduces, five of them slow, while `counter` of mlx5_0 port 1 rises by 42 between
// the samples at 5 s and 10 s, when the slow calls ran: the fabric_errors chain, if any.
std::optional<engine::Chain> fabric_chain(const std::string& counter) {
  Replay r;
  for (int i = 0; i < 100; ++i) {
    bool slow = i >= 60 && i < 65;
    Event c = r.call(100, "ncclAllReduce", EventKind::kCollective, uint64_t(i) * 100 * kMs,
                     slow ? 80 * kMs : 2 * kMs, "nccl");
    r.add(c);
  }
  int64_t base = 1'700'000'000'000'000'000;
  for (int s = 0; s <= 10; s += 5) {
    store::DeviceCounterRow row{base + int64_t(s) * int64_t(kS),
                                "rdma",
                                "mlx5_0",
                                counter,
                                "events",
                                1,
                                uint64_t(s >= 10 ? 42 : 0),
                                uint64_t(s >= 10 ? 42 : 0),
                                true,
                                {{"transport", "InfiniBand"}, {"state", "4: ACTIVE"}}};
    EXPECT_TRUE(r.writer().add_device_counter(row));
  }
  auto a = r.analyze();
  const auto* c = find(a, "fabric_errors");
  if (!c) return std::nullopt;
  return *c;
}

TEST(EngineRules, CollectiveTailWithFabricErrors) {
  auto c = fabric_chain("port_rcv_errors");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->op, "ncclAllReduce");
  EXPECT_NE(c->summary.find("mlx5_0/1 port_rcv_errors +42"), std::string::npos) << c->summary;
  EXPECT_EQ(c->severity, Severity::kMedium);
}

// engine.md: link downs, symbol errors and link error recoveries are physical: HIGH.
TEST(EngineRules, PhysicalFabricErrorsAreHigh) {
  for (const char* counter : {"link_downed", "symbol_error", "link_error_recovery"}) {
    auto c = fabric_chain(counter);
    ASSERT_TRUE(c) << counter;
    EXPECT_NE(c->summary.find(std::string("mlx5_0/1 ") + counter + " +42"), std::string::npos)
        << c->summary;
    EXPECT_EQ(c->severity, Severity::kHigh) << counter;
  }
}

// The system snapshots are those of the events' span: the tracer's snapshot before the first
// event and after the last one made a file's figures ("peaked at 11%") where the same trace in
// ClickHouse, whose window ends at the last event, said 9%.
TEST(EngineRules, SystemSnapshotsAreThoseOfTheEventsSpan) {
  Replay r;
  for (int i = 0; i < 100; ++i)
    r.add(r.call(100, "cudaMalloc", EventKind::kAlloc, kS + uint64_t(i) * 10 * kMs, 50 * kUs));
  const int64_t base = r.writer().to_wall(0);
  for (auto [at, cpu] : {std::pair{kS / 2, 90.0}, std::pair{kS + kS / 2, 10.0},
                         std::pair{kS + 900 * kMs, 30.0}, std::pair{3 * kS, 80.0}}) {
    hal::HostSnapshot snap;
    snap.ts_ns = base + int64_t(at);
    snap.cpu_pct = cpu;
    ASSERT_TRUE(r.writer().add_snapshot(snap));
  }
  r.analyze();
  auto h = engine::collect_host_context(r.source(), engine::Window{});
  ASSERT_EQ(h.snapshots.size(), 2u);
  EXPECT_DOUBLE_EQ(h.cpu_max, 30.0);
  EXPECT_DOUBLE_EQ(h.cpu_avg, 20.0);
}

TEST(EngineRules, LaunchCollapseIgnoresIdleGaps) {
  // 200 launches/s with a 5 s gap where the process makes no GPU call at all: idle, no chain.
  Replay r;
  for (uint64_t s = 0; s < 20; ++s) {
    if (s >= 8 && s < 13) continue;
    for (int k = 0; k < 200; ++k)
      r.add(r.call(100, "cudaLaunchKernel", EventKind::kLaunch, s * kS + uint64_t(k) * 5 * kMs,
                   10 * kUs));
  }
  auto a = r.analyze();
  EXPECT_EQ(find(a, "launch_collapse"), nullptr);
}

}  // namespace
}  // namespace ingero::app

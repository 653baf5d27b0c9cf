// Calls in flight (issue 40) without BPF: the monitor over a scripted host (frames, scheduler
// states, /proc): what it reports, when, and how each report ends.
#include "capture/inflight_monitor.h"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_runtime_probes.h"
#include "backends/rdma/rdma_backend.h"
#include "capture/inflight_host.h"
#include "hal/event_sink.h"
#include "probe/record_decoder.h"

namespace ingero {
namespace {

using hal::Inflight;
using hal::ThreadState;
constexpr uint64_t kSec = 1'000'000'000ULL;

// What the monitor reads, scripted by the test.
class ScriptedHost final : public capture::InflightMonitor::Host {
 public:
  std::vector<ingero_inflight_rec> now;
  std::map<uint32_t, hal::ThreadSched> sched_of;
  std::map<uint32_t, char> proc;  // tid -> /proc state letter (absent: gone)
  std::map<uint32_t, std::vector<uint32_t>> tasks;
  std::map<uint32_t, uint64_t> sp;
  int thread_lists = 0;  // threads() calls
  Status frames(std::vector<ingero_inflight_rec>& out) override {
    out.insert(out.end(), now.begin(), now.end());
    return {};
  }
  std::optional<hal::ThreadSched> sched(uint32_t tid) override {
    auto it = sched_of.find(tid);
    if (it == sched_of.end()) return std::nullopt;
    return it->second;
  }
  char proc_state(uint32_t, uint32_t tid) override {
    auto it = proc.find(tid);
    return it == proc.end() ? 0 : it->second;
  }
  std::vector<uint32_t> threads(uint32_t pid) override {
    ++thread_lists;
    return tasks[pid];
  }
  uint64_t blocked_sp(uint32_t, uint32_t tid) override { return sp.count(tid) ? sp[tid] : 0; }
  std::string comm(uint32_t, uint32_t) override { return "trainer"; }
  uint64_t py_tstate(uint32_t) override { return 0; }
};

class Recorder final : public hal::EventSink {
 public:
  std::vector<hal::InflightReport> reports;
  Status on_event(const hal::Event&) override { return {}; }
  Status on_inflight(const hal::InflightReport& r) override {
    reports.push_back(r);
    return {};
  }
};

class InflightMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_ = backends::make_cuda_backend();
    for (const auto& s : backends::cuda::kRuntimeProbes)
      if (s.symbol == "cudaStreamSynchronize") spec_ = &s;
    ASSERT_NE(spec_, nullptr);
    sync_id_ = table_.add({cuda_.get(),
                           spec_,
                           {"nvidia", "cuda_runtime", 0, false},
                           "/lib/x.so",
                           "cudaStreamSynchronize"});
    host_.tasks[100] = {100, 101, 102};
    host_.proc = {{100, 'S'}, {101, 'S'}, {102, 'R'}};
  }
  // The frame of thread `tid` of pid 100 inside cudaStreamSynchronize(stream) since `start`.
  ingero_inflight_rec frame(uint32_t tid, uint64_t start, uint64_t stream) {
    ingero_inflight_rec r{};
    r.tid = tid;
    r.pid = 100;
    r.probe_id = sync_id_;
    r.start_ns = start;
    r.sp = 0x7ff000;
    auto recipe = hal::make_recipe(*spec_);
    r.nregs = recipe.nregs;
    r.nstack = recipe.stack_words;
    r.regs[0] = stream;
    r.depth = 1;
    return r;
  }
  capture::InflightMonitor make(uint64_t after = 5 * kSec) {
    capture::InflightMonitor::Options o;
    o.after_ns = after;
    o.refresh_ns = 5 * kSec;
    return capture::InflightMonitor(decoder_, host_, out_, o);
  }
  std::unique_ptr<hal::VendorBackend> cuda_;
  const hal::ProbeSpec* spec_ = nullptr;
  hal::ProbeTable table_;
  hal::CallDecoder decoder_{table_};
  uint32_t sync_id_ = 0;
  ScriptedHost host_;
  Recorder out_;
};

TEST_F(InflightMonitorTest, ReportedOnceOverTheThresholdWithArgumentsStateAndOtherThreads) {
  auto m = make();
  host_.now = {frame(100, 10 * kSec, 0xabc)};
  host_.sched_of[100] = {11 * kSec, 1};  // asleep since 11 s
  m.tick(14 * kSec);                     // 4 s in: not yet
  ASSERT_EQ(out_.reports.size(), 1u);
  EXPECT_TRUE(out_.reports[0].current.empty());
  m.tick(15 * kSec);  // 5 s in: reported
  ASSERT_EQ(out_.reports[1].current.size(), 1u);
  EXPECT_EQ(out_.reports[1].changed, std::vector<bool>{true});
  const Inflight& r = out_.reports[1].current[0];
  EXPECT_EQ(r.what, Inflight::What::kCall);
  EXPECT_EQ(r.status, Inflight::Status::kInFlight);
  EXPECT_EQ(r.call.op, "cudaStreamSynchronize");
  EXPECT_EQ(r.call.kind, hal::EventKind::kSync);
  EXPECT_EQ(r.call.get(hal::Field::kStream), 0xabcu);
  EXPECT_EQ(r.call.comm_view(), "trainer");
  EXPECT_EQ(r.call.ts_ns, 10 * kSec);
  EXPECT_EQ(r.call.dur_ns, 5 * kSec);
  EXPECT_EQ(r.call.off_cpu_ns, 4 * kSec);  // off since 11 s
  EXPECT_EQ(r.reported_ns, 15 * kSec);
  EXPECT_EQ(r.state, ThreadState::kSleeping);
  EXPECT_EQ(r.state_since_ns, 11 * kSec);
  EXPECT_EQ(r.others_sleeping, 1u);  // 101
  EXPECT_EQ(r.others_running, 1u);   // 102
  EXPECT_EQ(r.others_io, 0u);
  // Unchanged a second later: in the report, no row to write; rewritten after refresh_ns.
  m.tick(16 * kSec);
  EXPECT_EQ(out_.reports[2].changed, std::vector<bool>{false});
  EXPECT_EQ(out_.reports[2].current[0].call.dur_ns, 6 * kSec);
  EXPECT_EQ(out_.reports[2].current[0].reported_ns, 15 * kSec);
  m.tick(20 * kSec);
  EXPECT_EQ(out_.reports[3].changed, std::vector<bool>{true});
  EXPECT_EQ(m.counters().reported, 1u);
  EXPECT_EQ(m.counters().ticks, 4u);
}

TEST_F(InflightMonitorTest, EndsReturnedUnfinishedOrStopped) {
  auto m = make();
  host_.now = {frame(100, 10 * kSec, 1), frame(101, 10 * kSec, 2), frame(102, 10 * kSec, 3)};
  m.tick(16 * kSec);
  ASSERT_EQ(out_.reports[0].current.size(), 3u);
  // 100's call returns at 17 s (the pipeline hands the call over); 101's thread is gone.
  hal::Event ret;
  ret.pid = 100;
  ret.tid = 100;
  ret.ts_ns = 10 * kSec;
  ret.dur_ns = 7 * kSec;
  m.note_call(ret);
  host_.proc.erase(101);
  host_.now = {frame(102, 10 * kSec, 3)};
  m.tick(18 * kSec);
  const auto& ended = out_.reports[1].ended;
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0].call.tid, 100u);
  EXPECT_EQ(ended[0].status, Inflight::Status::kReturned);
  EXPECT_EQ(ended[0].ended_ns, 17 * kSec);
  EXPECT_EQ(ended[0].call.dur_ns, 7 * kSec);
  EXPECT_EQ(ended[1].call.tid, 101u);
  EXPECT_EQ(ended[1].status, Inflight::Status::kUnfinished);
  EXPECT_EQ(ended[1].state, ThreadState::kExited);
  EXPECT_EQ(ended[1].ended_ns, 18 * kSec);
  m.stop(19 * kSec);
  ASSERT_EQ(out_.reports[2].ended.size(), 1u);
  EXPECT_EQ(out_.reports[2].ended[0].call.tid, 102u);
  EXPECT_EQ(out_.reports[2].ended[0].status, Inflight::Status::kStopped);
  EXPECT_EQ(out_.reports[2].ended[0].ended_ns, 19 * kSec);
  EXPECT_EQ(out_.reports[2].ended[0].call.dur_ns, 9 * kSec);
}

// ibv_get_async_event blocks by design for as long as the job runs (NCCL's IB async thread):
// it was reported stuck from --inflight-after on, a HIGH "hung call" in explain and a stuck
// thread in `status` on every rank traced with --rdma-verbs. It is never reported; a stuck
// sync beside it is.
TEST_F(InflightMonitorTest, AWaitForDeviceEventsIsNeverStuck) {
  auto rdma = backends::make_rdma_backend(true);
  const hal::ProbeSpec* wait = nullptr;
  for (const auto& t : rdma->tables())
    for (const auto& s : t)
      if (s.symbol == "ibv_get_async_event") wait = &s;
  ASSERT_NE(wait, nullptr);
  uint32_t wait_id = table_.add(
      {rdma.get(), wait, {"rdma", "ibverbs", 0, false}, "/lib/y.so", "ibv_get_async_event"});
  auto m = make();
  ingero_inflight_rec w = frame(101, 10 * kSec, 0);
  w.probe_id = wait_id;
  host_.now = {frame(100, 10 * kSec, 0xabc), w};
  m.tick(16 * kSec);
  ASSERT_EQ(out_.reports[0].current.size(), 1u);
  EXPECT_EQ(out_.reports[0].current[0].call.op, "cudaStreamSynchronize");
  EXPECT_EQ(m.counters().reported, 1u);
  EXPECT_EQ(m.counters().event_waits, 1u);
  host_.now = {frame(100, 10 * kSec, 0xabc)};  // the wait returned (an event came)
  m.tick(17 * kSec);
  EXPECT_TRUE(out_.reports[1].ended.empty());
  m.stop(18 * kSec);
  ASSERT_EQ(out_.reports[2].ended.size(), 1u);
  EXPECT_EQ(out_.reports[2].ended[0].call.op, "cudaStreamSynchronize");
}

// A rank's thread outside any call for --inflight-after is `idle`; its episode ends `returned`
// when it makes a traced call again and `unfinished` (exited) when its thread is gone.
TEST_F(InflightMonitorTest, IdleRankEndsReturnedOrUnfinished) {
  auto m = make();
  for (uint32_t tid : {101u, 102u}) {
    hal::Event c;
    c.pid = 100;
    c.tid = tid;
    c.kind = hal::EventKind::kCollective;
    c.ts_ns = 9 * kSec;
    c.dur_ns = kSec;
    c.set(hal::Field::kCommunicator, 0x77);
    m.note_call(c);
  }
  m.tick(16 * kSec);
  ASSERT_EQ(out_.reports[0].current.size(), 2u);
  for (const auto& r : out_.reports[0].current) {
    EXPECT_EQ(r.what, Inflight::What::kIdle);
    EXPECT_EQ(r.call.dur_ns, 6 * kSec);
  }
  hal::Event again;  // 101 calls again; 102 is killed
  again.pid = 100;
  again.tid = 101;
  again.kind = hal::EventKind::kSync;
  again.ts_ns = 16 * kSec;
  again.dur_ns = kSec / 2;
  m.note_call(again);
  host_.proc.erase(102);
  m.tick(17 * kSec);
  const auto& ended = out_.reports[1].ended;
  ASSERT_EQ(ended.size(), 2u);
  std::map<uint32_t, std::pair<Inflight::Status, ThreadState>> by_tid;
  for (const auto& r : ended) by_tid[r.call.tid] = {r.status, r.state};
  EXPECT_EQ(by_tid[101].first, Inflight::Status::kReturned);
  EXPECT_EQ(by_tid[102], (std::pair{Inflight::Status::kUnfinished, ThreadState::kExited}));
}

// A rank is watched from its communicator's init: one that never reaches the first collective
// its peers wait in was in no row ("not in this trace", helper-74). One whose communicator was
// destroyed, or has no peer, is never idle: they were idle for ever.
TEST_F(InflightMonitorTest, RanksAreWatchedFromTheirInitUntilTheirCommunicatorGoes) {
  auto m = make();
  auto call = [](uint32_t tid, hal::EventKind kind, uint64_t comm, uint64_t nranks, int ret) {
    hal::Event c;
    c.pid = 100;
    c.tid = tid;
    c.kind = kind;
    c.ts_ns = 9 * kSec;
    c.dur_ns = kSec;
    c.has_ret = true;
    c.ret = ret;
    c.set(hal::Field::kCommunicator, comm);
    if (kind == hal::EventKind::kCommInit) {
      c.set(hal::Field::kNranks, nranks);
      c.set(hal::Field::kRank, 1);
      c.set(hal::Field::kCommHash, 0xabc);
    }
    return c;
  };
  m.note_call(call(101, hal::EventKind::kCommInit, 0x77, 2, 0));  // then nothing
  m.note_call(call(102, hal::EventKind::kCommInit, 0x88, 1, 0));  // alone
  m.note_call(call(102, hal::EventKind::kCollective, 0x88, 0, 0));
  m.tick(16 * kSec);
  ASSERT_EQ(out_.reports[0].current.size(), 1u);
  const Inflight& idle = out_.reports[0].current[0];
  EXPECT_EQ(idle.what, Inflight::What::kIdle);
  EXPECT_EQ(idle.call.tid, 101u);
  EXPECT_EQ(idle.call.get(hal::Field::kRank), 1u);
  EXPECT_EQ(idle.call.get(hal::Field::kCommHash), 0xabcu);
  EXPECT_EQ(idle.seq, 0u);  // no collective completed
  // Its communicator destroyed, its episode ends and none begins again.
  hal::Event destroy = call(101, hal::EventKind::kCommDestroy, 0x77, 0, 0);
  destroy.ts_ns = 16 * kSec;
  m.note_call(destroy);
  m.tick(17 * kSec);
  ASSERT_EQ(out_.reports[1].ended.size(), 1u);
  EXPECT_EQ(out_.reports[1].ended[0].status, Inflight::Status::kReturned);
  m.tick(40 * kSec);
  EXPECT_TRUE(out_.reports[2].current.empty());
}

TEST_F(InflightMonitorTest, StaleFrameAboveABlockedThreadIsNotReported) {
  auto m = make();
  host_.now = {frame(100, 1 * kSec, 1)};
  host_.sp[100] = 0x7ff100;  // blocked in a system call above the call's entry: it unwound
  m.tick(10 * kSec);
  EXPECT_TRUE(out_.reports[0].current.empty());
  EXPECT_EQ(m.counters().stale, 1u);
  EXPECT_EQ(m.counters().reported, 0u);
}

// A thread a debugger holds (ptrace: t) or a signal stopped (T) is stopped, not asleep: from the
// scheduler's state when it left its CPU, else from /proc.
TEST_F(InflightMonitorTest, AStoppedThreadIsStoppedNotAsleep) {
  auto m = make();
  host_.now = {frame(100, 1 * kSec, 1), frame(101, 1 * kSec, 2)};
  host_.sched_of[100] = {2 * kSec, 0x8};  // __TASK_TRACED: a debugger stopped it
  host_.proc[101] = 'T';                  // no scheduler data: /proc says stopped
  host_.proc[102] = 't';
  m.tick(10 * kSec);
  ASSERT_EQ(out_.reports[0].current.size(), 2u);
  for (const Inflight& r : out_.reports[0].current) {
    EXPECT_EQ(r.state, ThreadState::kStopped) << r.call.tid;
    EXPECT_EQ(hal::thread_state_name(r.state), "stopped");
  }
  EXPECT_EQ(out_.reports[0].current[0].state_since_ns, 2 * kSec);
  EXPECT_EQ(out_.reports[0].current[0].others_sleeping, 2u);  // 101 and 102: not running
  EXPECT_EQ(out_.reports[0].current[0].others_running, 0u);
}

TEST_F(InflightMonitorTest, ThreadStatesAreReadOncePerProcessPerTick) {
  auto m = make();
  host_.now = {frame(100, 1 * kSec, 1), frame(101, 1 * kSec, 2), frame(102, 1 * kSec, 3)};
  m.tick(10 * kSec);
  EXPECT_EQ(out_.reports[0].current.size(), 3u);
  EXPECT_EQ(host_.thread_lists, 1);
}

}  // namespace
}  // namespace ingero

// Calls in flight (issue 40) without BPF: the monitor over a scripted host (frames, scheduler
// states, /proc), the `inflight` rows through the writer and back, the one-line account of a
// stuck thread, and `ingero status` on a file no tracer writes (the gauges:
// inflight_metrics_test.cc).
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_runtime_probes.h"
#include "capture/inflight_host.h"
#include "capture/inflight_monitor.h"
#include "engine/hangs.h"
#include "probe/record_decoder.h"
#include "serve/mcp/server.h"
#include "store/file_access.h"
#include "store/inflight_rows.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/builtin_tool_host.h"
#include "tests/support/h100_fixture.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

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

TEST(InflightText, HangLineNamesProcessOpSecondsLineAndOtherThreads) {
  engine::InflightRow row;
  row.in.call.pid = 4411;
  row.in.call.tid = 4411;
  row.in.call.op = "cudaStreamSynchronize";
  row.in.state = ThreadState::kSleeping;
  row.in.others_sleeping = 3;
  std::vector<engine::StackFrameInfo> stack = {
      {false, "cudaStreamSynchronize", "", 0, "libcudart.so.13", ""},
      {true, "step", "/srv/train.py", 88, "", ""}};
  EXPECT_EQ(engine::hang_line(row, "python3", stack, 312 * int64_t(kSec)),
            "python3 (pid 4411) has been inside `cudaStreamSynchronize` for 312 s at "
            "train.py:88 (step) (asleep); its other threads are asleep");
  row.in.status = Inflight::Status::kStopped;
  EXPECT_EQ(engine::hang_line(row, "python3", stack, 4200 * int64_t(kSec) / 1000),
            "python3 (pid 4411) was still inside `cudaStreamSynchronize` after 4.2 s at "
            "train.py:88 (step) when tracing stopped");
}

constexpr int64_t kOffset = 1'700'000'000'000'000'000LL;

// A trace whose session never stopped, holding one call in flight (thread 8 of pid 7 inside
// cudaStreamSynchronize(0xabc) from 10 s, last seen at 20 s, in I/O), written as the tracer
// writes it: a first row, then its replacement, then an unchanged report that writes nothing.
std::string write_stuck_file(const std::string& name) {
  std::string path = test::temp_path(name);
  {
    auto w = store::TraceWriter::open(path);
    EXPECT_TRUE(w) << w.error().message;
    if (!w) return path;
    store::SessionInfo si;
    si.node = "gpu-a";
    si.mono_offset_ns = kOffset;
    si.flags = "stack,inflight-after=5";
    EXPECT_TRUE((*w)->begin_session(si));
    Inflight r;
    r.call.pid = 7;
    r.call.tid = 8;
    r.call.set_comm("trainer");
    r.call.vendor = "nvidia";
    r.call.api = "cuda_runtime";
    r.call.op = "cudaStreamSynchronize";
    r.call.kind = hal::EventKind::kSync;
    r.call.ts_ns = 10 * kSec;
    r.call.dur_ns = 5 * kSec;
    r.call.set(hal::Field::kStream, 0xabc);
    r.reported_ns = r.seen_ns = 15 * kSec;
    r.state = ThreadState::kSleeping;
    r.others_sleeping = 2;
    hal::InflightReport rep;
    rep.current = {r};
    rep.changed = {true};
    EXPECT_TRUE((*w)->on_inflight(rep));
    r.seen_ns = 20 * kSec;
    r.call.dur_ns = 10 * kSec;
    r.state = ThreadState::kIo;
    rep.current = {r};
    EXPECT_TRUE((*w)->on_inflight(rep));
    rep.changed = {false};  // unchanged: nothing written
    rep.current[0].seen_ns = 21 * kSec;
    EXPECT_TRUE((*w)->on_inflight(rep));
    EXPECT_TRUE((*w)->commit());
  }
  return path;
}

// A row through the writer: replaced while it lasts (one row per call), read back exactly.
TEST(InflightStore, RowsReplaceTheirCallAndReadBackExactly) {
  std::string path = write_stuck_file("inflight-rows.db");
  EXPECT_EQ(test::query_rows(path,
                             "SELECT node, what, status, pid, tid, comm, op, kind, entered_at, "
                             "reported_at, seen_at, ended_at, dur_ns, thread_state, stream, seq, "
                             "others_sleeping FROM inflight"),
            (std::vector<std::vector<std::string>>{
                {"gpu-a", "call", "in_flight", "7", "8", "trainer", "cudaStreamSynchronize", "sync",
                 std::to_string(kOffset + 10 * int64_t(kSec)),
                 std::to_string(kOffset + 15 * int64_t(kSec)),
                 std::to_string(kOffset + 20 * int64_t(kSec)), "0", std::to_string(10 * kSec),
                 "in I/O", std::to_string(0xabc), "NULL", "2"}}));
  auto reader = store::TraceReader::open(path);
  ASSERT_TRUE(reader);
  store::StringPool strings;
  auto read = store::read_stuck_now((*reader)->db(), path, std::nullopt, strings);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_FALSE(read->live);
  ASSERT_TRUE(read->session);
  EXPECT_EQ(read->session->node, "gpu-a");
  EXPECT_EQ(read->session->inflight_after_s, 5.0);
  ASSERT_EQ(read->rows.size(), 1u);
  const Inflight& in = read->rows[0].in;
  EXPECT_EQ(in.call.op, "cudaStreamSynchronize");
  EXPECT_EQ(in.call.ts_ns, uint64_t(kOffset) + 10 * kSec);
  EXPECT_EQ(in.call.get(hal::Field::kStream), 0xabcu);
  EXPECT_EQ(in.state, ThreadState::kIo);
  EXPECT_EQ(in.seq, hal::kNoSeq);

  // `ingero status` on it: no tracer writes it and its session never stopped.
  auto st = test::run_ingero({"status", "--db", path});
  ASSERT_EQ(st.rc, 0) << st.err;
  EXPECT_EQ(st.out, path +
                        ": not being traced (its tracer ended without stopping); what it last "
                        "recorded (calls in flight longer than 5.0 s are reported)\n"
                        "trainer (pid 7, thread 8) has been inside `cudaStreamSynchronize` for "
                        "10 s (in uninterruptible I/O); its other threads are asleep\n"
                        "    args: stream=0xabc\n");
  auto js = test::run_ingero({"status", "--db", path, "--json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["tracer_running"], false);
  ASSERT_EQ(j["stuck"].size(), 1u);
  EXPECT_EQ(j["stuck"][0]["op"], "cudaStreamSynchronize");
  EXPECT_EQ(j["stuck"][0]["args"]["stream"], 0xabc);
  EXPECT_EQ(j["stuck"][0]["waited_s"], 10.0);
  EXPECT_EQ(j["stuck"][0]["state"], "in I/O");
}

// A trace recorded by a build that did not report calls in flight (the H100 fixtures): none
// found says nothing about what was stuck, where status said "nothing was stuck"; its JSON has
// no inflight_after_s.
TEST(InflightStore, WithoutCallsInFlightRecordedWhatWasStuckIsUnknown) {
  std::string db = test::h100_fixture("starve", "status");
  auto st = test::run_ingero({"status", "--db", db});
  ASSERT_EQ(st.rc, 0) << st.err;
  EXPECT_EQ(st.out, db + ": the tracer stopped at 2026-11-22 18:21:33 UTC; what was stuck then "
                         "(recorded by a build that did not report calls in flight)\n"
                         "whether anything was stuck is unknown: calls in flight were not "
                         "recorded\n");
  auto js = test::run_ingero({"status", "--db", db, "--json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_FALSE(j.contains("inflight_after_s"));
  EXPECT_EQ(j["stuck"], nlohmann::json::array());
  // The MCP tool an agent asks says the same.
  serve::mcp::ToolContext ctx(db, test::builtin_tool_host());
  ASSERT_TRUE(ctx.validate());
  serve::mcp::Server server(ctx);
  serve::mcp::Session session;
  auto call = [&](const std::string& method, nlohmann::json params) {
    nlohmann::json msg = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", method}, {"params", params}};
    auto r = server.handle(msg.dump(), session, nullptr);
    return r ? *r : nlohmann::json();
  };
  call("initialize", {{"protocolVersion", serve::mcp::kLatestVersion},
                      {"capabilities", nlohmann::json::object()},
                      {"clientInfo", {{"name", "gtest"}, {"version", "1"}}}});
  auto r = call("tools/call", {{"name", "get_inflight"}, {"arguments", nlohmann::json::object()}});
  EXPECT_EQ(r["result"]["content"][0]["text"],
            "the tracer stopped at 2026-11-22 18:21:33 UTC; stuck then (recorded by a build that "
            "did not report calls in flight)\n"
            "whether anything was stuck is unknown: calls in flight were not recorded\n")
      << r.dump();
}

// A launch seen at entry only is never in flight: where the session timed 1 launch in 32, a
// thread stuck inside another one would not show, and "nothing was stuck" says so (a thread
// held 9 s inside cudaLaunchKernel read as "nothing is stuck"). Timing every launch, it does not.
TEST(InflightStore, NothingStuckSaysWhichLaunchesAreWatched) {
  for (int timing : {32, 1}) {
    std::string path = test::temp_path("timing-" + std::to_string(timing) + ".db");
    {
      auto w = store::TraceWriter::open(path);
      ASSERT_TRUE(w) << w.error().message;
      store::SessionInfo si;
      si.node = "gpu-a";
      si.mono_offset_ns = kOffset;
      si.flags = "stack,inflight-after=5,launch-timing=" + std::to_string(timing);
      ASSERT_TRUE((*w)->begin_session(si));
      store::SessionEnd end;
      end.exit_reason = "test";
      end.stopped_at_ns = kOffset + 30 * kSec;
      ASSERT_TRUE((*w)->finish(end));
    }
    auto st = test::run_ingero({"status", "--db", path});
    ASSERT_EQ(st.rc, 0) << st.err;
    std::string last = st.out.substr(st.out.find('\n') + 1);
    EXPECT_EQ(last, timing == 32 ? "nothing was stuck (kernel launches are watched only when "
                                   "timed, 1 in 32 per thread, or without uprobe sessions those "
                                   "in timing windows: a thread stuck inside another would not "
                                   "show; --launch-timing 1 watches every one)\n"
                                 : "nothing was stuck\n")
        << st.out;
  }
}

// A new version of a row takes an id above every id the file held, even where the old one was
// the last (the shipper sends rows by id: a reused id would never ship), and `ingero merge`
// carries the rows, under the merged session and node.
TEST(InflightStore, NewVersionsTakeNewIdsAndMergeCarriesThem) {
  std::string path = write_stuck_file("inflight-ids.db");
  EXPECT_EQ(test::query_rows(path, "SELECT id, seen_at - entered_at FROM inflight"),
            (std::vector<std::vector<std::string>>{{"2", std::to_string(10 * kSec)}}));
  std::string merged = test::temp_path("inflight-merged.db");
  auto mr = test::run_ingero({"merge", path, "-o", merged, "--force-node", "gpu-z"});
  ASSERT_EQ(mr.rc, 0) << mr.err;
  EXPECT_EQ(test::query_rows(merged,
                             "SELECT i.node, i.status, i.op, i.stream, i.session_id = s.id FROM "
                             "inflight i, sessions s"),
            (std::vector<std::vector<std::string>>{
                {"gpu-z", "in_flight", "cudaStreamSynchronize", std::to_string(0xabc), "1"}}));
}

// "Now" for a live session's waits: on the host that traces it, this host's monotonic clock +
// the session's offset (its rows' clock, which a step of the wall clock does not move);
// elsewhere, or without an offset, the wall clock.
TEST(InflightStore, ALiveSessionsNowIsItsOwnClockOnItsHost) {
  auto clock_ns = [](clockid_t c) {
    timespec ts{};
    clock_gettime(c, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
  };
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  constexpr int64_t kHour = 3'600'000'000'000LL;
  store::LatestSession s;
  s.host = host;
  // The session's clock an hour ahead of this host's wall clock.
  s.mono_offset_ns = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC) + kHour;
  auto ahead = [&] { return double(store::session_now_ns(s) - clock_ns(CLOCK_REALTIME)) / 1e9; };
  EXPECT_NEAR(ahead(), 3600.0, 1.0);
  s.host = std::string(host) + "-elsewhere";
  EXPECT_NEAR(ahead(), 0.0, 1.0);
  s.host = host;
  s.mono_offset_ns = 0;
  EXPECT_NEAR(ahead(), 0.0, 1.0);
  // The file's latest session carries both.
  std::string path = write_stuck_file("inflight-clock.db");
  auto reader = store::TraceReader::open(path);
  ASSERT_TRUE(reader);
  auto latest = store::latest_session((*reader)->db());
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->mono_offset_ns, kOffset);
  EXPECT_EQ((*latest)->host, "");
}

// While a tracer holds the file's writer lock, the wait counts to now, and status says so.
TEST(InflightStore, StatusCountsToNowWhileATracerHoldsTheFile) {
  std::string path = write_stuck_file("inflight-live.db");
  auto lock = store::TraceLock::acquire(path);
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_TRUE(store::trace_being_written(path));
  auto st = test::run_ingero({"status", "--db", path, "--json"});
  ASSERT_EQ(st.rc, 0) << st.err;
  auto j = nlohmann::json::parse(st.out);
  EXPECT_EQ(j["tracer_running"], true);
  ASSERT_EQ(j["stuck"].size(), 1u);
  // Entered at kOffset + 10 s (2023-11-14): years ago, not the 10 s the row recorded.
  EXPECT_GT(j["stuck"][0]["waited_s"].get<double>(), 365 * 86400.0);
  auto text = test::run_ingero({"status", "--db", path});
  EXPECT_EQ(text.out.rfind(path + ": being traced now (calls in flight longer than 5.0 s are "
                                  "reported)\ntrainer (pid 7, thread 8) has been inside "
                                  "`cudaStreamSynchronize` for ",
                           0),
            0u)
      << text.out;
  lock = store::TraceLock();
  EXPECT_FALSE(store::trace_being_written(path));
}

TEST(InflightMcp, GetInflightListsTheStuckCallWithItsArguments) {
  std::string db = write_stuck_file("inflight-mcp.db");
  serve::mcp::ToolContext ctx(db, test::builtin_tool_host());
  ASSERT_TRUE(ctx.validate());
  serve::mcp::Server server(ctx);
  serve::mcp::Session session;
  auto rpc = [&](const std::string& method, nlohmann::json params) {
    static int id = 0;
    nlohmann::json msg = {{"jsonrpc", "2.0"}, {"id", ++id}, {"method", method}, {"params", params}};
    auto r = server.handle(msg.dump(), session, nullptr);
    EXPECT_TRUE(r.has_value());
    return r ? *r : nlohmann::json();
  };
  rpc("initialize", {{"protocolVersion", serve::mcp::kLatestVersion},
                     {"capabilities", nlohmann::json::object()},
                     {"clientInfo", {{"name", "gtest"}, {"version", "1"}}}});
  auto r = rpc("tools/call",
               {{"name", "get_inflight"}, {"arguments", nlohmann::json::object()}})["result"];
  ASSERT_FALSE(r.value("isError", false)) << r.dump();
  const auto& s = r["structuredContent"];
  EXPECT_EQ(s["tracer_running"], false);
  EXPECT_EQ(s["node"], "gpu-a");
  EXPECT_EQ(s["inflight_after_s"], 5.0);
  EXPECT_EQ(s["omitted"], 0);
  ASSERT_EQ(s["stuck"].size(), 1u);
  const auto& t = s["stuck"][0];
  EXPECT_EQ(t["op"], "cudaStreamSynchronize");
  EXPECT_EQ(t["kind"], "sync");
  EXPECT_EQ(t["pid"], 7);
  EXPECT_EQ(t["tid"], 8);
  EXPECT_EQ(t["status"], "in_flight");
  EXPECT_EQ(t["args"], (nlohmann::json{{"stream", 0xabc}}));
  EXPECT_EQ(t["waited_s"], 10.0);
  EXPECT_EQ(t["line"],
            "trainer (pid 7, thread 8) has been inside `cudaStreamSynchronize` for 10 s (in "
            "uninterruptible I/O); its other threads are asleep");
  // Another process: nothing.
  auto none = rpc("tools/call", {{"name", "get_inflight"}, {"arguments", {{"pid", 9}}}})["result"];
  EXPECT_EQ(none["structuredContent"]["stuck"].size(), 0u);
  EXPECT_NE(none["content"][0]["text"].get<std::string>().find("\nnothing was stuck\n"),
            std::string::npos);
}

TEST(InflightProc, StatAndSyscallLinesParse) {
  EXPECT_EQ(capture::stat_state("42 (a) b) S 1 2 3"), 'S');
  EXPECT_EQ(capture::stat_state("42 (x) D 1"), 'D');
  EXPECT_EQ(capture::stat_state("garbage"), 0);
  EXPECT_EQ(capture::syscall_sp("0 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffc1230 0x7f00aa"), 0x7ffc1230u);
  EXPECT_EQ(capture::syscall_sp("-1 0x7ffc1000 0x7f00aa"), 0x7ffc1000u);
  EXPECT_EQ(capture::syscall_sp("running"), 0u);
  EXPECT_EQ(capture::syscall_sp("0 zz qq"), 0u);
}

}  // namespace
}  // namespace ingero

// Calls in flight (issue 40) without BPF: the `inflight` rows through the writer and back, the
// one-line account of a stuck thread, and `ingero status` on a file no tracer writes (the
// monitor over a scripted host: inflight_monitor_test.cc; the gauges: inflight_metrics_test.cc).
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_runtime_probes.h"
#include "capture/inflight_host.h"
#include "capture/inflight_monitor.h"
#include "engine/chain.h"
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
#include "tests/support/mcp_calls.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

namespace ingero {
namespace {

using hal::Inflight;
using hal::ThreadState;
constexpr uint64_t kSec = 1'000'000'000ULL;

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
// With `frames`, the call's stack holds that many Python frames, f0 (train.py:1) innermost.
std::string write_stuck_file(const std::string& name, const std::string& comm = "trainer",
                             int frames = 0) {
  std::string path = test::temp_path(name);
  {
    auto w = store::TraceWriter::open(path);
    EXPECT_TRUE(w) << w.error().message;
    if (!w) return path;
    store::SessionInfo si;
    si.node = "gpu-a";
    si.mono_offset_ns = kOffset;
    si.started_at_ns = kOffset + 5 * kSec;
    si.flags = "stack,inflight-after=5";
    EXPECT_TRUE((*w)->begin_session(si));
    Inflight r;
    r.call.pid = 7;
    r.call.tid = 8;
    r.call.set_comm(comm);
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
    if (frames > 0) {
      std::vector<hal::StackFrame> stack;
      for (int i = 0; i < frames; ++i)
        stack.push_back({true, "", std::nullopt, "", "f" + std::to_string(i), "train.py", i + 1});
      EXPECT_TRUE((*w)->add_stack(0x5757, stack));
      r.stack_id = 0x5757;
    }
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

// MCP get_inflight's result on the trace `db`, asked by an agent of an in-process server.
nlohmann::json get_inflight(const std::string& db,
                            const nlohmann::json& args = nlohmann::json::object());

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
  // MCP gives the sentence whole (as data): cut at 64 characters, it lost how long, where and
  // what the thread does.
  auto r = get_inflight(path);
  EXPECT_NE(
      r["content"][0]["text"].get<std::string>().find(
          "\n\"trainer (pid 7, thread 8) has been inside `cudaStreamSynchronize` for 10 s (in "
          "uninterruptible I/O); its other threads are asleep\"\n"),
      std::string::npos)
      << r.dump();
}

// MCP get_inflight's result on the trace `db`, asked by an agent of an in-process server.
nlohmann::json get_inflight(const std::string& db, const nlohmann::json& args) {
  serve::mcp::ToolContext ctx(db, test::builtin_tool_host());
  EXPECT_TRUE(ctx.validate());
  serve::mcp::Server server(ctx);
  serve::mcp::Session session;
  return test::call_tool(server, session, "get_inflight", args, 1);
}

// A trace recorded by a build that did not report calls in flight (the H100 fixtures): none
// found says nothing about what was stuck, where status said "nothing was stuck"; its JSON has
// no inflight_after_s.
// status reads the last session: a trace file that holds none, and a missing file, are
// failures (exit 1) that say so, never an empty answer.
TEST(InflightStore, StatusOfAFileWithoutASessionOrOfNoFileFails) {
  std::string db = test::temp_path("no-session.db");
  {
    auto w = store::TraceWriter::open(db);
    ASSERT_TRUE(w) << w.error().message;
  }
  for (bool json : {false, true}) {
    std::vector<std::string> args = {"status", "--db", db};
    if (json) args.push_back("--json");
    auto st = test::run_ingero(args);
    EXPECT_EQ(st.rc, 1);
    EXPECT_EQ(st.err, "ingero status: " + db + " holds no trace session\n");
    EXPECT_EQ(st.out, "");
  }
  std::string missing = test::temp_path("never-written.db");
  auto st = test::run_ingero({"status", "--db", missing});
  EXPECT_EQ(st.rc, 1);
  EXPECT_NE(st.err.find(missing + ": No such file or directory"), std::string::npos) << st.err;
  EXPECT_EQ(st.out, "");
  EXPECT_FALSE(std::filesystem::exists(missing));
}

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
  auto r = get_inflight(db);
  EXPECT_EQ(r["content"][0]["text"],
            "the tracer stopped at 2026-11-22 18:21:33 UTC; stuck then (recorded by a build that "
            "did not report calls in flight)\n"
            "whether anything was stuck is unknown: calls in flight were not recorded\n")
      << r.dump();
  // A pid or node the trace does not hold is an error naming those it does, as status says it
  // (it was answered as a quiet process).
  for (const auto& args : {nlohmann::json{{"pid", 4242}}, nlohmann::json{{"node", "x"}}}) {
    auto bad = get_inflight(db, args);
    EXPECT_EQ(bad["isError"], true) << args << bad.dump();
    const std::string text = bad["content"][0]["text"];
    EXPECT_EQ(text.rfind(args.contains("pid") ? "no process 4242 in this trace (processes: "
                                              : "no node 'x' in this trace (nodes: ",
                         0),
              0u)
        << text;
  }
}

// One session of node gpu-a with `flags`, from 5 s to 30 s after kOffset, and nothing in it.
void write_ended_session(const std::string& path, const std::string& flags) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  si.node = "gpu-a";
  si.mono_offset_ns = kOffset;
  si.started_at_ns = kOffset + 5 * kSec;
  si.flags = flags;
  ASSERT_TRUE((*w)->begin_session(si));
  store::SessionEnd end;
  end.exit_reason = "test";
  end.stopped_at_ns = kOffset + 30 * kSec;
  ASSERT_TRUE((*w)->finish(end));
}

// A launch seen at entry only is never in flight: where the session timed 1 launch in 32, a
// thread stuck inside another one would not show, and "nothing was stuck" says so (a thread
// held 9 s inside cudaLaunchKernel read as "nothing is stuck"). Timing every launch, it does not.
TEST(InflightStore, NothingStuckSaysWhichLaunchesAreWatched) {
  for (int timing : {32, 1}) {
    std::string path = test::temp_path("timing-" + std::to_string(timing) + ".db");
    ASSERT_NO_FATAL_FAILURE(write_ended_session(
        path, "stack,inflight-after=5,launch-timing=" + std::to_string(timing)));
    auto st = test::run_ingero({"status", "--db", path});
    ASSERT_EQ(st.rc, 0) << st.err;
    std::string last = st.out.substr(st.out.find('\n') + 1);
    // A hang older than the trace is not seen, and the line says since when it speaks.
    const std::string before = "; a call entered before the tracer started (" +
                               engine::format_wall(kOffset + 5 * kSec) +
                               ") is not seen: a hang that began before it does not show\n";
    EXPECT_EQ(last, timing == 32 ? "nothing was stuck (kernel launches are watched only when "
                                   "timed, 1 in 32 per thread, or without uprobe sessions those "
                                   "in timing windows: a thread stuck inside another would not "
                                   "show; --launch-timing 1 watches every one)" +
                                       before
                                 : "nothing was stuck" + before)
        << st.out;
  }
}

// Found by a docs audit (helper-68): with calls in flight off (`--inflight-after 0s`) nothing was
// recorded, yet status --json and get_inflight gave "inflight_after_s": 0.0 beside "stuck": [],
// where cli.md and mcp.md promise the field only where calls in flight were recorded.
TEST(InflightStore, WithCallsInFlightOffTheJsonHasNoThreshold) {
  std::string path = test::temp_path("inflight-off.db");
  ASSERT_NO_FATAL_FAILURE(write_ended_session(path, "stack,launch-timing=32,inflight-after=0"));
  auto js = test::run_ingero({"status", "--db", path, "--json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_FALSE(j.contains("inflight_after_s")) << js.out;
  EXPECT_EQ(j["stuck"], nlohmann::json::array());
  auto r = get_inflight(path);
  ASSERT_EQ(r["isError"], false) << r.dump();
  EXPECT_FALSE(r["structuredContent"].contains("inflight_after_s")) << r.dump();
  EXPECT_EQ(r["structuredContent"]["stuck"], nlohmann::json::array());
}

// `status --pid` of a process the trace does not know: it was answered "nothing is stuck", as if
// that process had been watched. A hang in a process that made no traced call since the start is
// the case a user asks about.
TEST(InflightStore, StatusOfAPidTheTraceDoesNotKnowSaysSo) {
  const std::string db = test::h100_fixture("starve");
  auto r = test::run_ingero({"status", "--db", db, "--pid", "4242"});
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("ingero status: no process 4242 in this trace (processes: ", 0), 0u)
      << r.err;
  EXPECT_NE(r.err.find(" 618 python3"), std::string::npos) << r.err;
  auto known = test::run_ingero({"status", "--db", db, "--pid", "618"});
  EXPECT_EQ(known.rc, 0) << known.err;
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

// A traced process may name itself anything, escape sequences included: status prints them
// as text, never to the terminal (docs/security.md); its JSON escapes them itself.
TEST(InflightStore, StatusPrintsAHostileProcessNameAsText) {
  std::string path = write_stuck_file("inflight-evil.db", "t\x1b]0;pwned\x07\x1b[2J");
  auto st = test::run_ingero({"status", "--db", path});
  ASSERT_EQ(st.rc, 0) << st.err;
  EXPECT_EQ(st.out.find('\x1b'), std::string::npos) << st.out;
  EXPECT_EQ(st.out.find('\x07'), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("t\\x1b]0;pwned\\x07\\x1b[2J (pid 7, thread 8) has been inside"),
            std::string::npos)
      << st.out;
  auto js = test::run_ingero({"status", "--db", path, "--json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  EXPECT_EQ(nlohmann::json::parse(js.out)["stuck"][0]["comm"], "t\x1b]0;pwned\x07\x1b[2J");
}

// cli.md: status shows at most 8 frames of a stuck call's stack, then how many it left out.
TEST(InflightStore, StatusShowsEightFramesThenHowManyMore) {
  std::string path = write_stuck_file("inflight-deep.db", "trainer", 12);
  auto st = test::run_ingero({"status", "--db", path});
  ASSERT_EQ(st.rc, 0) << st.err;
  std::vector<std::string> frames;
  std::istringstream in(st.out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("    ", 0) == 0 && line.rfind("    args:", 0) != 0) frames.push_back(line);
  ASSERT_EQ(frames.size(), 9u) << st.out;
  for (int i = 0; i < 8; ++i)
    EXPECT_NE(frames[size_t(i)].find("train.py:" + std::to_string(i + 1)), std::string::npos)
        << frames[size_t(i)];
  EXPECT_EQ(frames[8], "    ... 4 more frames");
  // Eight frames exactly: all of them, and no "more" line.
  std::string eight = write_stuck_file("inflight-eight.db", "trainer", 8);
  auto e = test::run_ingero({"status", "--db", eight});
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_NE(e.out.find("train.py:8"), std::string::npos) << e.out;
  EXPECT_EQ(e.out.find("more frames"), std::string::npos) << e.out;
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
  EXPECT_NE(none["content"][0]["text"].get<std::string>().find(
                "\nnothing was stuck; a call entered before the tracer started (" +
                engine::format_wall(kOffset + 5 * kSec) + ") is not seen"),
            std::string::npos)
      << none["content"][0]["text"];
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

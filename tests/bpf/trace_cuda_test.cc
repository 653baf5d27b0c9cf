// Real uprobes on real CUDA libraries (and the fake runtime for planted scenarios), traced
// end to end through `ingero trace` into SQLite. Every assertion is an exact outcome.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "engine/chain.h"
#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(TraceCuda, RealRuntimeAndDriverStubExactCalls) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_CALLS);
  REQUIRE_FILE(kStub);
  std::string db = temp_path("real.db");
  // Every launch timed through its return, so that each has its return code (by default one
  // launch in 32 per thread is; the others are seen at their entry only).
  auto run = trace_command(db, {INGERO_CUDA_CALLS, kStub}, {"--launch-timing", "1"});
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = 0;
  auto lines = parse_workload(run.out, &pid);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(lines.size(), 47u) << run.out;  // the workload's fixed sequence

  // Every call the workload made, and nothing else: (op, tid, ret) multisets are equal.
  std::map<std::tuple<std::string, int, int>, int> expected, got;
  for (const auto& l : lines) expected[{l.op, l.tid, l.ret}]++;
  for (const auto& r :
       query_rows(db, "SELECT op, tid, ret FROM calls WHERE pid = " + std::to_string(pid)))
    got[{r[0], std::stoi(r[1]), std::stoi(r[2])}]++;
  EXPECT_EQ(got, expected);

  // Decoded sizes: cudaMalloc 1024..7168 in call order.
  auto sizes = query_rows(db, "SELECT bytes FROM calls WHERE op = 'cudaMalloc' ORDER BY ts_ns");
  ASSERT_EQ(sizes.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(sizes[i][0], std::to_string(1024 * (i + 1)));

  // cudaLaunchKernel: dim3 by value in registers, shared memory and stream on the stack.
  auto k = query_rows(
      db,
      "SELECT func, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem, "
      "stream, count(*) FROM calls WHERE op = 'cudaLaunchKernel' GROUP BY 1,2,3,4,5,6,7,8,9");
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0], (std::vector<std::string>{std::to_string(0xf00d), "8", "4", "2", "128", "2", "1",
                                            "256", std::to_string(0x5151), "4"}));
  auto kx =
      query_rows(db,
                 "SELECT func, grid_x, grid_y, grid_z, block_x, shared_mem, stream FROM calls "
                 "WHERE op = 'cudaLaunchKernelExC'");
  ASSERT_EQ(kx.size(), 1u);
  EXPECT_EQ(kx[0], (std::vector<std::string>{std::to_string(0xf00e), "16", "1", "1", "256", "1024",
                                             std::to_string(0x5151)}));
  // Driver launch: blockDimZ, sharedMemBytes and the stream are stack arguments.
  auto dk = query_rows(
      db,
      "SELECT func, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem, "
      "stream, count(*) FROM calls WHERE op = 'cuLaunchKernel' GROUP BY 1,2,3,4,5,6,7,8,9");
  ASSERT_EQ(dk.size(), 1u);
  EXPECT_EQ(dk[0], (std::vector<std::string>{std::to_string(0xbeef), "1", "2", "3", "4", "5", "6",
                                             "512", std::to_string(0x9999), "3"}));

  // Copies: size, direction (the 2D copy's kind is the 7th argument, on the stack), stream.
  auto cp = query_rows(db,
                       "SELECT op, bytes, direction, coalesce(stream, 0), count(*) FROM calls "
                       "WHERE kind IN ('memcpy', 'memset') GROUP BY 1,2,3,4 ORDER BY 1");
  std::vector<std::vector<std::string>> want_cp = {
      {"cuMemcpyHtoD", "1000", "H2D", "0", "1"},
      {"cudaMemcpy", "4096", "H2D", "0", "3"},
      {"cudaMemcpy2D", "2048", "H2D", "0", "1"},
      {"cudaMemcpyAsync", "8192", "D2H", std::to_string(0x5151), "2"},
      {"cudaMemset", "2048", "NULL", "0", "1"},
  };
  EXPECT_EQ(cp, want_cp);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE op = 'cuMemAlloc' AND bytes = 4096"),
            2);

  // The second thread's syncs carry its tid, not the main thread's.
  int tid2 = 0;
  for (const auto& l : lines)
    if (l.op == "cudaStreamSynchronize" && l.tid != pid) tid2 = l.tid;
  ASSERT_GT(tid2, 0);
  EXPECT_EQ(
      query_int(db, "SELECT count(*) FROM calls WHERE op = 'cudaStreamSynchronize' AND tid = " +
                        std::to_string(tid2) + " AND stream = " + std::to_string(0x7777) +
                        " AND pid = " + std::to_string(pid)),
      3);
  EXPECT_EQ(
      query_int(db, "SELECT count(*) FROM calls WHERE op = 'cudaStreamSynchronize' AND tid = " +
                        std::to_string(pid) + " AND stream = " + std::to_string(0x5151)),
      5);
  // Vendor classification and nothing lost.
  EXPECT_EQ(
      query_int(db, "SELECT count(*) FROM calls WHERE vendor = 'nvidia' AND api = 'cuda_driver'"),
      8);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM cuda_events WHERE api = 'cuda_runtime'"), 39);
  EXPECT_EQ(query_int(db, "SELECT ringbuf_drops + lost_calls + store_errors FROM sessions"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 47);
  EXPECT_EQ(query_int(db, "SELECT events_stored FROM sessions"),
            query_int(db, "SELECT count(*) FROM events"));
  EXPECT_EQ(query_rows(db, "SELECT DISTINCT comm FROM calls")[0][0], "cuda_calls");
}

// Cooperative launches (grid-wide sync), runtime and driver: each counted, with its geometry.
TEST(TraceCuda, CooperativeLaunchesAreLaunches) {
  std::string db = temp_path("coop.db");
  auto run = trace_command(db, {INGERO_CUDA_CALLS, kStub, "1", "cooperative"});
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = 0;
  auto lines = parse_workload(run.out, &pid);
  ASSERT_EQ(lines.size(), 6u) << run.out;
  auto k = query_rows(db,
                      "SELECT op, kind, func, grid_x, grid_y, block_x, block_y, shared_mem, "
                      "stream, count(*) FROM calls WHERE kind = 'launch' AND pid = " +
                          std::to_string(pid) + " GROUP BY 1,2,3,4,5,6,7,8,9 ORDER BY 1");
  EXPECT_EQ(k, (std::vector<std::vector<std::string>>{
                   {"cuLaunchCooperativeKernel", "launch", std::to_string(0xc0de), "7", "1", "32",
                    "2", "64", std::to_string(0x9999), "2"},
                   {"cudaLaunchCooperativeKernel", "launch", std::to_string(0xc00b), "6", "5", "64",
                    "1", "128", std::to_string(0x5151), "3"}}));
}

TEST(TraceCuda, NestedRuntimeToDriverAndConcurrentThreadsPair) {
  REQUIRE_BPF();
  std::string db = temp_path("nested.db");
  const int kThreads = 8, kCalls = 50;
  auto run = trace_command(db,
                           {INGERO_FAKE_CALLS, "threads", INGERO_FAKE_CUDART,
                            std::to_string(kThreads), std::to_string(kCalls)},
                           {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  // Thread index -> tid, from the workload.
  std::map<int, int> tid_of;
  std::istringstream in(run.out);
  for (std::string w; in >> w;) {
    if (w == "tid") {
      int tid, idx;
      in >> tid >> idx;
      tid_of[idx] = tid;
    }
  }
  ASSERT_EQ(tid_of.size(), size_t(kThreads));
  for (auto [idx, tid] : tid_of) {
    // Each thread: kCalls allocations of its own size, each with the pointer written back.
    auto rows =
        query_rows(db,
                   "SELECT count(*), min(bytes), max(bytes), min(dptr - bytes), max(dptr - bytes) "
                   "FROM calls WHERE op = 'cudaMalloc' AND tid = " +
                       std::to_string(tid));
    EXPECT_EQ(rows[0],
              (std::vector<std::string>{std::to_string(kCalls), std::to_string(4096 * (idx + 1)),
                                        std::to_string(4096 * (idx + 1)),
                                        std::to_string(0xd0000000u), std::to_string(0xd0000000u)}));
  }
  // Each cudaDeviceSynchronize made exactly one cuCtxSynchronize on its thread: one call,
  // with the driver call folded into it, not two.
  EXPECT_EQ(query_rows(db,
                       "SELECT count(*), sum(nested_calls), min(nested_op), max(nested_op) "
                       "FROM calls WHERE op = 'cudaDeviceSynchronize'")[0],
            (std::vector<std::string>{std::to_string(kThreads), std::to_string(kThreads),
                                      "cuCtxSynchronize", "cuCtxSynchronize"}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE api = 'cuda_driver'"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE op = 'cudaMalloc' AND nested_calls"),
            0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE ret <> 0"), 0);
  auto stats = query_rows(db, "SELECT bpf_stats FROM sessions")[0][0];
  EXPECT_NE(stats.find("\"unpaired_return\":0"), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"frames_discarded\":0"), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"nested\":" + std::to_string(kThreads) + ","), std::string::npos) << stats;
}

// One launch = one event: a runtime launch (which makes its driver launch) is one call with
// the driver's folded into it; the program's own driver launches (cuBLAS, cuDNN's private
// runtime, Triton) are calls too. Under every way call probes attach.
TEST(TraceCuda, RuntimeLaunchesCountOnceDirectDriverLaunchesCount) {
  REQUIRE_BPF();
  for (const char* mode : {"session", "multi", "perf"}) {
    std::string db = temp_path(std::string("launches-") + mode + ".db");
    auto env = kFakeEnv;
    env.push_back(std::string("INGERO_CALL_ATTACH=") + mode);
    auto run =
        trace_command(db, {INGERO_FAKE_CALLS, "launches", INGERO_FAKE_CUDART, "40", "7"}, {}, env);
    ASSERT_EQ(run.rc, 0) << mode << ": " << run.err;
    EXPECT_EQ(query_rows(db,
                         "SELECT op, count(*), sum(nested_calls), coalesce(max(nested_op), '-'), "
                         "min(grid_x), min(block_x) FROM calls GROUP BY op ORDER BY op"),
              (std::vector<std::vector<std::string>>{
                  {"cuLaunchKernel", "7", "0", "-", "2", "64"},
                  {"cudaLaunchKernel", "40", "40", "cuLaunchKernel", "8", "128"}}))
        << mode;
    // Each driver launch is folded into its runtime launch once: in BPF when the runtime
    // launch was timed (its frame is open), else by the pipeline (capture/launch_nesting.h).
    auto stats = query_rows(db, "SELECT bpf_stats FROM sessions")[0][0];
    auto sj = nlohmann::json::parse(stats);
    EXPECT_EQ(sj["nested"].get<int64_t>() + sj["launches_folded"].get<int64_t>(), 40)
        << mode << ": " << stats;
    EXPECT_NE(stats.find("\"unpaired_return\":0"), std::string::npos) << mode << ": " << stats;
  }
}

TEST(TraceCuda, ProcessStartedLaterLoadingPipWheelRuntime) {
  REQUIRE_BPF();
  std::string db = temp_path("late.db");
  auto tracer =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--duration", "60s"});
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", std::chrono::seconds(30))) << tracer.err();
  // The fake runtime lives at .../site-packages/nvidia/cuda_runtime/lib/libcudart.so.13,
  // which no scan at start-up could have seen mapped.
  auto wl = Subprocess::spawn({INGERO_FAKE_CALLS, "late", INGERO_FAKE_CUDART});
  std::string pid_line;
  ASSERT_TRUE(wl.wait_stdout_line("pid", std::chrono::seconds(10), &pid_line));
  int pid = std::stoi(pid_line.substr(4));
  ASSERT_TRUE(wl.wait_stdout_line("loaded", std::chrono::seconds(10)));
  // The dynamic loader's link-map hook tells ingero to re-scan this pid.
  ASSERT_TRUE(tracer.wait_stderr_line("new libraries in pid " + std::to_string(pid),
                                      std::chrono::seconds(10)))
      << tracer.err();
  // The loader reports a dlopen before it maps anything and again once every library is in:
  // a re-scan between the two finds the runtime without its driver library, which the next
  // one attaches. Let the process call only once both are attached, or it may exit first.
  ASSERT_TRUE(tracer.wait_stderr_line(std::string(" probes on ") + INGERO_FAKE_CUDA,
                                      std::chrono::seconds(10)))
      << tracer.err();
  wl.write_stdin("go\n");
  ASSERT_EQ(wl.wait(), 0);
  tracer.signal(SIGINT);
  ASSERT_EQ(tracer.wait(), 0) << tracer.err();  // no command: the tracer's own status
  auto rows = query_rows(db,
                         "SELECT count(*), min(bytes), max(bytes), min(l.path LIKE "
                         "'%/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13') FROM calls c "
                         "JOIN libraries l ON l.id = c.library_id WHERE c.pid = " +
                             std::to_string(pid));
  EXPECT_EQ(rows[0], (std::vector<std::string>{"5", "1048576", "1048576", "1"}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM sessions WHERE exit_reason = 'SIGINT'"), 1);
  // Attached while the process had it mapped: said while tracing, recorded, and explained.
  EXPECT_NE(tracer.err().find("new libraries in pid " + std::to_string(pid) + ", attached "),
            std::string::npos)
      << tracer.err();
  auto late =
      query_rows(db,
                 "SELECT late_pid, late_ns > 0 AND late_ns < 60000000000 FROM libraries "
                 "WHERE path LIKE '%/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13'");
  EXPECT_EQ(late, (std::vector<std::vector<std::string>>{{std::to_string(pid), "1"}}));
  // The fake runtime's driver library came with it.
  EXPECT_EQ(
      query_rows(db,
                 "SELECT count(*), min(late_pid), max(late_pid) FROM libraries WHERE "
                 "late_pid <> 0"),
      (std::vector<std::vector<std::string>>{{"2", std::to_string(pid), std::to_string(pid)}}))
      << tracer.err();
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out)["losses"];
  ASSERT_EQ(j["late_libraries"].size(), 2u) << j.dump();
  EXPECT_EQ(j["late_libraries"][0]["pid"], pid);
  EXPECT_TRUE(j["lower_bounds"].get<bool>());
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &out, &err), 0) << err;
  EXPECT_NE(out.find("libcudart.so.13 attached "), std::string::npos) << out;
  EXPECT_NE(out.find(" after pid " + std::to_string(pid) +
                     " loaded it: its calls into it before then are not traced"),
            std::string::npos)
      << out;
}

TEST(TraceCuda, TwoRuntimeCopiesAtOnce) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_CALLS);
  std::string db = temp_path("two.db");
  std::string script = std::string(INGERO_CUDA_CALLS) + " '' & " + INGERO_FAKE_CALLS + " threads " +
                       INGERO_FAKE_CUDART + " 2 10 & wait";
  auto run = trace_command(db, {"/bin/sh", "-c", script}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  // Ordered by comm: the paths depend on where the build directory is.
  auto rows = query_rows(
      db,
      "SELECT l.path, c.comm, count(*) FROM calls c JOIN libraries l ON l.id = c.library_id "
      "WHERE c.api = 'cuda_runtime' GROUP BY 1, 2 ORDER BY 2");
  ASSERT_EQ(rows.size(), 2u);
  // The toolkit's runtime served cuda_calls (39 runtime calls) and the wheel copy served
  // fake_calls (2 threads x (10 mallocs + 1 device sync)).
  EXPECT_NE(rows[0][0].find("/usr/local/cuda"), std::string::npos);
  EXPECT_EQ(rows[0][1], "cuda_calls");
  EXPECT_EQ(rows[0][2], "39");
  EXPECT_NE(rows[1][0].find("site-packages/nvidia/cuda_runtime"), std::string::npos);
  EXPECT_EQ(rows[1][1], "fake_calls");
  EXPECT_EQ(rows[1][2], "22");
}

TEST(TraceCuda, WorkloadExitingWithCallInFlight) {
  REQUIRE_BPF();
  std::string db = temp_path("exit.db");
  auto run =
      trace_command(db, {INGERO_FAKE_CALLS, "exit-midcall", INGERO_FAKE_CUDART}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  auto pos = run.out.find("tid ");
  ASSERT_NE(pos, std::string::npos);
  int tid = std::stoi(run.out.substr(pos + 4));
  auto rows =
      query_rows(db, "SELECT op, status, ret, dur_ns >= 250000000, stream FROM calls WHERE tid = " +
                         std::to_string(tid));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"cudaStreamSynchronize", "unfinished", "NULL", "1",
                                               std::to_string(0xabc)}));
  EXPECT_EQ(query_int(db, "SELECT unfinished_calls FROM sessions"), 1);
}

TEST(TraceCuda, StaticallyLinkedRuntimeFoundBySymbol) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STATIC_RUNTIME);
  std::string db = temp_path("static.db");
  auto run = trace_command(db, {INGERO_STATIC_RUNTIME});
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_NE(run.err.find("static copy"), std::string::npos) << run.err;
  auto rows =
      query_rows(db,
                 "SELECT c.op, count(*), min(coalesce(c.bytes, c.stream)), l.embedded FROM calls c "
                 "JOIN libraries l ON l.id = c.library_id GROUP BY 1 ORDER BY 1");
  std::vector<std::vector<std::string>> want = {{"cudaMalloc", "3", "512", "1"},
                                                {"cudaStreamSynchronize", "2", "66", "1"}};
  EXPECT_EQ(rows, want);
}

TEST(TraceCuda, LibraryUnloadedWhileAttached) {
  REQUIRE_BPF();
  std::string db = temp_path("unload.db");
  auto run = trace_command(db, {INGERO_FAKE_CALLS, "unload", INGERO_FAKE_CUDART}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(
      query_rows(db,
                 "SELECT group_concat(bytes) FROM (SELECT bytes FROM calls ORDER BY ts_ns)")[0][0],
      "100,100,100,200,200");
}

TEST(TraceCuda, SigintWhileStreamingFlushesEverything) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_CALLS);
  std::string db = temp_path("sigint.db");
  // A long stream of calls; SIGINT lands while batches are being committed.
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--flush-ms", "20",
                                   "--", INGERO_CUDA_CALLS, "", "100000"});
  ASSERT_TRUE(tracer.wait_stderr_line("attached", std::chrono::seconds(30))) << tracer.err();
  usleep(1500 * 1000);
  tracer.signal(SIGINT);
  // The command got the signal too and died of it: 128 + SIGINT, as a shell reports it.
  ASSERT_EQ(tracer.wait(), 128 + SIGINT) << tracer.err();
  int64_t stored = query_int(db, "SELECT events_stored FROM sessions");
  EXPECT_GT(stored, 1000);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM events"), stored);
  EXPECT_EQ(query_int(db, "SELECT ringbuf_drops + store_errors + calls_lost_at_exit FROM sessions"),
            0);
  // Every call the kernel recorded was stored: the command stopped before the probes went.
  auto stats = nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(stats["calls"], stats["call_records_read"]);
  EXPECT_EQ(stats["calls"].get<int64_t>(), query_int(db, "SELECT count(*) FROM calls"));
  EXPECT_EQ(query_rows(db, "PRAGMA integrity_check")[0][0], "ok");
  EXPECT_EQ(query_rows(db, "SELECT exit_reason FROM sessions")[0][0], "SIGINT");
}

// `ingero trace -- CMD` exits as CMD did, as time(1) and strace(1) do: its status, or
// 128 + N when signal N ended it.
TEST(TraceCuda, ExitStatusIsTheCommands) {
  REQUIRE_BPF();
  EXPECT_EQ(trace_command(temp_path("exit7.db"), {"/bin/sh", "-c", "exit 7"}).rc, 7);
  EXPECT_EQ(trace_command(temp_path("exit0.db"), {"/bin/true"}).rc, 0);
  EXPECT_EQ(trace_command(temp_path("term.db"), {"/bin/sh", "-c", "kill -TERM $$"}).rc,
            128 + SIGTERM);
  // A command that cannot be run: refused before anything is attached or written, as a shell
  // refuses it (127 not found, 126 not executable).
  std::string missing = temp_path("missing.db");
  auto run = trace_command(missing, {"/nonexistent/program"});
  EXPECT_EQ(run.rc, 127);
  EXPECT_NE(run.err.find("ingero trace: cannot run '/nonexistent/program': no such file"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(missing));
  run = trace_command(missing, {"no-such-program-in-path"});
  EXPECT_EQ(run.rc, 127);
  EXPECT_NE(run.err.find("'no-such-program-in-path': not found in PATH"), std::string::npos)
      << run.err;
  std::string plain = temp_path("not-executable.sh");
  std::ofstream(plain) << "exit 0\n";
  run = trace_command(missing, {plain});
  EXPECT_EQ(run.rc, 126);
  EXPECT_NE(run.err.find(plain + "': not executable"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(missing));
  // A directory, an empty name, a script whose interpreter is missing: refused alike.
  run = trace_command(missing, {"/tmp"});
  EXPECT_EQ(run.rc, 126);
  EXPECT_NE(run.err.find("ingero trace: cannot run '/tmp': is a directory"), std::string::npos)
      << run.err;
  run = trace_command(missing, {""});
  EXPECT_EQ(run.rc, 127);
  EXPECT_NE(run.err.find("ingero trace: cannot run '': an empty command name"), std::string::npos)
      << run.err;
  std::string orphan = temp_path("orphan.sh");
  std::ofstream(orphan) << "#!/nonexistent/interpreter\nexit 0\n";
  ::chmod(orphan.c_str(), 0755);
  run = trace_command(missing, {orphan});
  EXPECT_EQ(run.rc, 126);
  EXPECT_NE(run.err.find(orphan + "': bad interpreter /nonexistent/interpreter"), std::string::npos)
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(missing));
}

// The end's summary names the trace file, and a name is anyone's bytes: an escape sequence in
// it reaches the terminal as \xHH, not as a command to retitle or clear it.
TEST(TraceCuda, TheEndsSummaryEscapesControlCharacters) {
  REQUIRE_BPF();
  std::string db = temp_path("esc\x1b]0;owned\x07.db");
  auto run = trace_command(db, {"/bin/true"});
  EXPECT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(run.err.find('\x1b'), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find('\x07'), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("events stored in " + temp_path("esc") + "\\x1b]0;owned\\x07.db"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace ingero::test

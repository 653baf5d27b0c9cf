// `--pid`: which processes a filtered trace follows, reads and attaches, through real uprobes
// on the fake runtime. Every assertion is an exact outcome.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// The other process runs a copy of the runtime of its own: a trace filtered by pid reads no
// other process's maps, so that copy is neither found nor attached.
TEST(PidFilter, RunsInsideBpf) {
  REQUIRE_BPF();
  std::string db = temp_path("filter.db");
  std::string own = temp_path("filter-other") + "/libcudart.so.13";
  std::filesystem::create_directories(std::filesystem::path(own).parent_path());
  std::filesystem::copy_file(INGERO_FAKE_CUDART, own,
                             std::filesystem::copy_options::overwrite_existing);
  auto a = Subprocess::spawn({INGERO_FAKE_CALLS, "late", INGERO_FAKE_CUDART});
  auto b = Subprocess::spawn({INGERO_FAKE_CALLS, "late", own});
  std::string la, lb;
  ASSERT_TRUE(a.wait_stdout_line("pid", std::chrono::seconds(10), &la));
  ASSERT_TRUE(b.wait_stdout_line("pid", std::chrono::seconds(10), &lb));
  ASSERT_TRUE(a.wait_stdout_line("loaded", std::chrono::seconds(10)));
  ASSERT_TRUE(b.wait_stdout_line("loaded", std::chrono::seconds(10)));
  std::string pa = la.substr(4);
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--pid", pa});
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", std::chrono::seconds(30))) << tracer.err();
  a.write_stdin("go\n");
  b.write_stdin("go\n");
  ASSERT_EQ(a.wait(), 0);
  ASSERT_EQ(b.wait(), 0);
  // The traced process gone, the trace ends by itself.
  ASSERT_EQ(tracer.wait(), 0) << tracer.err();
  EXPECT_EQ(query_rows(db, "SELECT group_concat(DISTINCT pid), count(*) FROM calls")[0],
            (std::vector<std::string>{pa, "5"}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM libraries WHERE path = '" + own + "'"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM libraries WHERE path = '" +
                              std::string(INGERO_FAKE_CUDART) + "'"),
            1);
  EXPECT_EQ(query_int(db,
                      "SELECT count(*) FROM sessions WHERE exit_reason = 'processes exited' AND "
                      "pid_filter = '" +
                          pa + "'"),
            1);
}

// `--pid` of a launcher whose worker already runs: the worker joins the filter at start, as one
// forked later does in BPF, and the tracer says so.
TEST(PidFilter, TakesTheRunningChildrenToo) {
  REQUIRE_BPF();
  std::string db = temp_path("filter-children.db");
  // The shell's background child reads the shell's stdin (fd 3), not /dev/null.
  auto sh = Subprocess::spawn({"/bin/sh", "-c",
                               std::string("exec 3<&0; ") + INGERO_FAKE_CALLS + " late " +
                                   INGERO_FAKE_CUDART + " <&3 & wait"});
  std::string line;
  ASSERT_TRUE(sh.wait_stdout_line("pid", std::chrono::seconds(10), &line));
  ASSERT_TRUE(sh.wait_stdout_line("loaded", std::chrono::seconds(10)));
  std::string child = line.substr(4);
  std::string parent = std::to_string(sh.pid());
  ASSERT_NE(child, parent);
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--pid", parent});
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", std::chrono::seconds(30))) << tracer.err();
  sh.write_stdin("go\n");
  ASSERT_EQ(sh.wait(), 0);
  tracer.signal(SIGTERM);
  ASSERT_EQ(tracer.wait(), 0) << tracer.err();
  EXPECT_NE(tracer.err().find("ingero: 1 child of the given process already runs, traced too "
                              "(pid " +
                              child + ")\n"),
            std::string::npos)
      << tracer.err();
  EXPECT_EQ(query_rows(db, "SELECT group_concat(DISTINCT pid), count(*) FROM calls")[0],
            (std::vector<std::string>{child, "5"}));
}

// Processes outside the filter exec while a filtered process is traced: the exec and loader
// notifications stay in BPF, so the tracer reads none of their maps. The traced process neither
// execs nor loads anything once the trace runs, so it gives none of its own either.
TEST(PidFilter, OtherProcessesExecsAreNotScanned) {
  REQUIRE_BPF();
  std::string db = temp_path("filter-execs.db");
  auto a = Subprocess::spawn({INGERO_FAKE_CALLS, "late", INGERO_FAKE_CUDART});
  std::string la;
  ASSERT_TRUE(a.wait_stdout_line("pid", std::chrono::seconds(10), &la));
  ASSERT_TRUE(a.wait_stdout_line("loaded", std::chrono::seconds(10)));
  std::string pa = la.substr(4);
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--pid", pa});
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", std::chrono::seconds(30))) << tracer.err();
  for (int i = 0; i < 20; ++i) {
    auto other = Subprocess::spawn({"/bin/sh", "-c", "exec /bin/true"});
    ASSERT_EQ(other.wait(), 0);
  }
  a.write_stdin("go\n");
  ASSERT_EQ(a.wait(), 0);
  tracer.signal(SIGTERM);
  ASSERT_EQ(tracer.wait(), 0) << tracer.err();
  auto stats = nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(stats["libwatch_records"].get<int64_t>(), 0) << stats.dump();
  EXPECT_EQ(stats["libwatch_drops"].get<int64_t>(), 0);
  EXPECT_EQ(query_rows(db, "SELECT group_concat(DISTINCT pid), count(*) FROM calls")[0],
            (std::vector<std::string>{pa, "5"}));
}

// --pid: once every traced process has exited (the given one, then the child it left behind),
// the trace ends by itself, saying why; it traced nothing until a signal or --duration.
TEST(PidFilter, TheTraceEndsWhenEveryTracedProcessHasExited) {
  REQUIRE_BPF();
  std::string db = temp_path("filter-gone.db");
  // The shell leaves a child that outlives it by 2 s.
  auto sh = Subprocess::spawn({"/bin/sh", "-c", "sleep 2; /bin/sleep 2 & exit 0"});
  const auto t0 = std::chrono::steady_clock::now();
  auto tracer = Subprocess::spawn(
      {INGERO_BIN, "trace", "--no-live", "--db", db, "--pid", std::to_string(sh.pid())});
  ASSERT_EQ(tracer.wait(std::chrono::seconds(30)), 0) << tracer.err();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(3500));
  EXPECT_EQ(sh.wait(), 0);
  EXPECT_NE(tracer.err().find("ingero: stopped (processes exited): "), std::string::npos)
      << tracer.err();
  EXPECT_EQ(query_rows(db, "SELECT exit_reason FROM sessions")[0][0], "processes exited");
}

// A runtime replaced on disk under a running job (pip or dpkg renames a new file over it): the
// process still runs the old file, deleted, which the tracer reaches through the process's
// map_files entry. It was skipped: 0 calls, and no word said.
TEST(PidFilter, ARuntimeReplacedOnDiskUnderTheProcessIsStillTraced) {
  REQUIRE_BPF();
  std::string db = temp_path("replaced.db");
  std::string dir = temp_path("replaced-lib");
  std::filesystem::create_directories(dir);
  const std::string lib = dir + "/libcudart.so.13";
  std::filesystem::copy_file(INGERO_FAKE_CUDART, lib,
                             std::filesystem::copy_options::overwrite_existing);
  auto a = Subprocess::spawn({INGERO_FAKE_CALLS, "late", lib});
  std::string la;
  ASSERT_TRUE(a.wait_stdout_line("pid", std::chrono::seconds(10), &la));
  ASSERT_TRUE(a.wait_stdout_line("loaded", std::chrono::seconds(10)));
  std::filesystem::copy_file(INGERO_FAKE_CUDART, lib + ".new",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(lib + ".new", lib);
  std::string pa = la.substr(4);
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--pid", pa});
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", std::chrono::seconds(30))) << tracer.err();
  a.write_stdin("go\n");
  ASSERT_EQ(a.wait(), 0);
  ASSERT_EQ(tracer.wait(), 0) << tracer.err();
  EXPECT_NE(tracer.err().find(lib + " (deleted) (cuda/cuda_runtime 13, 11/30 functions)"),
            std::string::npos)
      << tracer.err();
  EXPECT_EQ(query_rows(db, "SELECT group_concat(DISTINCT pid), count(*) FROM calls")[0],
            (std::vector<std::string>{pa, "5"}));
}

// The fake runtime and driver found at the start, as the tracer finds a user's.
const std::vector<std::string> kFakeEnv = {"VIRTUAL_ENV=" INGERO_FAKE_VENV,
                                           "CUDA_HOME=" INGERO_FAKE_CUDA_HOME};
std::vector<std::string> with_small_filter() {
  std::vector<std::string> env = kFakeEnv;
  env.push_back("INGERO_TEST_PID_FILTER_ENTRIES=16");
  return env;
}

// A launcher that keeps forking: its children leave the pid filter as they exit. The filter
// only grew, and once it held 4,096 processes every later child went untraced with every drop
// counter at 0 (a hostile tester's shell loop of 4,100 short commands stored 0 of 47 calls).
// The test shrinks the filter to 16 processes.
TEST(LongLivedLaunchers, ChildrenThatExitedLeaveRoomForTheNext) {
  REQUIRE_BPF();
  std::string db = temp_path("launcher-loop.db");
  auto r = trace_command(db,
                         {"/bin/sh", "-c",
                          std::string("for i in $(seq 60); do /bin/true; done; ") +
                              INGERO_FAKE_CALLS + " threads " + INGERO_FAKE_CUDART + " 1 3"},
                         {}, with_small_filter());
  ASSERT_EQ(r.rc, 0) << r.err;
  // 3 cudaMalloc and a cudaDeviceSynchronize.
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 4);
  EXPECT_EQ(query_int(db, "SELECT json_extract(bpf_stats, '$.children_unfollowed') FROM sessions"),
            0);
  EXPECT_EQ(r.err.find("were not traced"), std::string::npos) << r.err;
}

// More traced processes alive at once than the filter holds: the children left out are counted
// and said, never dropped in silence. The shell and 15 of its 20 sleeping children fill the 16
// places; the other 5 and the CUDA program after them are left out.
TEST(LongLivedLaunchers, ChildrenLeftOutOfAFullFilterAreCountedAndSaid) {
  REQUIRE_BPF();
  std::string db = temp_path("launcher-full.db");
  auto r = trace_command(db,
                         {"/bin/sh", "-c",
                          std::string("for i in $(seq 20); do sleep 3 & done; ") +
                              INGERO_FAKE_CALLS + " threads " + INGERO_FAKE_CUDART + " 1 3; wait"},
                         {}, with_small_filter());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 0);
  EXPECT_EQ(query_int(db, "SELECT json_extract(bpf_stats, '$.children_unfollowed') FROM sessions"),
            6);
  EXPECT_NE(r.err.find("ingero: 6 child processes of the traced ones were not traced: the pid "
                       "filter was full (more traced processes alive at once than it holds)\n"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace ingero::test

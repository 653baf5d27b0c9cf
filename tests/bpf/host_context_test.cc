// Host context for real: scheduler events, off-CPU time inside calls, preemptors, process
// lifecycle, and a planted CPU contention that `ingero explain` must name.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const char* kCudart = INGERO_CUDA_ROOT "/lib64/libcudart.so.13";
const std::vector<std::string> kFakeEnv = {"VIRTUAL_ENV=" INGERO_FAKE_VENV,
                                           "CUDA_HOME=" INGERO_FAKE_CUDA_HOME,
                                           "INGERO_FAKE_SYNC_SPIN_US=2000"};

int field_after(const std::string& out, const std::string& key) {
  auto pos = out.find(key + " ");
  return pos == std::string::npos ? -1 : std::stoi(out.substr(pos + key.size() + 1));
}

// The tid a workload printed as "tid N ROLE"; -1 when none.
int tid_of(const std::string& out, const std::string& role) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("tid ", 0) == 0 && line.size() > role.size() &&
        line.compare(line.size() - role.size(), role.size(), role) == 0)
      return std::stoi(line.substr(4));
  return -1;
}

nlohmann::json explain_json(const std::string& db) {
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  return nlohmann::json::parse(out);
}

TEST(HostContext, PlantedCpuContentionNamesOpPidAndHog) {
  REQUIRE_BPF();
  std::string db = temp_path("contention.db");
  // The workload and the hog share CPU 1.
  std::string script = std::string(INGERO_CPU_HOG) + " 1 6 & " + INGERO_FAKE_CALLS + " steps " +
                       INGERO_FAKE_CUDART + " 800 1; wait";
  auto run = trace_command_on_cpu0(db, {"/bin/sh", "-c", script}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = field_after(run.out, "pid"), hog = field_after(run.out, "hog");
  ASSERT_GT(pid, 0);
  ASSERT_GT(hog, 0);
  // Per-call off-CPU time and the preemptor are in the calls themselves.
  EXPECT_GT(
      query_int(db,
                "SELECT sum(off_cpu_ns) FROM calls WHERE op = 'cudaStreamSynchronize' AND pid = " +
                    std::to_string(pid)),
      200'000'000);
  EXPECT_EQ(
      query_rows(db,
                 "SELECT preemptor_comm, preemptor_pid FROM calls WHERE preemptor_pid IS NOT NULL "
                 "GROUP BY 1, 2 ORDER BY count(*) DESC LIMIT 1")[0],
      (std::vector<std::string>{"noisy_neighbor", std::to_string(hog)}));
  // Individual scheduler events for the GPU process, preempted by the hog.
  EXPECT_GT(
      query_int(db, "SELECT count(*) FROM host_events WHERE event = 'sched_switch' AND pid = " +
                        std::to_string(pid) + " AND peer_pid = " + std::to_string(hog) +
                        " AND flags = 1"),
      50);
  // explain names the op, the workload's pid and the hog. The launches lose their CPU to the
  // hog too, and any chain about them names the same pid and hog. The severity is not fixed:
  // sharing one CPU with the hog, the sync spends about half its time off-CPU, right at the
  // 50% line between MEDIUM and HIGH (engine/thresholds.h; the unit tests pin the thresholds),
  // so which side it lands on depends on the scheduler. It is never LOW: the cause was found.
  auto j = explain_json(db);
  bool found = false;
  for (const auto& c : j["chains"]) {
    if (c["rule"] != "cpu_contention") continue;
    EXPECT_EQ(c["pids"], nlohmann::json::array({pid}));
    EXPECT_NE(
        c["summary"].get<std::string>().find("noisy_neighbor (pid " + std::to_string(hog) + ")"),
        std::string::npos)
        << c["summary"];
    if (c["op"] != "cudaStreamSynchronize") {
      EXPECT_EQ(c["op"], "cudaLaunchKernel");
      continue;
    }
    found = true;
    EXPECT_NE(c["severity"], "LOW");
  }
  EXPECT_TRUE(found) << j["chains"].dump(2);
  // The live trace stored its chains too.
  EXPECT_GE(
      query_int(db,
                "SELECT count(*) FROM causal_chains WHERE rule = 'cpu_contention' AND severity IN "
                "('HIGH', 'MEDIUM') AND cuda_op = 'cudaStreamSynchronize'"),
      1);
  EXPECT_GT(query_int(db, "SELECT count(*) FROM system_snapshots"), 3);
  EXPECT_GT(query_int(db, "SELECT count(*) FROM process_stats WHERE pid = " + std::to_string(hog)),
            0);
}

// The task that takes the CPU first is often not the one that keeps it: a real-time ticker (a
// kworker woken by a timer, say) preempts the GPU thread every 200 us, runs 10 us and hands the
// CPU on, mostly to the hog that holds it until the ticker's next tick. The hog is named: a
// preemption's task is the one that held the CPU longest in one stretch while the thread waited.
// Naming the first to take the CPU names the ticker in nearly every call (799 of 800 here).
TEST(HostContext, ThePreemptorIsTheTaskThatHeldTheCpuNotTheFirstToTakeIt) {
  REQUIRE_BPF();
  std::string db = temp_path("ticker.db");
  std::string script = std::string("chrt -f 10 ") + INGERO_CPU_HOG + " 1 6 ticker 200 & " +
                       INGERO_CPU_HOG + " 1 6 & " + INGERO_FAKE_CALLS + " steps " +
                       INGERO_FAKE_CUDART + " 800 1; wait";
  auto run = trace_command_on_cpu0(db, {"/bin/sh", "-c", script}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = field_after(run.out, "pid"), hog = field_after(run.out, "hog");
  int ticker = field_after(run.out, "ticker");
  ASSERT_GT(pid, 0);
  ASSERT_GT(hog, 0);
  ASSERT_GT(ticker, 0) << "the ticker did not start (SCHED_FIFO refused?): " << run.err;
  std::string sync = "op = 'cudaStreamSynchronize' AND pid = " + std::to_string(pid);
  // The ticker took the CPU: it held it in some preemptions of the GPU process's threads.
  EXPECT_GT(query_int(db,
                      "SELECT count(*) FROM host_events WHERE event = 'sched_switch' AND "
                      "flags = 1 AND pid = " +
                          std::to_string(pid) + " AND peer_pid = " + std::to_string(ticker)),
            0);
  // The calls and the preemptions name the hog far more often than the ticker.
  auto by = [&](int peer) {
    return query_int(db, "SELECT count(*) FROM calls WHERE " + sync +
                             " AND preemptor_pid = " + std::to_string(peer));
  };
  EXPECT_GT(by(hog), 4 * by(ticker))
      << by(hog) << " calls name the hog, " << by(ticker) << " the ticker";
  auto j = explain_json(db);
  bool found = false;
  for (const auto& c : j["chains"]) {
    if (c["rule"] != "cpu_contention" || c["op"] != "cudaStreamSynchronize") continue;
    found = true;
    EXPECT_NE(
        c["summary"].get<std::string>().find("noisy_neighbor (pid " + std::to_string(hog) + ")"),
        std::string::npos)
        << c["summary"];
  }
  EXPECT_TRUE(found) << j["chains"].dump(2);
}

TEST(HostContext, SameWorkloadAloneRaisesNoHighChain) {
  REQUIRE_BPF();
  std::string db = temp_path("alone.db");
  auto run =
      trace_command(db, {INGERO_FAKE_CALLS, "steps", INGERO_FAKE_CUDART, "800", "1"}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  auto j = explain_json(db);
  for (const auto& c : j["chains"]) EXPECT_NE(c["severity"], "HIGH") << c["summary"];
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM causal_chains WHERE severity = 'HIGH'"), 0);
}

TEST(HostContext, LifecycleOfATracedProcess) {
  REQUIRE_BPF();
  std::string db = temp_path("life.db");
  auto run =
      trace_command(db, {INGERO_FAKE_CALLS, "threads", INGERO_FAKE_CUDART, "3", "5"}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = field_after(run.out, "pid");
  // Exactly one process exit for the workload, status 0, and its name on record.
  EXPECT_EQ(
      query_rows(
          db,
          "SELECT count(*), max(code) FROM host_events WHERE event = 'process_exit' AND pid = " +
              std::to_string(pid))[0],
      (std::vector<std::string>{"1", "0"}));
  EXPECT_EQ(
      query_rows(db, "SELECT name FROM process_names WHERE pid = " + std::to_string(pid))[0][0],
      "fake_calls");
}

// A process whose main thread ends with pthread_exit lives on in its other threads: its exit is
// its last thread's, with the status wait(2) gives. The main thread's end was taken for it: one
// exit with code 0 before the worker's 8 calls, and the worker's exit(7) never recorded.
TEST(HostContext, AProcessExitsWithItsLastThreadNotItsMainOne) {
  REQUIRE_BPF();
  std::string db = temp_path("mainexit.db");
  auto run = trace_command(db, {INGERO_FAKE_CALLS, "main-exits", INGERO_FAKE_CUDART}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 7) << run.err;
  const std::string pid = std::to_string(field_after(run.out, "pid"));
  EXPECT_EQ(query_rows(db,
                       "SELECT count(*), max(code) FROM host_events WHERE event = "
                       "'process_exit' AND pid = " +
                           pid)[0],
            (std::vector<std::string>{"1", std::to_string(7 << 8)}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE op = 'cudaMalloc' AND pid = " + pid),
            10);
  // After the last call, not between the main thread's and the worker's.
  EXPECT_EQ(query_int(db,
                      "SELECT (SELECT max(ts_ns) FROM host_events WHERE event = "
                      "'process_exit' AND pid = " +
                          pid +
                          ") > (SELECT max(ts_ns) FROM "
                          "calls WHERE pid = " +
                          pid + ")"),
            1);
}

// A GPU process's child is named at its fork after its parent; its exec names it again. It kept
// its parent's name (helper-75: explain blamed "forks" for what /tmp/basic did, and a hung
// program read as "bash").
TEST(HostContext, AChildThatExecsTakesItsNewProgramsName) {
  REQUIRE_BPF();
  std::string db = temp_path("exec-child.db");
  std::string gate = temp_path("exec-child-gate");
  std::string renamed = temp_path("renamed_calls");
  std::filesystem::create_symlink(INGERO_FAKE_CALLS, renamed);
  auto tracer = spawn_trace(
      db, {INGERO_FAKE_CALLS, "exec-child", INGERO_FAKE_CUDART, gate, renamed}, {}, kFakeEnv);
  std::string line;
  ASSERT_TRUE(tracer.wait_stdout_line("child ", std::chrono::seconds(60), &line)) << tracer.err();
  const std::string child = line.substr(line.find(' ') + 1);
  // Exec only once the trace has named the child after its parent.
  const std::string named = "SELECT name FROM process_names WHERE pid = " + child;
  for (int i = 0; i < 600 && query_rows(db, named).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(query_rows(db, named), (std::vector<std::vector<std::string>>{{"fake_calls"}}));
  std::ofstream(gate + ".1") << "go\n";
  ASSERT_EQ(tracer.wait(std::chrono::seconds(60)), 0) << tracer.err();
  EXPECT_EQ(query_rows(db, named), (std::vector<std::vector<std::string>>{{"renamed_calls"}}));
  // One before the exec, then 2 cudaMalloc and a cudaDeviceSynchronize.
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE pid = " + child), 4);
}

// A thread that blocks carries who woke it on the interval that its wakeup ends, and a wakeup is
// no row of its own (docs/host-context.md, "Who woke it").
TEST(HostContext, TheIntervalOfABlockedThreadNamesWhoWokeIt) {
  REQUIRE_BPF();
  std::string db = temp_path("wake.db");
  auto run = trace_command(db, {INGERO_FAKE_CALLS, "wake", INGERO_FAKE_CUDART, "20"}, {}, kFakeEnv);
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = field_after(run.out, "pid");
  int sleeper = tid_of(run.out, "sleeper"), waker = tid_of(run.out, "waker");
  ASSERT_GT(sleeper, 0) << run.out;
  ASSERT_GT(waker, 0) << run.out;
  std::string mine =
      " FROM host_events WHERE event = 'sched_switch' AND pid = " + std::to_string(pid) +
      " AND tid = " + std::to_string(sleeper);
  // Each of the 20 reads blocked (flags 0) and was woken by the waker, by name.
  EXPECT_EQ(query_rows(db,
                       "SELECT count(*), min(flags), max(flags), min(detail), max(detail), "
                       "min(waker_pid)" +
                           mine + " AND waker_tid = " + std::to_string(waker))[0],
            (std::vector<std::string>{"20", "0", "0", "waker", "waker", std::to_string(pid)}));
  // The time it waited for a CPU after each wakeup lies inside the interval.
  EXPECT_EQ(query_int(db, "SELECT count(*)" + mine +
                              " AND waker_tid IS NOT NULL AND (runq_ns < 0 OR runq_ns > dur_ns)"),
            0);
  // A preempted interval was never asleep: nobody woke it.
  EXPECT_EQ(query_int(db,
                      "SELECT count(*) FROM host_events WHERE event = 'sched_switch' AND "
                      "flags = 1 AND waker_tid IS NOT NULL"),
            0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM host_events WHERE event = 'sched_wakeup'"), 0);
  // The kernel's count of the process's wakeups has them all.
  EXPECT_GE(
      query_int(db, "SELECT sum(wakeups) FROM process_stats WHERE pid = " + std::to_string(pid)),
      20);
}

// A thread that went off-CPU before its process made its first GPU call still has that interval
// recorded when it comes back: the switch program keeps whether the process was a GPU process
// as the thread left, and looks the process up again only because one was marked meanwhile
// (bpf/host.bpf.c, ingero_gpu_gen).
TEST(HostContext, AThreadAsleepBeforeItsProcessBecameAGpuProcessKeepsThatInterval) {
  REQUIRE_BPF();
  REQUIRE_FILE(kCudart);
  std::string db = temp_path("wake-late.db");
  auto run = trace_command(db, {INGERO_FAKE_CALLS, "wake-late", kCudart});
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = field_after(run.out, "pid");
  int sleeper = tid_of(run.out, "sleeper"), main_tid = tid_of(run.out, "main");
  ASSERT_GT(sleeper, 0) << run.out;
  ASSERT_GT(main_tid, 0) << run.out;
  std::string first_call =
      "(SELECT min(ts_ns) FROM calls WHERE op = 'cudaMalloc' AND pid = " + std::to_string(pid) +
      ")";
  // Its one sleep began before the call and ended after it, woken by the main thread.
  EXPECT_EQ(query_rows(db,
                       "SELECT count(*), min(flags), min(waker_tid) FROM host_events WHERE "
                       "event = 'sched_switch' AND tid = " +
                           std::to_string(sleeper) + " AND ts_ns < " + first_call +
                           " AND ts_ns + dur_ns > " + first_call)[0],
            (std::vector<std::string>{"1", "0", std::to_string(main_tid)}));
}

// host-context.md: OOM kills are stored always, whoever the victim (rare, and always relevant).
// A host-wide trace while a process it has no reason to watch (no GPU call, not a child of a
// traced one) is killed in a 32 MiB memory cgroup: one oom_kill row, the victim's pid and name.
TEST(HostContext, AnOomKillIsStoredWhoeverItsVictim) {
  REQUIRE_BPF();
  // The memory controller: cgroup v1's, or v2's where it is the only hierarchy.
  std::string cg;
  for (const char* root : {"/sys/fs/cgroup/memory", "/sys/fs/cgroup"})
    if (std::filesystem::exists(std::string(root) + "/cgroup.procs") &&
        (std::filesystem::exists(std::string(root) + "/memory.limit_in_bytes") ||
         std::filesystem::exists(std::string(root) + "/cgroup.subtree_control"))) {
      cg = std::string(root) + "/ingero-oom-" + std::to_string(getpid());
      break;
    }
  if (cg.empty()) {
    if (running_in_ci()) FAIL() << "CI=true but no memory cgroup to plant an OOM kill in";
    GTEST_SKIP() << "*** SKIPPED (not CI): no memory cgroup to plant an OOM kill in ***";
  }
  std::error_code ec;
  ASSERT_TRUE(std::filesystem::create_directory(cg, ec)) << cg << ": " << ec.message();
  const bool v1 = std::filesystem::exists(cg + "/memory.limit_in_bytes");
  { std::ofstream(cg + (v1 ? "/memory.limit_in_bytes" : "/memory.max")) << "33554432"; }
  if (!v1) std::ofstream(cg + "/memory.swap.max") << "0";
  std::string db = temp_path("oom.db");
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--no-stack", "--db", db});
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", std::chrono::seconds(60))) << tracer.err();
  std::string out, err;
  // The victim prints its pid, joins the cgroup, then writes 200 MiB.
  int rc = run_command(
      {"/bin/sh", "-c",
       "echo $$; echo $$ > " + cg + "/cgroup.procs && exec python3 -c 'x = b\"x\" * (200 << 20)'"},
      &out, &err);
  EXPECT_EQ(rc, 128 + SIGKILL) << err;
  tracer.signal(SIGINT);
  EXPECT_EQ(tracer.wait(std::chrono::seconds(60)), 0) << tracer.err();
  std::filesystem::remove(cg, ec);
  int victim = std::atoi(out.c_str());
  ASSERT_GT(victim, 0) << out;
  EXPECT_EQ(query_rows(db,
                       "SELECT count(*), min(pid), min(comm) FROM host_events WHERE event = "
                       "'oom_kill'")[0],
            (std::vector<std::string>{"1", std::to_string(victim), "python3"}));
}

// host-context.md: TCP retransmits are stored always, with addresses, ports and state. A
// listener whose accept queue is full (backlog 0, one connection waiting) drops the next SYN;
// its client resends it after the initial RTO (1 s) and again at 3 s. The client leaves after
// 2 s: one retransmit of that connection, in SYN_SENT (2), from its port to the listener's.
TEST(HostContext, ATcpRetransmitIsStoredWithAddressesPortsAndState) {
  REQUIRE_BPF();
  std::string db = temp_path("tcp.db");
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--no-stack", "--db", db});
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", std::chrono::seconds(60))) << tracer.err();
  const char* client =
      "import socket, time\n"
      "l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(0)\n"
      "first = socket.create_connection(l.getsockname())\n"
      "time.sleep(0.2)\n"
      "c = socket.socket(); c.setblocking(False)\n"
      "try: c.connect(l.getsockname())\n"
      "except BlockingIOError: pass\n"
      "print(l.getsockname()[1], c.getsockname()[1], flush=True)\n"
      "time.sleep(2)\n";
  std::string out, err;
  EXPECT_EQ(run_command({"python3", "-c", client}, &out, &err), 0) << err;
  tracer.signal(SIGINT);
  EXPECT_EQ(tracer.wait(std::chrono::seconds(60)), 0) << tracer.err();
  int listener = 0, port = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "%d %d", &listener, &port), 2) << out;
  EXPECT_EQ(query_rows(db,
                       "SELECT count(*), min(saddr), min(daddr), min(tcp_state) FROM "
                       "tcp_events WHERE sport = " +
                           std::to_string(port) + " AND dport = " + std::to_string(listener))[0],
            (std::vector<std::string>{"1", "127.0.0.1", "127.0.0.1", "2"}));
}

}  // namespace
}  // namespace ingero::test

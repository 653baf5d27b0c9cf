// Perf events going away: a perf-event uprobe is freed by the kernel one at a time, each after
// grace periods (probe/link_closer.h, ~120 ms here), so a session under the perf pair (kernels
// before 6.6) waited 41-45 s at its end for its ~350 probes. A process of its own frees them now.
// And the on-CPU sampler's events are closed once, by their links.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "kernelside/cpu_sampler.h"
#include "probe/bpf_session.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace {
std::atomic<bool> g_watch_closes{false};
std::atomic<int> g_closes_of_no_file{0};
}  // namespace

// Every close of this test binary, and of the libraries it loads (libbpf), comes here first: a
// close of a number that names no file is counted while a test watches. The second close of a
// number is how one file's owner closes another's, once the number has been handed out again.
extern "C" int close(int fd) {
  long r = syscall(SYS_close, fd);
  if (r == 0) return 0;
  if (errno == EBADF && g_watch_closes.load()) g_closes_of_no_file.fetch_add(1);
  return -1;
}

namespace ingero::test {
namespace {

// The perf events among a process's open files, or -1 when it is gone.
int perf_events_of(int pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec);
  if (ec) return -1;
  int n = 0;
  for (const auto& e : it) {
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (ec) continue;
    if (target.string() == "anon_inode:[perf_event]") ++n;
  }
  return n;
}

// A field of /proc/PID/status ("" when the process is gone).
std::string status_field(int pid, const std::string& name) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(name + ":", 0) == 0) {
      size_t v = line.find_first_not_of(" \t", name.size() + 1);
      return v == std::string::npos ? "" : line.substr(v);
    }
  return "";
}

// Running or exiting, not yet reaped (its exit is where the kernel frees what it held).
bool alive(int pid) {
  std::string state = status_field(pid, "State");
  return !state.empty() && state[0] != 'Z' && state[0] != 'X';
}

std::string comm_of(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string s;
  std::getline(f, s);
  return s;
}

// libbpf's link owns the perf event it is given and closes it at its detach: the sampler closed
// each one a second time after (EBADF here, another thread's new file where the number had been
// handed out again in between: a trace file's, a pipe's).
TEST(CpuSampler, EachEventIsClosedOnceByItsLink) {
  REQUIRE_BPF();
  hal::BpfConfig cfg;
  cfg.rings = {1u << 16, 1u << 16, 1u << 16};
  cfg.stacks = true;
  cfg.cpu_samples = true;
  cfg.host_context = false;
  auto session = hal::BpfSession::open(cfg);
  ASSERT_TRUE(session) << session.error().message;
  const int before = perf_events_of(getpid());
  const int cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
  {
    kernelside::CpuSampler sampler(**session);
    ASSERT_TRUE(sampler.start(49));
    EXPECT_EQ(perf_events_of(getpid()), before + cpus);
    g_closes_of_no_file = 0;
    g_watch_closes = true;
  }
  g_watch_closes = false;
  EXPECT_EQ(g_closes_of_no_file.load(), 0) << "a file number closed twice";
  EXPECT_EQ(perf_events_of(getpid()), before);
}

// Under the perf pair, the session ends without waiting for the kernel to free its probes: when
// `ingero trace` has exited (and its output pipes have ended), a process of its own still holds
// them, holding nothing else, and frees them all; the trace is whole.
TEST(PerfDetach, TheSessionEndsBeforeItsPerfEventProbesAreFreed) {
  REQUIRE_BPF();
  std::string db = temp_path("perf-detach.db");
  const std::string nccl = INGERO_CUDA_ROOT "/lib64/libnccl.so.2";
  auto run = trace_command(db, {INGERO_NCCL_CALLS, nccl}, {"--backends", "nccl", "--no-stack"},
                           {"INGERO_CALL_ATTACH=perf"});
  ASSERT_EQ(run.rc, 0) << run.err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(run.err, m,
                        std::regex("ingero: ([0-9]+) perf-event probes detached; process ([0-9]+) "
                                   "\\(ingero-detach\\) frees them in the background")))
      << run.err;
  const int held = std::stoi(m[1]);
  const int pid = std::stoi(m[2]);
  // Each probe's entry and return, and the dynamic loader's probe.
  const int64_t probes = query_int(db, "SELECT attached_probes FROM sessions");
  EXPECT_EQ(probes, 17) << run.err;
  EXPECT_EQ(held, 2 * probes + 1) << run.err;
  // The kernel frees one at a time, each after its grace periods: far from done by now, while
  // the tracer has exited and its output pipes have ended (the process holds no end of them).
  EXPECT_TRUE(alive(pid)) << "process " << pid << " is gone: the tracer waited for it";
  EXPECT_EQ(comm_of(pid), "ingero-detach");
  EXPECT_NE(status_field(pid, "PPid"), std::to_string(getpid()));
  // security.md: it keeps the perf events and nothing else. It is exiting, its fd table
  // already gone from /proc, while the kernel frees the events in order; a trace file still
  // among them would keep the tracer's lock, holding compact and the next tracer off for
  // seconds. The lock is free, and the process is in a session other than ours.
  int fd = ::open(db.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0)
      << "the trace file's lock is held: " << strerror(errno);
  ::close(fd);
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  // pid (comm) state ppid pgrp session ...
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string state, ppid, pgrp, session;
  fields >> state >> ppid >> pgrp >> session;
  EXPECT_NE(session, std::to_string(getsid(0))) << "the session it came from: " << line;
  EXPECT_NE(session, "0") << line;
  // It frees them all and ends (35 probes: ~4 s here).
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (alive(pid) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(alive(pid)) << "process " << pid << " still frees its probes";
  // The trace is whole: nccl_calls' 13 calls, each once.
  EXPECT_EQ(query_rows(db, "SELECT op, count(*) FROM calls GROUP BY op ORDER BY op"),
            (std::vector<std::vector<std::string>>{{"ncclAllGather", "1"},
                                                   {"ncclAllReduce", "3"},
                                                   {"ncclBcast", "2"},
                                                   {"ncclBroadcast", "1"},
                                                   {"ncclCommInitRank", "1"},
                                                   {"ncclGroupEnd", "1"},
                                                   {"ncclGroupStart", "1"},
                                                   {"ncclRecv", "1"},
                                                   {"ncclReduce", "1"},
                                                   {"ncclSend", "1"}}))
      << run.err;
}

}  // namespace
}  // namespace ingero::test

// Perf events going away: the on-CPU sampler's events are closed once, by their links.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
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

}  // namespace
}  // namespace ingero::test

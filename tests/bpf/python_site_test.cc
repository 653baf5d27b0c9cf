// A Python process's call site key (bpf/stacks.bpf.c: site_key) reads the caller's innermost
// Python frame through the thread's own copy of its process's py_procs entry. The copy must
// follow the map: a process whose entry goes (its layout was refused while it ran) keys its
// sites by return address alone from its next call, and keys them by frame again once its
// entry is back. Tested on real probes with a stand-in interpreter laid out in this process's
// own memory: one thread, one frame whose instruction the test moves.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "bpf/ingero_records.h"
#include "tests/bpf/self_probe.h"
#include "tests/support/trace_db.h"

extern "C" __attribute__((noinline, used, visibility("default"))) uint64_t ingero_test_py_site(
    uint64_t a0) {
  asm volatile("" ::: "memory");
  return a0 + 1;
}

namespace ingero::test {
namespace {

// The stand-in interpreter: _PyRuntime -> its interpreter -> its one thread state -> its frame.
// Each object is padded past the 128 bytes site_key reads at once (its window).
struct Frame {
  uint64_t code = 0x5000;
  uint64_t instr = 0;
  uint64_t pad[30] = {};
};
struct ThreadState {
  uint64_t next = 0;
  uint64_t thread_id = 0;
  uint64_t frame = 0;
  uint64_t pad[30] = {};
};
struct Interp {
  uint64_t threads = 0;
  uint64_t pad[30] = {};
};
struct Runtime {
  uint64_t interp = 0;
  uint64_t pad[30] = {};
};

Frame g_frame;
ThreadState g_tstate;
Interp g_interp;
Runtime g_runtime;

ingero_py_config stand_in_config() {
  ingero_py_config c{};
  c.runtime = uint64_t(&g_runtime);
  c.code_type = 0;
  c.version = (3 << 8) | 11;
  c.runtime_interp_head = offsetof(Runtime, interp);
  c.interp_threads_head = offsetof(Interp, threads);
  c.tstate_next = offsetof(ThreadState, next);
  c.tstate_thread_id = offsetof(ThreadState, thread_id);
  c.tstate_frame = offsetof(ThreadState, frame);
  c.cframe_current_frame = 0xffff;  // the thread state points at the frame itself
  c.frame_code = offsetof(Frame, code);
  c.frame_previous = offsetof(Frame, pad);
  c.frame_instr = offsetof(Frame, instr);
  c.owner_cstack = 0xff;
  return c;
}

// `n` calls of the probed function from one call site, at the frame's instruction `instr`.
__attribute__((noinline)) void calls_at(uint64_t instr, int n) {
  g_frame.instr = instr;
  for (int i = 0; i < n; ++i) EXPECT_EQ(ingero_test_py_site(uint64_t(i)), uint64_t(i) + 1);
}

TEST(PythonSiteKey, FollowsItsProcesssEntryAsItGoesAndComesBack) {
  REQUIRE_BPF();
  g_runtime.interp = uint64_t(&g_interp);
  g_interp.threads = uint64_t(&g_tstate);
  g_tstate.thread_id = uint64_t(syscall(SYS_gettid));  // 3.11+: the native thread id
  g_tstate.frame = uint64_t(&g_frame);

  auto s = open_site_session();
  ASSERT_TRUE(s) << s.error().message;
  auto& session = **s;
  const hal::ProbeSpec spec{.symbol = "ingero_test_py_site", .kind = hal::EventKind::kLaunch};
  std::string why;
  auto links = attach_to_self(session, spec, &why);
  ASSERT_FALSE(links.empty()) << why;
  const uint32_t pid = uint32_t(getpid());
  auto walks = [&] { return session.stats()[INGERO_STAT_STACK_WALKS]; };
  auto of_site = [&] { return session.stats()[INGERO_STAT_STACKS_OF_SITE]; };

  // Keyed by frame: ten lines, ten sites, each walking its first two calls.
  ingero_py_config c = stand_in_config();
  ASSERT_TRUE(session.set_python(pid, &c));
  for (uint64_t line = 1; line <= 10; ++line) calls_at(line, 3);
  EXPECT_EQ(walks(), 20u);
  EXPECT_EQ(of_site(), 10u);

  // The entry goes: ten more lines are one site, the return address's.
  ASSERT_TRUE(session.set_python(pid, nullptr));
  for (uint64_t line = 11; line <= 20; ++line) calls_at(line, 3);
  EXPECT_EQ(walks(), 22u);
  EXPECT_EQ(of_site(), 38u);

  // It comes back: the first ten lines are the sites they were, known and walked enough.
  ASSERT_TRUE(session.set_python(pid, &c));
  for (uint64_t line = 1; line <= 10; ++line) calls_at(line, 3);
  EXPECT_EQ(walks(), 22u);
  EXPECT_EQ(of_site(), 68u);
  // And a line never seen is a site of its own.
  calls_at(21, 3);
  EXPECT_EQ(walks(), 24u);
  EXPECT_EQ(of_site(), 69u);
}

}  // namespace
}  // namespace ingero::test

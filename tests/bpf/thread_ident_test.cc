// A thread's name and cgroup ride on its call records only when they changed since they last
// did, and the programs read them (two helper calls, ~90 ns a timed call here) at the thread's
// first record and then at one in 16 of its calls that return, as at one untimed launch in 16:
// a rename shows from the next of those (docs/schema.md, `comm`).
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bpf/ingero_records.h"
#include "probe/bpf_session.h"
#include "probe/ring_reader.h"
#include "tests/bpf/self_probe.h"
#include "tests/support/trace_db.h"

// What the test probes, as a sync (timed: a record at each return).
extern "C" __attribute__((noinline, used, visibility("default"))) int ingero_test_ident_sync(
    int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace ingero::test {
namespace {

TEST(ThreadIdent, ARenameShowsAtTheThreadsNextReadOneCallInSixteen) {
  REQUIRE_BPF();
  auto session = open_small_session();
  ASSERT_TRUE(session) << session.error().message;
  constexpr hal::ProbeSpec kSync{.symbol = "ingero_test_ident_sync", .kind = hal::EventKind::kSync};
  std::string why;
  auto links = attach_to_self(**session, kSync, &why);
  ASSERT_FALSE(links.empty()) << why;

  // For each record of the thread: the name it carries, "" for none.
  std::vector<std::string> names;
  auto reader =
      hal::RingReader::create((*session)->calls_fd(), -1, -1, [&](const void* d, size_t size) {
        ingero_call_rec h;
        if (size < sizeof(h)) return;
        std::memcpy(&h, d, sizeof(h));
        if (h.type != INGERO_REC_CALL) return;
        std::string name;
        size_t at = sizeof(h) + 8 * (h.nregs + h.nstack);
        if (h.flags & INGERO_CALL_OFFCPU) at += sizeof(ingero_call_offcpu);
        ingero_call_ident id;
        if ((h.flags & INGERO_CALL_IDENT) && at + sizeof(id) <= size) {
          std::memcpy(&id, static_cast<const char*>(d) + at, sizeof(id));
          name.assign(id.comm, strnlen(id.comm, sizeof(id.comm)));
        }
        names.push_back(name);
      });
  ASSERT_TRUE(reader) << reader.error().message;
  // A fresh thread: its first record carries its name; its second reads it again (unchanged,
  // so none); renamed then, the next read is its 18th record (the 16th check after the second).
  std::thread([] {
    prctl(PR_SET_NAME, "ident-before");
    volatile int v = ingero_test_ident_sync(0);
    v = ingero_test_ident_sync(1);
    prctl(PR_SET_NAME, "ident-after");
    for (int i = 0; i < 20; ++i) v = ingero_test_ident_sync(i);
    (void)v;
  }).join();
  ASSERT_TRUE((*reader)->drain());

  ASSERT_EQ(names.size(), 22u);
  std::vector<std::string> want(22);
  want[0] = "ident-before";
  want[17] = "ident-after";
  EXPECT_EQ(names, want);
}

}  // namespace
}  // namespace ingero::test

// A stop signal while `trace` still reads its flags ends it as one, said: its handlers are
// installed at main's start. Installed when the run began, a SIGTERM in the first ~20 ms (the
// commands registered, the config file read) killed the tracer silently.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// Blocked opening a --config FIFO no one writes (read at parse time, before any BPF): the
// signal interrupts that read, and it is said as a stop, not as a config file "not readable".
TEST(TraceEarlySignal, ASignalWhileTheFlagsAreReadIsAStopSaid) {
  std::string fifo = temp_path("config.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto p = Subprocess::spawn(
      {INGERO_BIN, "trace", "--config", fifo, "--db", temp_path("never.db"), "--", "/bin/true"});
  // Until it waits in the FIFO's open for a writer (the kernel's wait_for_partner).
  bool blocked = false;
  for (int i = 0; i < 2000 && !blocked; ++i) {
    std::ifstream wchan("/proc/" + std::to_string(p.pid()) + "/wchan");
    std::string w;
    blocked = (wchan >> w) && w == "wait_for_partner";
    if (!blocked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(blocked);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(std::chrono::seconds(10)), 128 + SIGTERM);
  EXPECT_EQ(p.err(), "ingero: SIGTERM before tracing began: nothing was traced\n");
}

}  // namespace
}  // namespace ingero::test

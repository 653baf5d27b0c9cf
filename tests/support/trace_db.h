// Test helpers: query a trace file, run `ingero trace` around a command, and the BPF gate.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hal/event.h"
#include "tests/support/subprocess.h"

namespace ingero::test {

// Rows of a read-only query, every value rendered as text ("NULL" for NULL).
std::vector<std::vector<std::string>> query_rows(const std::string& db, const std::string& sql);
int64_t query_int(const std::string& db, const std::string& sql);

struct TraceRun {
  int rc = -1;
  std::string out;  // the command's stdout (inherited through ingero)
  std::string err;  // ingero's stderr
};
// ingero trace --no-live --db DB [extra...] -- command...
TraceRun trace_command(const std::string& db, const std::vector<std::string>& command,
                       const std::vector<std::string>& extra = {},
                       const std::vector<std::string>& env = {});
// The same with ingero on CPU 0 (taskset; the command inherits it and may move itself): for
// tests that plant contention on CPU 1, where the tracer's own work on that CPU would be a
// contender too (it is named when it holds the CPU, as it should be).
TraceRun trace_command_on_cpu0(const std::string& db, const std::vector<std::string>& command,
                               const std::vector<std::string>& extra = {},
                               const std::vector<std::string>& env = {});

// trace_command, running: for tests that steer the command while it is traced (its stdin).
Subprocess spawn_trace(const std::string& db, const std::vector<std::string>& command,
                       const std::vector<std::string>& extra = {},
                       const std::vector<std::string>& env = {});

// trace_command_on_cpu0, running: for tests that read the tracer while it traces (/metrics).
Subprocess spawn_trace_on_cpu0(const std::string& db, const std::vector<std::string>& command,
                               const std::vector<std::string>& extra = {},
                               const std::vector<std::string>& env = {});

// A CUDA runtime call of `comm` "trainer" that returned (0): what the synthetic traces of the
// store tests are made of.
hal::Event runtime_call(uint64_t ts_ns, uint64_t dur_ns, uint32_t pid, uint32_t tid,
                        hal::EventKind kind, std::string_view op);

// This process's scratch directory, /tmp/ingero-tests/PID, emptied on first use (an
// earlier process with the same pid may have left files there).
std::string scratch_root();
// A fresh path under a per-test directory of scratch_root(), removed when the test passes.
std::string temp_path(const std::string& name);
std::string sha256_file(const std::string& path);
// The fixture INGERO_FIXTURES_DIR/REL.db.xz ("legacy/v8-archived") decompressed to `out`;
// false where it could not be.
bool unpack_fixture(const std::string& rel, const std::string& out);
// The 1-based number of the first line of file `path` holding `needle` (0: none), e.g. of a
// workload's source line a stack must name.
int line_of(const std::string& path, const std::string& needle);

// Whether this process can load and attach BPF (root, BTF, working uprobes), cached.
bool bpf_available(std::string* why);
bool running_in_ci();

// The ingero binary under test where nobody (uid 65534, under setpriv) may run it: the build
// folder may sit where only root can enter (a CI checkout under /root), then a copy in the
// scratch folder.
std::string ingero_binary_for_nobody();

}  // namespace ingero::test

// BPF tests: skip loudly without BPF, but fail under CI=true, where BPF must work.
#define REQUIRE_BPF()                                                                         \
  do {                                                                                        \
    std::string why_;                                                                         \
    if (!::ingero::test::bpf_available(&why_)) {                                              \
      if (::ingero::test::running_in_ci()) FAIL() << "CI=true but BPF unavailable: " << why_; \
      GTEST_SKIP() << "*** BPF TEST SKIPPED (not CI): " << why_ << " ***";                    \
    }                                                                                         \
  } while (0)

// Real vendor libraries: skip loudly when this host lacks them (the fake covers the logic).
#define REQUIRE_FILE(path)                                             \
  do {                                                                 \
    if (access((path), R_OK) != 0)                                     \
      GTEST_SKIP() << "*** SKIPPED: " << (path) << " not present ***"; \
  } while (0)

// Tests that need root (to make a file or folder another user owns, or to act as one under
// setpriv): skip loudly without it, but fail under CI=true.
#define REQUIRE_ROOT()                                                                  \
  do {                                                                                  \
    if (geteuid() != 0) {                                                               \
      if (::ingero::test::running_in_ci()) FAIL() << "CI=true but not running as root"; \
      GTEST_SKIP() << "*** SKIPPED (not CI): needs root to act as another user ***";    \
    }                                                                                   \
  } while (0)

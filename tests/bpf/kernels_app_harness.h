// Tracing the nvcc-built kernels_app (tests/workloads/kernels_app.cu) under `ingero trace`:
// the kernel-name tests and the launch-site tests share it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {

// The nvcc-built program: skipped loudly without nvcc, a failure under CI=true.
#define REQUIRE_KERNELS_APP(path)                                                            \
  do {                                                                                       \
    if (access((path), X_OK) != 0) {                                                         \
      if (::ingero::test::running_in_ci()) FAIL() << "CI=true but " << (path) << " missing"; \
      GTEST_SKIP() << "*** SKIPPED: " << (path) << " not built (no nvcc) ***";               \
    }                                                                                        \
  } while (0)

// Polls the live trace file until `sql` gives `want` (the tracer commits every 200 ms).
inline bool wait_for(const std::string& db, const std::string& sql, int64_t want,
                     std::chrono::seconds timeout = std::chrono::seconds(60)) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (access(db.c_str(), R_OK) == 0 && query_int(db, sql) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

inline std::string launches_of(int pid) {
  return "SELECT count(*) FROM calls WHERE kind = 'launch' AND pid = " + std::to_string(pid);
}

inline int pid_of(Subprocess& p, const char* what) {
  std::string line;
  EXPECT_TRUE(p.wait_stdout_line("pid ", std::chrono::seconds(30), &line))
      << what << ": " << p.err();
  return line.size() > 4 ? std::stoi(line.substr(line.find("pid ") + 4)) : 0;
}

// Runs `command` under `ingero trace -- command` (its stdin is the tracer's, inherited): the
// workload waits for "go", launches, and lives until its stdin closes, by which time the trace
// file holds its `launches` launches.
inline std::string trace_workload(const std::vector<std::string>& command, int launches,
                                  const std::vector<std::string>& env, int* pid,
                                  std::string* err = nullptr) {
  std::string db = temp_path("names.db");
  std::vector<std::string> argv = {INGERO_BIN, "trace", "--no-live", "--db", db, "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  auto tracer = Subprocess::spawn(argv, env);
  *pid = pid_of(tracer, "workload");
  EXPECT_TRUE(tracer.wait_stdout_line("ready", std::chrono::seconds(30))) << tracer.err();
  tracer.write_stdin("go\n");
  EXPECT_TRUE(tracer.wait_stdout_line("launched", std::chrono::seconds(30)))
      << tracer.out() << tracer.err();
  EXPECT_TRUE(wait_for(db, launches_of(*pid), launches)) << tracer.err();
  tracer.close_stdin();
  EXPECT_EQ(tracer.wait(), 0) << tracer.err();
  if (err) *err = tracer.err();
  return db;
}

}  // namespace ingero::test

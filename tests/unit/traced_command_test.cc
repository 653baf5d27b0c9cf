// Whether `ingero trace -- CMD` can run CMD, decided before any probe is attached or the trace
// file touched, as a shell decides it: 127 nothing there, 126 there but not runnable. A
// directory, an empty name and a script whose #! names nothing passed access(X_OK) or failed
// only at exec, after an empty session had been appended to the trace.
#include "app/traced_command.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "hal/secret_env.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::app {
namespace {

std::string script(const std::string& name, const std::string& text, bool executable) {
  std::string p = test::temp_path(name);
  std::ofstream(p) << text;
  ::chmod(p.c_str(), executable ? 0755 : 0644);
  return p;
}

TEST(TracedCommand, WhatCannotRunIsSaidAsAShellSaysIt) {
  auto says = [](const std::string& name) {
    auto no = cannot_run(name);
    return no ? std::to_string(no->status) + " " + no->why : std::string("runs");
  };
  EXPECT_EQ(says("/bin/true"), "runs");
  EXPECT_EQ(says("true"), "runs");  // along $PATH
  EXPECT_EQ(says(script("ok.sh", "#!/bin/sh\nexit 0\n", true)), "runs");
  EXPECT_EQ(says(script("env.sh", "#! /usr/bin/env python3\n", true)), "runs");
  EXPECT_EQ(says(""), "127 an empty command name");
  EXPECT_EQ(says("/nonexistent/program"), "127 no such file");
  EXPECT_EQ(says("no-such-program-in-path"), "127 not found in PATH");
  std::string dir = test::temp_path("a-directory");
  std::filesystem::create_directories(dir);
  EXPECT_EQ(says(dir), "126 is a directory");
  EXPECT_EQ(resolve_program(dir), "");
  EXPECT_EQ(says(script("plain.sh", "exit 0\n", false)), "126 not executable");
  EXPECT_EQ(says(script("bad.sh", "#!/nonexistent/interpreter -x\nexit 0\n", true)),
            "126 bad interpreter /nonexistent/interpreter");
  EXPECT_EQ(says(script("dir-interp.sh", "#!" + dir + "\n", true)), "126 bad interpreter " + dir);
}

// A --pid that names no running process is refused before anything is attached or written:
// it made an empty trace, exit 0, without a word.
TEST(TracedCommand, APidThatIsNotRunningIsRefused) {
  std::string db = test::temp_path("no-such-pid.db");
  std::string out, err;
  EXPECT_EQ(test::run_command(
                {INGERO_BIN, "trace", "-q", "--pid", "4194304", "--duration", "1s", "--db", db},
                &out, &err),
            2);
  EXPECT_EQ(err, "ingero trace: --pid 4194304: no such process is running\n");
  EXPECT_FALSE(std::filesystem::exists(db));
}

// A zombie answers kill(pid, 0) but runs nothing: the trace ran silently, exit 0, and traced
// nothing. It is refused as a process that has exited.
TEST(TracedCommand, APidThatHasExitedUnreapedIsRefused) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  for (int i = 0; i < 200; ++i) {  // until it is a zombie (not waited for)
    std::ifstream in("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(in, line);
    if (line.find(") Z ") != std::string::npos) break;
    usleep(10'000);
  }
  std::string db = test::temp_path("zombie.db");
  std::string out, err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "trace", "-q", "--pid", std::to_string(child),
                               "--duration", "1s", "--db", db},
                              &out, &err),
            2);
  EXPECT_EQ(err, "ingero trace: --pid " + std::to_string(child) +
                     ": the process has exited (its parent has not reaped it yet): nothing runs "
                     "to trace\n");
  EXPECT_FALSE(std::filesystem::exists(db));
  waitpid(child, nullptr, 0);
}

// ingero's own credentials never reach what it starts (helper-73: the traced command and the
// NVML helper held the fleet store's password and the MCP token); the workload's own variables,
// the OpenTelemetry ones among them, do.
TEST(TracedCommand, TheCommandGetsNoneOfIngerosCredentials) {
  for (const char* v : {"INGERO_CLICKHOUSE_PASSWORD", "INGERO_MCP_TOKEN", "INGERO_DASHBOARD_TOKEN",
                        "INGERO_OTLP_HEADERS"})
    setenv(v, "secret", 1);
  setenv("OTEL_EXPORTER_OTLP_HEADERS", "keep=1", 1);
  // What the NVML helper is spawned with (hal/sampler_process.cc) is the same environment.
  size_t kept = 0;
  for (char* e : hal::environment_without_secrets()) {
    if (!e) break;
    ++kept;
    EXPECT_EQ(std::string(e).find("=secret"), std::string::npos) << e;
  }
  EXPECT_GT(kept, 0u);
  std::string out = test::temp_path("env.txt");
  TracedCommand c;
  ASSERT_EQ(c.start({"/bin/sh", "-c", "env > " + out}, std::nullopt), 0);
  c.release();
  for (int i = 0; i < 500 && !c.exited(); ++i) usleep(10'000);
  ASSERT_TRUE(c.done());
  for (const char* v : {"INGERO_CLICKHOUSE_PASSWORD", "INGERO_MCP_TOKEN", "INGERO_DASHBOARD_TOKEN",
                        "INGERO_OTLP_HEADERS"})
    unsetenv(v);
  unsetenv("OTEL_EXPORTER_OTLP_HEADERS");
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text.find("secret"), std::string::npos) << text;
  EXPECT_NE(text.find("OTEL_EXPORTER_OTLP_HEADERS=keep=1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("PATH="), std::string::npos) << text;
}

// Waits (up to 2 s) until /proc/PID/stat shows state Z.
void wait_zombie(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    if (line.find(") Z ") != std::string::npos) return;
    usleep(10'000);
  }
}

// A main thread that ended with pthread_exit shows Z while a worker runs on: the process was
// refused as exited while it made calls (helper-75).
TEST(TracedCommand, AProcessWhoseMainThreadEndedIsStillTraced) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pthread_t t;
    pthread_create(
        &t, nullptr,
        [](void*) -> void* {
          sleep(10);
          _exit(0);
        },
        nullptr);
    // The main thread alone ends (pthread_exit would unwind into the test framework's frames,
    // which this fork shares).
    syscall(SYS_exit, 0);
  }
  wait_zombie(child);
  std::ostringstream err;
  EXPECT_EQ(refuse_untraceable({uint32_t(child)}, {}, err), 0);
  EXPECT_EQ(err.str(), "");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

// kill(2) answers for a thread's id too: `--pid TID` traced nothing and ran to --duration.
TEST(TracedCommand, APidThatIsAThreadIsRefusedNamingItsProcess) {
  std::promise<pid_t> tid;
  std::promise<void> done;
  std::thread t([&] {
    tid.set_value(pid_t(syscall(SYS_gettid)));
    done.get_future().wait();
  });
  pid_t id = tid.get_future().get();
  std::ostringstream err;
  EXPECT_EQ(refuse_untraceable({uint32_t(id)}, {}, err), 2);
  EXPECT_EQ(err.str(), "ingero trace: --pid " + std::to_string(id) + " is a thread of process " +
                           std::to_string(getpid()) + ": give --pid " + std::to_string(getpid()) +
                           " (every thread of a process is traced)\n");
  done.set_value();
  t.join();
}

}  // namespace
}  // namespace ingero::app

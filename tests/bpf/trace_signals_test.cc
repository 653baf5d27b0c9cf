// Signals reach `ingero trace` at any moment (docs/cli.md): one that comes while it opens its
// file and attaches its probes ends the session once they are, without running the command;
// SIGHUP (a closed terminal) ends it as SIGINT and SIGTERM do; a command that dies before it
// was released is reported as such, not by a tracer killed by SIGPIPE.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using namespace std::chrono_literals;

// The tracer's one child (the command, waiting for its release), once it exists.
pid_t child_of(pid_t tracer) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream in("/proc/" + std::to_string(tracer) + "/task/" + std::to_string(tracer) +
                     "/children");
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(2ms);
  }
  return 0;
}

struct Started {
  Subprocess tracer;
  pid_t command = 0;
  std::string db, marker;
};

// `ingero trace` of a command that leaves a marker file once it runs, held after its file
// is opened (INGERO_TEST_ATTACH_PAUSE_MS), with its command forked and waiting.
Started start_held(const std::string& name) {
  Started s;
  s.db = temp_path(name + ".db");
  s.marker = temp_path(name + ".ran");
  s.tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", s.db, "--", "sh", "-c",
                                "touch " + s.marker + "; exec sleep 30"},
                               {"INGERO_TEST_ATTACH_PAUSE_MS=3000"});
  s.command = child_of(s.tracer.pid());
  return s;
}

std::vector<std::vector<std::string>> session(const std::string& db) {
  return query_rows(db, "SELECT exit_reason, stopped_at > 0, bpf_stats <> '{}' FROM sessions");
}

TEST(TraceSignals, ASignalWhileStartingEndsTheSessionWithoutRunningTheCommand) {
  REQUIRE_BPF();
  for (int sig : {SIGTERM, SIGHUP, SIGINT}) {
    Started s = start_held("starting-" + std::to_string(sig));
    ASSERT_GT(s.command, 0) << "the command was never forked";
    s.tracer.signal(sig);
    int rc = s.tracer.wait(60s);
    const char* name = sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT";
    EXPECT_EQ(rc, 128 + sig) << name << ": " << s.tracer.err();
    EXPECT_NE(s.tracer.err().find(std::string("ingero: ") + name +
                                  " before tracing began: the command was not run"),
              std::string::npos)
        << s.tracer.err();
    EXPECT_FALSE(std::filesystem::exists(s.marker)) << name << ": the command ran";
    // Not said to have been killed as well: it never ran ("command killed by signal 2" followed).
    EXPECT_EQ(s.tracer.err().find("command killed by signal"), std::string::npos) << s.tracer.err();
    EXPECT_EQ(session(s.db), (std::vector<std::vector<std::string>>{{name, "1", "1"}})) << name;
    EXPECT_FALSE(std::filesystem::exists(s.db + "-reserve")) << name;
  }
}

// A Ctrl-C a moment after the command exited on its own (before the tracer's loop saw the exit)
// was recorded as the session's stop reason. The command's exit came first: that is the reason,
// and the tracer's status is the command's. Held before its first read of the rings
// (INGERO_TEST_READ_PAUSE_MS), the tracer sees both at once, as a busy one would.
TEST(TraceSignals, ASignalAfterTheCommandExitedIsNotTheStopReason) {
  REQUIRE_BPF();
  std::string db = temp_path("late.db");
  auto tracer =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--", "sh", "-c", "exit 3"},
                        {"INGERO_TEST_READ_PAUSE_MS=3000"});
  pid_t command = child_of(tracer.pid());
  ASSERT_GT(command, 0) << tracer.err();
  auto state = [command] {
    std::ifstream in("/proc/" + std::to_string(command) + "/stat");
    std::string line;
    std::getline(in, line);
    size_t paren = line.rfind(')');
    return paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
  };
  for (int i = 0; i < 3000 && state() != 'Z'; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(state(), 'Z') << "the command has not exited: " << tracer.err();
  tracer.signal(SIGINT);
  EXPECT_EQ(tracer.wait(60s), 3) << tracer.err();
  EXPECT_NE(tracer.err().find("ingero: stopped (command exited)"), std::string::npos)
      << tracer.err();
  EXPECT_NE(tracer.err().find("ingero: command exited with status 3"), std::string::npos)
      << tracer.err();
  EXPECT_EQ(session(db), (std::vector<std::vector<std::string>>{{"command exited", "1", "1"}}));
}

TEST(TraceSignals, SighupWhileTracingEndsTheSessionAsSigtermDoes) {
  REQUIRE_BPF();
  std::string db = temp_path("hup.db"), marker = temp_path("hup.ran");
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--", "sh", "-c",
                                   "touch " + marker + "; exec sleep 30"});
  for (int i = 0; i < 3000 && !std::filesystem::exists(marker); ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(std::filesystem::exists(marker)) << tracer.err();
  tracer.signal(SIGHUP);  // passed on to the command, as SIGTERM would be
  EXPECT_EQ(tracer.wait(60s), 128 + SIGHUP) << tracer.err();
  EXPECT_NE(tracer.err().find("ingero: command killed by signal 1"), std::string::npos)
      << tracer.err();
  EXPECT_EQ(session(db), (std::vector<std::vector<std::string>>{{"SIGHUP", "1", "1"}}));
}

// Ctrl-\'s SIGQUIT or a user signal killed the tracer without a word: the session unfinished
// (stopped_at 0) and the command running on under init, untraced. Each ends the session as
// SIGTERM does, and is passed on to the command.
TEST(TraceSignals, SigquitAndUserSignalsEndTheSessionAsSigtermDoes) {
  REQUIRE_BPF();
  for (int sig : {SIGQUIT, SIGUSR1}) {
    const std::string name = sig == SIGQUIT ? "SIGQUIT" : "SIGUSR1";
    SCOPED_TRACE(name);
    std::string db = temp_path(name + ".db"), marker = temp_path(name + ".ran");
    auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--", "sh", "-c",
                                     "touch " + marker + "; exec sleep 30"});
    for (int i = 0; i < 3000 && !std::filesystem::exists(marker); ++i)
      std::this_thread::sleep_for(10ms);
    ASSERT_TRUE(std::filesystem::exists(marker)) << tracer.err();
    const pid_t command = child_of(tracer.pid());
    ASSERT_GT(command, 0);
    tracer.signal(sig);
    EXPECT_EQ(tracer.wait(60s), 128 + sig) << tracer.err();
    EXPECT_NE(tracer.err().find("ingero: command killed by signal " + std::to_string(sig)),
              std::string::npos)
        << tracer.err();
    EXPECT_EQ(session(db), (std::vector<std::vector<std::string>>{{name, "1", "1"}}));
    EXPECT_NE(kill(command, 0), 0) << "the command outlived its tracer";
  }
}

// A file-size limit (ulimit -f) killed the tracer with SIGXFSZ at the write past it, as above.
// The write fails instead: said as a full disk is, with the limit named; the command runs to
// its end, and the file reads.
TEST(TraceSignals, AFileSizeLimitIsAFailedWriteNotADeath) {
  REQUIRE_BPF();
  std::string db = temp_path("fsize.db");
  std::string out, err;
  int rc =
      run_command({"sh", "-c",
                   "ulimit -f 2000; exec " + std::string(INGERO_BIN) +
                       " trace --no-live --no-stack --keep-all --db " + db + " -- " +
                       INGERO_CUDA_CALLS + " " INGERO_CUDA_ROOT "/lib64/stubs/libcuda.so 3000"},
                  &out, &err, {}, std::chrono::seconds(300));
  EXPECT_EQ(rc, 0) << err.substr(0, 3000);
  EXPECT_NE(err.find("(the file reached this process's file-size limit, `ulimit -f`)"),
            std::string::npos)
      << err.substr(0, 3000);
  EXPECT_NE(err.find("ingero: command exited with status 0"), std::string::npos) << err;
  // The program's own count of its calls: every one of its 3000 rounds ran.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3000 * 47 + 1);
  // The file reads (the session's end may not have fit in it).
  std::string report;
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &report, &err), 0) << err;
  EXPECT_NE(report.find("INGERO INCIDENT REPORT — " + db + "\n"), std::string::npos) << report;
}

TEST(TraceSignals, ACommandKilledBeforeItsReleaseIsReportedNotFatal) {
  REQUIRE_BPF();
  Started s = start_held("killed-waiting");
  ASSERT_GT(s.command, 0);
  ASSERT_EQ(kill(s.command, SIGKILL), 0);
  // Releasing it writes to a pipe nobody reads: EPIPE, not SIGPIPE's death.
  EXPECT_EQ(s.tracer.wait(60s), 128 + SIGKILL) << s.tracer.err();
  EXPECT_NE(s.tracer.err().find("ingero: command killed by signal 9"), std::string::npos)
      << s.tracer.err();
  EXPECT_FALSE(std::filesystem::exists(s.marker));
  EXPECT_EQ(session(s.db), (std::vector<std::vector<std::string>>{{"command exited", "1", "1"}}));
}

// A command that ignores the signal passed on to it outlives the tracer's 5 s of grace and
// keeps running, untraced. It has no status yet: the tracer exits 128 + the signal that
// stopped it, as a shell reports an interrupted job, where it exited 0 and a script read
// success.
TEST(TraceSignals, ACommandThatOutlivesTheSignalLeavesTheTracersStatusTheSignals) {
  REQUIRE_BPF();
  std::string db = temp_path("stubborn.db"), marker = temp_path("stubborn.ran");
  auto tracer =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--", "sh", "-c",
                         "exec >/dev/null 2>&1; trap '' TERM; touch " + marker + "; sleep 20"});
  for (int i = 0; i < 3000 && !std::filesystem::exists(marker); ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(std::filesystem::exists(marker)) << tracer.err();
  pid_t command = child_of(tracer.pid());
  ASSERT_GT(command, 0);
  tracer.signal(SIGTERM);
  EXPECT_EQ(tracer.wait(60s), 128 + SIGTERM) << tracer.err();
  EXPECT_NE(tracer.err().find("did not exit within 5 s of the signal; it keeps running, untraced"),
            std::string::npos)
      << tracer.err();
  EXPECT_EQ(kill(command, 0), 0) << "the command was left running";
  kill(command, SIGKILL);
  EXPECT_EQ(session(db), (std::vector<std::vector<std::string>>{{"SIGTERM", "1", "1"}}));
}

// The command exits while a process it started runs on (a `&` in a script): the session ends
// with the command, and that process, untraced from then on, is said with its pid; nothing is
// said of one the command waited for.
TEST(TraceSignals, ProcessesTheCommandLeftRunningAreSaid) {
  REQUIRE_BPF();
  std::string db = temp_path("left.db");
  auto left = trace_command(db, {"/bin/sh", "-c", "sleep 3 & echo $!; exit 3"});
  EXPECT_EQ(left.rc, 3) << left.err;
  int sleeper = std::atoi(left.out.c_str());
  ASSERT_GT(sleeper, 0) << left.out;
  EXPECT_NE(left.err.find("ingero: 1 process the command started still runs (pid " +
                          std::to_string(sleeper) +
                          "), untraced from here on: trace a command that waits for them, or "
                          "trace them with --pid\n"),
            std::string::npos)
      << left.err;
  auto waited = trace_command(temp_path("waited.db"), {"/bin/sh", "-c", "sleep 0.2 & wait"});
  EXPECT_EQ(waited.rc, 0) << waited.err;
  EXPECT_EQ(waited.err.find("the command started"), std::string::npos) << waited.err;
  // A process given with --pid is none the command started (found by a hostile-testing helper:
  // the line named it and said to trace it with --pid).
  pid_t given = fork();
  if (given == 0) {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(given, 0);
  auto with_pid =
      trace_command(temp_path("with-pid.db"), {"/bin/true"}, {"--pid", std::to_string(given)});
  kill(given, SIGKILL);
  waitpid(given, nullptr, 0);
  EXPECT_EQ(with_pid.rc, 0) << with_pid.err;
  EXPECT_EQ(with_pid.err.find("the command started"), std::string::npos) << with_pid.err;
}

// cli.md: --duration ends the trace with the command still running: the tracer says so with
// the command's pid, exits 0, and leaves it running; the session's stop reason is the
// duration, not a signal.
TEST(TraceSignals, ADurationEndsTheTraceAndLeavesTheCommandRunning) {
  REQUIRE_BPF();
  std::string db = temp_path("duration.db");
  auto tracer =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--no-stack", "--duration", "1s", "--db",
                         db, "--", "sh", "-c", "exec >/dev/null 2>&1; exec sleep 30"});
  EXPECT_EQ(tracer.wait(60s), 0) << tracer.err();
  pid_t command = 0;
  auto at = tracer.err().find("ingero: the traced command (pid ");
  ASSERT_NE(at, std::string::npos) << tracer.err();
  command = pid_t(std::atoi(tracer.err().c_str() + at + 32));
  EXPECT_NE(tracer.err().find("ingero: the traced command (pid " + std::to_string(command) +
                              ") is still running, untraced\n"),
            std::string::npos)
      << tracer.err();
  ASSERT_GT(command, 0);
  EXPECT_EQ(kill(command, 0), 0) << "the command was not left running";
  std::string comm;
  std::ifstream(std::string("/proc/") + std::to_string(command) + "/comm") >> comm;
  EXPECT_EQ(comm, "sleep");
  kill(command, SIGKILL);
  EXPECT_EQ(query_rows(db, "SELECT exit_reason FROM sessions")[0],
            std::vector<std::string>{"duration"});
}

}  // namespace
}  // namespace ingero::test

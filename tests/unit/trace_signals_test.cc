// The session's exit reason: a stop signal that came after the traced command had exited on
// its own did not end the session ("command exited"). The tracer has another child, NVML's own
// process, which may end at any moment: its exit must not stand in for the command's.
#include "app/trace_signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace ingero::app::trace_detail {
namespace {

// Waits until child `pid` has exited (without reaping it), then a moment for its SIGCHLD's
// handler to have run.
bool wait_exited(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    siginfo_t info{};
    if (waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// In a process of its own (the handlers and their state are the process's): the command exits,
// SIGTERM comes, then another child exits. Exit status 0: the signal is said to have come
// after the command's exit; 1: not; 2: the set-up failed.
int command_then_signal_then_other_child() {
  install_signal_handlers();
  int go[2];
  if (pipe(go) != 0) return 2;
  pid_t cmd = fork();
  if (cmd == 0) {  // held until released, as the tracer holds its command
    char c;
    _exit(read(go[0], &c, 1) == 1 ? 0 : 3);
  }
  note_command_pid(cmd);
  if (write(go[1], "g", 1) != 1 || !wait_exited(cmd)) return 2;
  raise(SIGTERM);
  pid_t other = fork();
  if (other == 0) _exit(0);
  if (!wait_exited(other)) return 2;
  return signal_came_after_child_exit() ? 0 : 1;
}

// The command is still running when the signal comes, after another child exited.
int other_child_then_signal_then_command() {
  install_signal_handlers();
  int go[2];
  if (pipe(go) != 0) return 2;
  pid_t cmd = fork();
  if (cmd == 0) {
    char c;
    _exit(read(go[0], &c, 1) == 1 ? 0 : 3);
  }
  note_command_pid(cmd);
  pid_t other = fork();
  if (other == 0) _exit(0);
  if (!wait_exited(other)) return 2;
  raise(SIGTERM);
  if (write(go[1], "g", 1) != 1 || !wait_exited(cmd)) return 2;
  return signal_came_after_child_exit() ? 0 : 1;
}

int in_own_process(int (*body)()) {
  pid_t p = fork();
  if (p == 0) _exit(body());
  int status = 0;
  waitpid(p, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TraceSignals, AnotherChildsExitAfterTheSignalLeavesTheCommandsExitBeforeIt) {
  EXPECT_EQ(in_own_process(command_then_signal_then_other_child), 0);
}

TEST(TraceSignals, AnotherChildsExitBeforeTheSignalIsNotTheCommands) {
  EXPECT_EQ(in_own_process(other_child_then_signal_then_command), 1);
}

}  // namespace
}  // namespace ingero::app::trace_detail

#include "app/trace_signals.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace ingero::app::trace_detail {

volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_signal_from_tty = 0;
volatile sig_atomic_t g_stop_signals = 0;

namespace {

static_assert(std::atomic<int64_t>::is_always_lock_free, "read and written in signal handlers");
std::atomic<int64_t> g_first_stop_ns{0};  // CLOCK_MONOTONIC of the first stop signal
std::atomic<int64_t> g_child_exit_ns{0};  // of the traced command's exit
std::atomic<pid_t> g_command_pid{0};

int64_t now_ns() {  // async-signal-safe
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A terminal's Ctrl-C reaches the whole foreground process group, the traced command
// included (si_code SI_KERNEL); a `kill` reaches the tracer alone (SI_USER) and is forwarded.
void on_signal(int sig, siginfo_t* info, void*) {
  const int saved = errno;  // the code interrupted may read it next
  if (!g_stop_signal) g_first_stop_ns.store(now_ns());
  g_stop_signal = sig;
  g_stop_signals = g_stop_signals + 1;
  g_signal_from_tty = info && info->si_code == SI_KERNEL;
  errno = saved;
}

// The tracer has other children (NVML's own process, which may end at any moment): only the
// command's exit is noted. SIGCHLDs that come together are delivered as one, naming one child:
// the command's exit is also looked for without reaping it (waitid: POSIX lists wait and
// waitpid as async-signal-safe, not waitid; on Linux it is the same plain system call).
void on_sigchld(int, siginfo_t* info, void*) {
  const int saved = errno;
  const pid_t cmd = g_command_pid.load();
  siginfo_t ended{};
  if (cmd > 0 && g_child_exit_ns.load() == 0 &&
      ((info && info->si_pid == cmd) ||
       (waitid(P_PID, id_t(cmd), &ended, WEXITED | WNOHANG | WNOWAIT) == 0 && ended.si_pid == cmd)))
    g_child_exit_ns.store(now_ns());
  errno = saved;
}

// A write to a pipe whose reader is gone (the command, killed before it was released) fails
// with EPIPE instead of killing the tracer. A handler, not SIG_IGN: the command is exec'd
// with its default disposition, as an ignored signal would be inherited.
void on_sigpipe(int) {}

// Signals whose default action ends a process, other than the faults: each ends the tracer as
// SIGTERM does. Ctrl-\'s SIGQUIT, a user signal or a CPU limit killed it without a word, the
// session unfinished and the command running on, untraced, under init.
constexpr int kStopSignals[] = {SIGINT,  SIGTERM, SIGHUP,    SIGQUIT, SIGUSR1,
                                SIGUSR2, SIGALRM, SIGVTALRM, SIGXCPU, SIGPWR};

}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : kStopSignals) sigaction(sig, &sa, nullptr);
  struct sigaction pipe {};
  pipe.sa_handler = on_sigpipe;
  sigemptyset(&pipe.sa_mask);
  sigaction(SIGPIPE, &pipe, nullptr);
  // A write past a file-size limit (ulimit -f) fails with EFBIG, said and counted as a full
  // disk's is, instead of killing the tracer with SIGXFSZ mid-write.
  sigaction(SIGXFSZ, &pipe, nullptr);
  // SA_RESTART: other calls go on; the wait on the rings (epoll) returns early all the same.
  struct sigaction chld {};
  chld.sa_sigaction = on_sigchld;
  chld.sa_flags = SA_RESTART | SA_NOCLDSTOP | SA_SIGINFO;
  sigemptyset(&chld.sa_mask);
  sigaction(SIGCHLD, &chld, nullptr);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGALRM:
      return "SIGALRM";
    case SIGVTALRM:
      return "SIGVTALRM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGPWR:
      return "SIGPWR";
    default:
      return "SIGTERM";
  }
}

void note_command_pid(pid_t pid) {
  g_child_exit_ns.store(0);
  g_command_pid.store(pid);
}

bool signal_came_after_child_exit() {
  int64_t child = g_child_exit_ns.load();
  return child != 0 && g_first_stop_ns.load() > child;
}

}  // namespace ingero::app::trace_detail

#include "app/traced_command.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "app/commands.h"
#include "capture/inflight_host.h"
#include "hal/secret_env.h"

namespace ingero::app {

namespace {

// A regular file this process may execute (a directory passes access(X_OK)).
bool runnable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The interpreter a script's first line names ("#!/usr/bin/env python3": /usr/bin/env), or ""
// for a file that is not a script.
std::string interpreter(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  if (!std::getline(in, line) || line.rfind("#!", 0) != 0) return "";
  size_t b = line.find_first_not_of(" \t", 2);
  if (b == std::string::npos) return "";
  return line.substr(b, line.find_first_of(" \t\r", b) - b);
}

}  // namespace

std::optional<CannotRun> cannot_run(const std::string& name) {
  if (name.empty()) return CannotRun{127, "an empty command name"};
  bool path = name.find('/') != std::string::npos;
  std::string exe = resolve_program(name);
  if (exe.empty()) {
    struct stat st {};
    if (!path || stat(name.c_str(), &st) != 0)
      return CannotRun{127, path ? "no such file" : "not found in PATH"};
    return CannotRun{126, S_ISDIR(st.st_mode) ? "is a directory" : "not executable"};
  }
  if (std::string interp = interpreter(exe); !interp.empty() && !runnable(interp))
    return CannotRun{126, "bad interpreter " + interp};
  return std::nullopt;
}

namespace {

// Whether the process has exited and waits to be reaped (state Z or X in /proc/PID/stat): it
// answers kill(pid, 0), and nothing of it runs.
bool gone(const std::string& stat_path) {
  std::ifstream in(stat_path);
  std::string line;
  if (!std::getline(in, line)) return false;
  char state = capture::stat_state(line);
  return state == 'Z' || state == 'X';
}

// A main thread that ended with pthread_exit is Z while the process's other threads run on:
// the process has exited only when every thread has (it was refused as exited while its worker
// made calls).
bool has_exited(uint32_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  if (!gone(dir + "/stat")) return false;
  DIR* tasks = opendir((dir + "/task").c_str());
  if (!tasks) return true;
  bool all = true;
  while (dirent* d = readdir(tasks))
    if (d->d_name[0] != '.' && !gone(dir + "/task/" + d->d_name + "/stat")) all = false;
  closedir(tasks);
  return all;
}

// The process `tid` is a thread of, when it is not a process's own id (/proc/TID exists for
// every thread, though it is not listed); 0 when it is, or unknown.
uint32_t owner_of_thread(uint32_t tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Tgid:", 0) == 0) {
      uint32_t tgid = uint32_t(std::strtoul(line.c_str() + 5, nullptr, 10));
      return tgid != tid ? tgid : 0;
    }
  return 0;
}

}  // namespace

int refuse_untraceable(const std::vector<uint32_t>& pids, const std::vector<std::string>& command,
                       std::ostream& err) {
  for (uint32_t pid : pids) {
    if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH) {
      err << "ingero trace: --pid " << pid << ": no such process is running\n";
      return kExitUsage;
    }
    // kill(2) answers for a thread id too: it traced nothing and ran to --duration.
    if (uint32_t owner = owner_of_thread(pid)) {
      err << "ingero trace: --pid " << pid << " is a thread of process " << owner << ": give --pid "
          << owner << " (every thread of a process is traced)\n";
      return kExitUsage;
    }
    if (has_exited(pid)) {
      err << "ingero trace: --pid " << pid
          << ": the process has exited (its parent has not reaped it yet): nothing runs to trace\n";
      return kExitUsage;
    }
  }
  if (!command.empty())
    if (auto no = cannot_run(command[0])) {
      err << "ingero trace: cannot run '" << command[0] << "': " << no->why << "\n";
      return no->status;
    }
  return 0;
}

std::string resolve_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return runnable(name) ? name : "";
  const char* path = getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string cand = (end > start ? p.substr(start, end - start) : ".") + "/" + name;
    if (runnable(cand)) return cand;
    start = end + 1;
  }
  return "";
}

namespace {

std::vector<int>& inherited_fds() {
  static std::vector<int> fds;
  return fds;
}

// The descriptor ranges above stderr the command must not inherit: all but those ingero was
// started with. Made before fork: the child may only make system calls.
std::vector<std::pair<unsigned, unsigned>> fds_to_close() {
  std::vector<std::pair<unsigned, unsigned>> ranges;
  unsigned from = 3;
  for (int fd : inherited_fds()) {
    if (unsigned(fd) > from) ranges.emplace_back(from, unsigned(fd) - 1);
    from = unsigned(fd) + 1;
  }
  ranges.emplace_back(from, ~0u);
  return ranges;
}

}  // namespace

void note_inherited_fds() {
  auto& fds = inherited_fds();
  fds.clear();
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  int own = dirfd(d);
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == 0 && fd > 2 && fd != own) fds.push_back(int(fd));
  }
  closedir(d);
  std::sort(fds.begin(), fds.end());
}

TracedCommand::~TracedCommand() {
  if (go_pipe_ >= 0) close(go_pipe_);  // an unreleased child reads EOF and exits, never run
}

int TracedCommand::start(const std::vector<std::string>& argv, std::optional<int> nice) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  const auto close_ranges = fds_to_close();
  // Made before the fork: the child only reads it.
  std::vector<char*> env = hal::environment_without_secrets();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(fds[1]);
    // The tracer's handlers are reset at exec, but not while the child waits: a terminal's
    // Ctrl-C (or a hang-up) meanwhile ends it as it would end the command.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_DFL);
    char c;
    // Wait until the tracer has attached; EOF means it died: do not run untraced.
    if (read(fds[0], &c, 1) != 1) _exit(126);
    // Not close-on-exec alone: libraries (Asio's sockets) open descriptors without it.
    for (auto [lo, hi] : close_ranges) (void)close_range(lo, hi, 0);
    if (nice) (void)setpriority(PRIO_PROCESS, 0, *nice);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvpe(args[0], args.data(), env.data());
    std::fprintf(stderr, "ingero: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[0]);
  go_pipe_ = fds[1];
  pid_ = pid;
  return 0;
}

void TracedCommand::release() {
  if (go_pipe_ < 0) return;
  if (write(go_pipe_, "g", 1) != 1) std::cerr << "ingero: cannot release the command\n";
  close(go_pipe_);
  go_pipe_ = -1;
}

void TracedCommand::end_unreleased(int sig) {
  if (pid_ <= 0 || done_ || go_pipe_ < 0) return;
  kill(pid_, sig);  // waiting for its release, with the default disposition: it ends
  waitpid(pid_, &status_, 0);
  done_ = true;
  never_ran_ = true;
  close(go_pipe_);
  go_pipe_ = -1;
}

bool TracedCommand::exited() {
  if (pid_ <= 0 || done_) return done_;
  if (waitpid(pid_, &status_, WNOHANG) == pid_) done_ = true;
  return done_;
}

void TracedCommand::signal(int sig) const {
  if (pid_ > 0 && !done_) kill(pid_, sig);
}

void TracedCommand::kill_and_reap() {
  if (pid_ <= 0 || done_) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, &status_, 0);
  done_ = true;
}

int TracedCommand::exit_code(int fallback) const {
  if (pid_ <= 0 || !done_) return fallback;
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return fallback;
}

void TracedCommand::describe_end(std::ostream& out) const {
  // One that never ran was said to be "killed by signal N" after "the command was not run".
  if (pid_ <= 0 || !done_ || never_ran_) return;
  if (WIFEXITED(status_))
    out << "ingero: command exited with status " << WEXITSTATUS(status_) << "\n";
  else if (WIFSIGNALED(status_))
    out << "ingero: command killed by signal " << WTERMSIG(status_) << "\n";
}

}  // namespace ingero::app

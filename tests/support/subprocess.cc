#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ingero::test {

Subprocess Subprocess::spawn(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env) {
  Subprocess p;
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return p;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (const auto& e : env) putenv(strdup(e.c_str()));
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    dprintf(2, "exec %s: %s\n", a[0], strerror(errno));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  p.pid_ = pid;
  p.in_ = in[1];
  p.outfd_ = out[0];
  p.errfd_ = err[0];
  return p;
}

Subprocess::Subprocess(Subprocess&& o) noexcept { *this = std::move(o); }

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  std::swap(pid_, o.pid_);
  std::swap(in_, o.in_);
  std::swap(outfd_, o.outfd_);
  std::swap(errfd_, o.errfd_);
  std::swap(out_, o.out_);
  std::swap(err_, o.err_);
  std::swap(out_pos_, o.out_pos_);
  std::swap(err_pos_, o.err_pos_);
  std::swap(status_, o.status_);
  std::swap(reaped_, o.reaped_);
  return *this;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  for (int fd : {in_, outfd_, errfd_})
    if (fd >= 0) close(fd);
}

void Subprocess::pump(int timeout_ms) {
  pollfd fds[2] = {{outfd_, POLLIN, 0}, {errfd_, POLLIN, 0}};
  if (poll(fds, 2, timeout_ms) <= 0) return;
  char buf[65536];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
    ssize_t n = read(fds[i].fd, buf, sizeof(buf));
    if (n > 0) {
      (i == 0 ? out_ : err_).append(buf, size_t(n));
    } else {
      close(fds[i].fd);
      (i == 0 ? outfd_ : errfd_) = -1;
    }
  }
}

bool Subprocess::wait_line(int which, const std::string& needle, std::chrono::milliseconds timeout,
                           std::string* line) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::string& buf = which == 1 ? out_ : err_;
    size_t& pos = which == 1 ? out_pos_ : err_pos_;
    size_t nl;
    while ((nl = buf.find('\n', pos)) != std::string::npos) {
      std::string l = buf.substr(pos, nl - pos);
      pos = nl + 1;
      if (l.find(needle) != std::string::npos) {
        if (line) *line = l;
        return true;
      }
    }
    if ((which == 1 ? outfd_ : errfd_) < 0) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pump(int(std::min<long>(left.count(), 100)));
  }
}

bool Subprocess::wait_stdout_line(const std::string& n, std::chrono::milliseconds t,
                                  std::string* l) {
  return wait_line(1, n, t, l);
}
bool Subprocess::wait_stderr_line(const std::string& n, std::chrono::milliseconds t,
                                  std::string* l) {
  return wait_line(2, n, t, l);
}

void Subprocess::write_stdin(const std::string& s) {
  if (in_ >= 0 && write(in_, s.data(), s.size()) < 0) {
  }
}

void Subprocess::close_stdin() {
  if (in_ >= 0) close(in_);
  in_ = -1;
}

void Subprocess::signal(int sig) {
  if (pid_ > 0 && !reaped_) kill(pid_, sig);
}

int Subprocess::wait(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!reaped_) {
    pid_t r = waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      break;
    }
    if (std::chrono::steady_clock::now() > until) return -1;
    pump(20);
  }
  while (outfd_ >= 0 || errfd_ >= 0) pump(50);
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
}

int run_command(const std::vector<std::string>& argv, std::string* out, std::string* err,
                const std::vector<std::string>& env, std::chrono::milliseconds timeout) {
  Subprocess p = Subprocess::spawn(argv, env);
  p.close_stdin();
  int rc = p.wait(timeout);
  if (out) *out = p.out();
  if (err) *err = p.err();
  return rc;
}

int run_on_full_tmpfs(const std::string& mnt, const std::string& size, const std::string& setup,
                      int free_kib, const std::string& steps, std::string* out, std::string* err) {
  std::string script = "mount -t tmpfs -o size=" + size + " tmpfs " + mnt + " || exit " +
                       std::to_string(kNoTmpfs) + "; " + setup + "; free=$(df -k --output=avail " +
                       mnt + " | tail -1); head -c $(( (free - " + std::to_string(free_kib) +
                       ") * 1024 )) /dev/zero > " + mnt + "/filler; " + steps;
  return run_command({"unshare", "-rm", "/bin/sh", "-c", script}, out, err);
}

std::vector<pid_t> children_named(pid_t parent, const std::string& comm) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream f(e.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent &&
        line.substr(open + 1, close - open - 1) == comm)
      out.push_back(pid_t(std::atoi(e.path().filename().c_str())));
  }
  return out;
}

bool process_ended(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return true;
  size_t close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
}

void no_core_dumps() {
  rlimit none{0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

}  // namespace ingero::test

#include "probe/link_closer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace ingero::hal {

namespace {

constexpr size_t kCouldNotList = ~size_t(0);

// The process hand_off_perf_events starts, from fork onwards: only async-signal-safe calls (the
// tracer has other threads, whose locks are copied held). It keeps the perf events, closes every
// other file, reports how many it kept on `report`, waits for the end of `release` (the caller
// has closed its own references), and exits: the kernel frees the events as it closes them,
// after the memory, which goes first.
[[noreturn]] void keep_perf_events_and_exit(int report, int release) {
  setsid();  // no terminal: the tracer's Ctrl-C and hang-up are not its
  prctl(PR_SET_NAME, "ingero-detach");
  // The tracer's handlers note a stop and go on: a kill of this process ends it instead (the
  // kernel frees the events at its exit all the same).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  size_t kept = 0;
  int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    // It cannot tell its files apart: it keeps none, and the caller's closes are the last.
    kept = kCouldNotList;
    (void)!write(report, &kept, sizeof kept);
    syscall(SYS_close_range, 0u, ~0u, 0u);
    _exit(1);
  }
  static constexpr char kPerf[] = "anon_inode:[perf_event]";
  alignas(8) char buf[4096];
  for (long n; (n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0;) {
    for (long off = 0; off < n;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
      unsigned short reclen;
      std::memcpy(&reclen, buf + off + 16, sizeof reclen);
      const char* name = buf + off + 19;
      off += reclen;
      int fd = 0;
      bool number = *name != 0;
      for (const char* c = name; *c; ++c) {
        if (*c < '0' || *c > '9') number = false;
        fd = fd * 10 + (*c - '0');
      }
      if (!number || fd == dir || fd == report || fd == release) continue;
      char target[sizeof kPerf];
      ssize_t len = readlinkat(dir, name, target, sizeof target);
      if (len == ssize_t(sizeof kPerf - 1) && std::memcmp(target, kPerf, size_t(len)) == 0) {
        ++kept;
        continue;
      }
      close(fd);  // the write end of `release` among them
    }
  }
  close(dir);
  (void)!write(report, &kept, sizeof kept);
  close(report);
  char c;
  while (read(release, &c, 1) < 0 && errno == EINTR) {
  }
  _exit(0);
}

bool read_all(int fd, void* to, size_t n) {
  auto* p = static_cast<char*>(to);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

// Starts the process; `release` is the write end the caller closes to let it go.
HandOff start_holder(int* release) {
  HandOff h;
  int report[2], rel[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    h.error = std::string("a pipe: ") + std::strerror(errno);
    return h;
  }
  if (pipe2(rel, O_CLOEXEC) != 0) {
    h.error = std::string("a pipe: ") + std::strerror(errno);
    close(report[0]);
    close(report[1]);
    return h;
  }
  // Twice forked, so that the process is init's child, not the caller's: nothing has to reap it.
  pid_t mid = fork();
  if (mid == 0) {
    close(report[0]);
    pid_t pid = fork();
    if (pid == 0) keep_perf_events_and_exit(report[1], rel[0]);
    int err = errno;
    (void)!write(report[1], &pid, sizeof pid);
    if (pid < 0) (void)!write(report[1], &err, sizeof err);
    _exit(0);
  }
  int err = errno;
  close(report[1]);
  close(rel[0]);
  *release = rel[1];
  if (mid < 0) {
    close(report[0]);
    h.error = std::string("fork: ") + std::strerror(err);
    return h;
  }
  pid_t pid = -1;
  size_t kept = 0;
  bool told = read_all(report[0], &pid, sizeof pid);
  if (told && pid < 0 && read_all(report[0], &err, sizeof err))
    h.error = std::string("fork: ") + std::strerror(err);
  else if (told && pid > 0 && read_all(report[0], &kept, sizeof kept)) {
    if (kept == kCouldNotList)
      h.error = "it could not list its files (/proc/self/fd)";
    else if (kept > 0) {
      h.pid = pid;
      h.perf_events = kept;
    }
  } else
    h.error = "it did not start";
  close(report[0]);
  while (waitpid(mid, nullptr, 0) < 0 && errno == EINTR) {
  }
  return h;
}

}  // namespace

HandOff hand_off_perf_events(const std::function<void()>& close_here) {
  int release = -1;
  HandOff h = start_holder(&release);
  close_here();
  if (release >= 0) close(release);
  return h;
}

void close_links(std::vector<Link> links, size_t threads) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < links.size();) links[i] = Link{};
  };
  // The caller closes links too; a thread that cannot be started leaves its share to it.
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(threads, links.size()); ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (auto& t : pool) t.join();
}

LinkCloser::~LinkCloser() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LinkCloser::close(std::vector<Link> links, std::function<void()> then) {
  {
    std::lock_guard lk(mu_);
    bool started = thread_.joinable();
    if (!started) {
      try {
        thread_ = std::thread([this] { run(); });
        started = true;
      } catch (const std::system_error&) {
      }
    }
    if (started) {
      jobs_.push_back({std::move(links), std::move(then)});
      wake_.notify_all();
      return;
    }
  }
  // No thread could be started: the caller waits for the close, as it did before there was one.
  links.clear();
  if (then) then();
}

void LinkCloser::wait() {
  std::unique_lock lk(mu_);
  idle_.wait(lk, [this] { return jobs_.empty() && !working_; });
}

void LinkCloser::run() {
  std::unique_lock lk(mu_);
  while (true) {
    wake_.wait(lk, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left to close
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    working_ = true;
    lk.unlock();
    job.links.clear();
    if (job.then) job.then();
    job = {};
    lk.lock();
    working_ = false;
    idle_.notify_all();
  }
}

}  // namespace ingero::hal

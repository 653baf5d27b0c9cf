#include "hal/sampler_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "hal/device_wire.h"

extern char** environ;

namespace ingero::hal {
namespace {

// A frame: its length (of what follows, 4 bytes, host order: both ends are one binary on one
// host), its type, its payload.
constexpr uint32_t kMaxFrame = 64u << 20;  // 8 GPUs x 4,096 processes is ~1 MiB
enum FrameType : char {
  kOpened = 'O',   // child: the sampler's info
  kRefused = 'R',  // child: why it could not open
  kPoll = 'P',     // parent: wall clock, the GPU processes
  kAnswer = 'A',   // child: its CPU time, the samples, the events
};

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool send_frame(int fd, FrameType type, const std::string& payload) {
  std::string f(5, '\0');
  auto len = uint32_t(payload.size() + 1);
  std::memcpy(f.data(), &len, sizeof(len));
  f[4] = type;
  f += payload;
  return write_all(fd, f.data(), f.size());
}

enum class Read { kOk, kEnd, kTimeout, kBad };

// Reads exactly `n` bytes by `deadline` (CLOCK_MONOTONIC ns; 0: no deadline).
Read read_exact(int fd, char* p, size_t n, int64_t deadline) {
  while (n > 0) {
    int wait_ms = -1;
    if (deadline) {
      int64_t left = deadline - mono_ns();
      if (left <= 0) return Read::kTimeout;
      wait_ms = int((left + 999'999) / 1'000'000);
    }
    pollfd pf{fd, POLLIN, 0};
    int r = ::poll(&pf, 1, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Read::kEnd;
    if (r == 0) continue;  // the deadline is checked above
    ssize_t got = recv(fd, p, n, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return Read::kEnd;
    p += got;
    n -= size_t(got);
  }
  return Read::kOk;
}

Read read_frame(int fd, int64_t deadline, char& type, std::string& payload) {
  uint32_t len = 0;
  if (Read r = read_exact(fd, reinterpret_cast<char*>(&len), sizeof(len), deadline); r != Read::kOk)
    return r;
  if (len < 1 || len > kMaxFrame) return Read::kBad;
  std::string f(len, '\0');
  if (Read r = read_exact(fd, f.data(), len, deadline); r != Read::kOk)
    return r == Read::kEnd ? Read::kBad : r;  // cut mid-frame: it died writing
  type = f[0];
  payload.assign(f, 1);
  return Read::kOk;
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Waits up to `ms` for the child: its pid once reaped, 0 while it runs, -1 if it is not ours.
pid_t wait_for(pid_t pid, int ms, int& status) {
  for (int waited = 0;; waited += 10) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r != 0 || waited >= ms) return r;
    timespec ts{0, 10'000'000};
    nanosleep(&ts, nullptr);
  }
}

// How the child ended: waits up to `wait_ms` for it, then kills it and waits a second more.
// "crashed (SIGSEGV)", "exited with status 3", "was killed"; `sig` the signal that ended it.
std::string reap(pid_t pid, int wait_ms, int* sig = nullptr) {
  int status = 0;
  pid_t r = wait_for(pid, wait_ms, status);
  bool killed = false;
  if (r == 0) {
    kill(pid, SIGKILL);
    killed = true;
    r = wait_for(pid, 1000, status);
  }
  if (r == 0) return "did not end when killed (stuck inside the driver)";
  if (r < 0) return "ended";
  if (killed) return "was killed";
  if (WIFSIGNALED(status)) {
    if (sig) *sig = WTERMSIG(status);
    return "crashed (" + signal_text(WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

std::string seconds(int64_t ns) {
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + " s";
  return std::to_string(ns / 1'000'000) + " ms";
}

class ProcessSampler final : public DeviceSampler {
 public:
  ProcessSampler(SamplerProcessOptions opts, pid_t pid, int fd, DeviceSamplerInfo info)
      : opts_(std::move(opts)), pid_(pid), fd_(fd), info_(std::move(info)) {}
  ~ProcessSampler() override {
    if (fd_ >= 0) close(fd_);  // the child reads the end, shuts its library down and exits
    if (pid_ > 0) reap(pid_, 1000);
  }
  ProcessSampler(const ProcessSampler&) = delete;
  ProcessSampler& operator=(const ProcessSampler&) = delete;

  const DeviceSamplerInfo& info() const override { return info_; }

  std::vector<DeviceSample> poll(int64_t wall_ns, const std::vector<uint32_t>& gpu_pids) override {
    if (fd_ < 0) return {};
    std::string req;
    device_wire::put_int(req, wall_ns);
    device_wire::put_pids(req, gpu_pids);
    if (!send_frame(fd_, kPoll, req)) {
      lose(wall_ns, Read::kEnd);
      return {};
    }
    char type = 0;
    std::string answer;
    Read r = read_frame(fd_, mono_ns() + opts_.poll_limit_ns, type, answer);
    std::vector<DeviceSample> samples;
    std::vector<DeviceEvent> events;
    std::string_view in = answer;
    int64_t cpu = 0;
    if (r == Read::kOk && (type != kAnswer || !device_wire::get_int(in, cpu) ||
                           !device_wire::get_samples(in, samples) ||
                           !device_wire::get_events(in, events) || !in.empty()))
      r = Read::kBad;
    if (r != Read::kOk) {
      lose(wall_ns, r);
      return {};
    }
    cpu_ns_.store(cpu, std::memory_order_relaxed);
    for (auto& e : events) events_.push_back(std::move(e));
    return samples;
  }

  std::vector<DeviceEvent> take_events() override { return std::exchange(events_, {}); }

  int64_t cpu_ns() const { return cpu_ns_.load(std::memory_order_relaxed); }

 private:
  // The child is gone or no longer to be trusted: it is ended, and one event says why.
  void lose(int64_t wall_ns, Read how) {
    close(fd_);
    fd_ = -1;
    int sig = 0;
    std::string end;
    std::string why;
    if (how == Read::kTimeout) {
      kill(pid_, SIGKILL);
      end = reap(pid_, 1000);
      why = opts_.library + " did not answer a poll within " + seconds(opts_.poll_limit_ns) +
            " (a GPU or driver that no longer answers); its sampler process was stopped";
    } else if (how == Read::kBad) {
      kill(pid_, SIGKILL);
      end = reap(pid_, 1000);
      why = opts_.library + "'s sampler process sent a malformed answer; it was stopped";
    } else {
      end = reap(pid_, 1000, &sig);
      why = opts_.library + (sig ? " " + end + " during a poll" : "'s sampler process " + end);
    }
    pid_ = -1;
    why += ": no device figures from here on (it ran in a process of its own: the trace goes on)";
    DeviceEvent e;
    e.ts_ns = wall_ns;
    e.source = opts_.source;
    e.kind = kSamplerLost;
    e.code = sig;
    e.detail = why;
    events_.push_back(std::move(e));
  }

  SamplerProcessOptions opts_;
  pid_t pid_;
  int fd_;
  DeviceSamplerInfo info_;
  std::vector<DeviceEvent> events_;
  std::atomic<int64_t> cpu_ns_{0};  // read by other threads
};

// Starts the child with `child_end` as its fd 3, stdin and stdout /dev/null, stderr shared, in
// a process group of its own (a terminal's Ctrl-C is for the tracer to handle, not the child),
// every signal at its default.
Result<pid_t> spawn(const std::vector<std::string>& argv, int child_end) {
  if (argv.empty()) return make_error("no sampler program to run");
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_adddup2(&fa, child_end, 3);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 4);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setflags(&at,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &fa, &at, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (rc != 0)
    return make_error("cannot start the sampler process " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

Result<std::unique_ptr<DeviceSampler>> open_sampler_process(const SamplerProcessOptions& opts) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return make_error(std::string("socketpair: ") + std::strerror(errno));
  // The child's end must not already be fd 3 (a dup2 onto itself would keep its close-on-exec).
  int child_end = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
  close(sv[1]);
  if (child_end < 0) {
    close(sv[0]);
    return make_error(std::string("fcntl: ") + std::strerror(errno));
  }
  auto pid = spawn(opts.argv, child_end);
  close(child_end);
  if (!pid) {
    close(sv[0]);
    return pid.error();
  }
  int fd = sv[0];
  char type = 0;
  std::string payload;
  Read r = read_frame(fd, mono_ns() + opts.open_limit_ns, type, payload);
  DeviceSamplerInfo info;
  std::string_view in = payload;
  if (r == Read::kOk && type == kRefused) {
    close(fd);
    reap(*pid, 1000);
    return make_error(payload);
  }
  if (r == Read::kOk && (type != kOpened || !device_wire::get_info(in, info) || !in.empty()))
    r = Read::kBad;
  if (r != Read::kOk) {
    close(fd);
    if (r != Read::kEnd) kill(*pid, SIGKILL);
    int sig = 0;
    std::string end = reap(*pid, 1000, &sig);
    std::string why =
        r == Read::kTimeout ? opts.library + " did not open within " + seconds(opts.open_limit_ns) +
                                  "; its sampler process was stopped"
        : r == Read::kBad ? opts.library + "'s sampler process sent a malformed answer"
        : sig ? opts.library + " crashed inside " + opts.open_call + " (" + signal_text(sig) +
                    "; a broken driver library)"
              : opts.library + "'s sampler process " + end + " before it answered";
    return make_error(why + "; it ran in a process of its own: nothing else is affected");
  }
  return std::unique_ptr<DeviceSampler>(
      std::make_unique<ProcessSampler>(opts, *pid, fd, std::move(info)));
}

int64_t sampler_process_cpu_ns(const DeviceSampler& s) {
  const auto* p = dynamic_cast<const ProcessSampler*>(&s);
  return p ? p->cpu_ns() : 0;
}

int serve_sampler(int fd, const std::function<Result<std::unique_ptr<DeviceSampler>>()>& open) {
  signal(SIGPIPE, SIG_IGN);  // a parent gone mid-answer is a failed send
  auto s = open();
  if (!s) return send_frame(fd, kRefused, s.error().message) ? 0 : 1;
  if (!*s) return send_frame(fd, kRefused, "no device sampler on this host") ? 0 : 1;
  std::string out;
  device_wire::put_info(out, (*s)->info());
  if (!send_frame(fd, kOpened, out)) return 1;
  while (true) {
    char type = 0;
    std::string req;
    Read r = read_frame(fd, 0, type, req);
    if (r == Read::kEnd) return 0;  // the parent closed: done
    std::string_view in = req;
    int64_t wall = 0;
    std::vector<uint32_t> pids;
    if (r != Read::kOk || type != kPoll || !device_wire::get_int(in, wall) ||
        !device_wire::get_pids(in, pids) || !in.empty())
      return 2;
    auto samples = (*s)->poll(wall, pids);
    auto events = (*s)->take_events();
    timespec cpu{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    out.clear();
    device_wire::put_int(out, int64_t(cpu.tv_sec) * 1'000'000'000 + cpu.tv_nsec);
    device_wire::put_samples(out, samples);
    device_wire::put_events(out, events);
    if (!send_frame(fd, kAnswer, out)) return 0;
  }
}

}  // namespace ingero::hal

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

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "hal/clock.h"
#include "hal/device_wire.h"
#include "hal/secret_env.h"

namespace ingero::hal {
namespace {

// A frame: its length (of what follows, 4 bytes, host order: both ends are one binary on one
// host), its type, its payload.
constexpr uint32_t kMaxFrame = 64u << 20;  // 8 GPUs x 4,096 processes is ~1 MiB
enum FrameType : char {
  kOpened = 'O',   // child: the sampler's info
  kRefused = 'R',  // child: why it could not open
  kPoll = 'P',     // parent: poll now: the wall clock, the GPU processes
  kStart = 'S',    // parent: poll on your own from now: the clock's offset, the period
  kReply = 'B',    // child: the answer to a poll: its CPU time, the samples, the events
  kPushed = 'A',   // child: the same, from a poll of its own
};

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

// Frames from a socket, whole: bytes that arrive in pieces wait in `inbox` for the rest.
class FrameReader {
 public:
  explicit FrameReader(int fd) : fd_(fd) {}
  // The next frame, waiting until `deadline` (CLOCK_MONOTONIC ns; < 0: as long as it takes; in
  // the past: not at all). kEnd: the socket closed; kBad: a frame that cannot be one, or one
  // cut short by the end.
  Read next(int64_t deadline, char& type, std::string& payload) {
    while (true) {
      if (inbox_.size() >= sizeof(uint32_t)) {
        uint32_t len = 0;
        std::memcpy(&len, inbox_.data(), sizeof(len));
        if (len < 1 || len > kMaxFrame) return Read::kBad;
        if (inbox_.size() >= sizeof(len) + len) {
          type = inbox_[sizeof(len)];
          payload.assign(inbox_, sizeof(len) + 1, len - 1);
          inbox_.erase(0, sizeof(len) + len);
          return Read::kOk;
        }
      }
      Read r = fill(deadline);
      if (r == Read::kEnd && !inbox_.empty()) return Read::kBad;  // it died writing
      if (r != Read::kOk) return r;
    }
  }

 private:
  // Reads what the socket holds, waiting for at least a byte until `deadline`.
  Read fill(int64_t deadline) {
    while (true) {
      int wait_ms = -1;
      if (deadline >= 0) {
        int64_t left = deadline - mono_now_ns();
        wait_ms = left <= 0 ? 0 : int((left + 999'999) / 1'000'000);
      }
      pollfd pf{fd_, POLLIN, 0};
      int r = ::poll(&pf, 1, wait_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Read::kEnd;
      if (r == 0) {
        if (wait_ms == 0) return Read::kTimeout;
        continue;  // woken early: the deadline is checked again
      }
      char buf[65536];
      ssize_t got = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return Read::kEnd;
      inbox_.append(buf, size_t(got));
      return Read::kOk;
    }
  }

  int fd_;
  std::string inbox_;
};

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

constexpr const char* kStuck = "did not end when killed (stuck inside the driver)";

// How the child ended: waits up to `wait_ms` for it, then kills it and waits `kill_ms` more.
// "crashed (SIGSEGV)", "exited with status 3", "was killed", or kStuck (not reaped: a process
// in an uninterruptible driver call ignores even SIGKILL); `sig` the signal that ended it.
std::string reap(pid_t pid, int wait_ms, int* sig = nullptr, int kill_ms = 1000) {
  int status = 0;
  pid_t r = wait_for(pid, wait_ms, status);
  bool killed = false;
  if (r == 0) {
    kill(pid, SIGKILL);
    killed = true;
    r = wait_for(pid, kill_ms, status);
  }
  if (r == 0) return kStuck;
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

class ProcessSampler final : public SelfPacedSampler {
 public:
  ProcessSampler(SamplerProcessOptions opts, pid_t pid, FrameReader reader, int fd,
                 DeviceSamplerInfo info)
      : opts_(std::move(opts)),
        pid_(pid),
        fd_(fd),
        reader_(std::move(reader)),
        info_(std::move(info)) {}
  ~ProcessSampler() override {
    // The child reads the end, shuts its library down and exits; one stuck in the driver is
    // killed, and left to whoever reaps after this process if even that does not end it.
    if (fd_ >= 0) {
      close(fd_);
      if (pid_ > 0) reap(pid_, 1000, nullptr, 200);
    } else if (pid_ > 0) {
      reap(pid_, 0, nullptr, 0);  // lost and killed before: reaped if it has ended since
    }
  }
  ProcessSampler(const ProcessSampler&) = delete;
  ProcessSampler& operator=(const ProcessSampler&) = delete;

  const DeviceSamplerInfo& info() const override { return info_; }

  // Asks now and waits for the answer; what the child sent unasked before it comes first.
  std::vector<DeviceSample> poll(int64_t wall_ns, const std::vector<uint32_t>& gpu_pids) override {
    std::vector<DeviceSample> out;
    if (fd_ < 0) return out;
    std::string req;
    device_wire::put_int(req, wall_ns);
    device_wire::put_pids(req, gpu_pids);
    if (!send_frame(fd_, kPoll, req)) {
      lose(wall_ns, Read::kEnd);
      return out;
    }
    int64_t deadline = mono_now_ns() + opts_.poll_limit_ns;
    while (true) {
      char type = 0;
      std::string answer;
      Read r = reader_.next(deadline, type, answer);
      if (r == Read::kOk && !absorb(type, answer, out)) r = Read::kBad;
      if (r != Read::kOk) {
        lose(wall_ns, r);
        return out;
      }
      if (type == kReply) return out;
    }
  }

  std::vector<DeviceEvent> take_events() override { return std::exchange(events_, {}); }

  void start(TraceClock clock) override {
    clock_ = clock;
    if (fd_ < 0) return;
    std::string req;
    device_wire::put_int(req, clock.mono_to_wall_ns);
    device_wire::put_int(req, opts_.poll_ns);
    started_ = true;
    last_heard_ = mono_now_ns();
    if (!send_frame(fd_, kStart, req)) lose(clock_.now(), Read::kEnd);
  }

  void collect(std::vector<DeviceSample>& out) override {
    bool got = false;
    while (fd_ >= 0) {
      char type = 0;
      std::string answer;
      Read r = reader_.next(0, type, answer);  // no wait
      if (r == Read::kTimeout) break;
      if (r == Read::kOk && (type != kPushed || !absorb(type, answer, out))) r = Read::kBad;
      if (r != Read::kOk) return lose(clock_.now(), r);
      got = true;
    }
    // Silent too long: judged by when it last polled, and only when nothing came now (a child
    // whose answers waited for a late reader was blocked by it, not hung).
    if (fd_ >= 0 && started_ && !got &&
        mono_now_ns() - last_heard_ > opts_.poll_ns + opts_.poll_limit_ns)
      lose(clock_.now(), Read::kTimeout, /*asked=*/false);
    if (fd_ < 0 && pid_ > 0) {  // lost, killed, not yet reaped: without waiting
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) != 0) pid_ = -1;
    }
  }

  uint64_t answers() const override { return answers_.load(std::memory_order_relaxed); }
  int64_t cpu_ns() const override { return cpu_ns_.load(std::memory_order_relaxed); }

 private:
  // An answer's samples into `out`, its events into events_; false where it does not parse.
  bool absorb(char type, const std::string& answer, std::vector<DeviceSample>& out) {
    if (type != kReply && type != kPushed) return false;
    std::string_view in = answer;
    int64_t cpu = 0, polled_at = 0;
    std::vector<DeviceSample> samples;
    std::vector<DeviceEvent> events;
    if (!device_wire::get_int(in, cpu) || !device_wire::get_int(in, polled_at) ||
        !device_wire::get_samples(in, samples) || !device_wire::get_events(in, events) ||
        !in.empty())
      return false;
    cpu_ns_.store(cpu, std::memory_order_relaxed);
    answers_.fetch_add(1, std::memory_order_relaxed);
    // When the child polled, not when this side read it: read late, an answer is not news.
    last_heard_ = std::max(last_heard_, polled_at);
    for (auto& x : samples) out.push_back(std::move(x));
    for (auto& e : events) events_.push_back(std::move(e));
    return true;
  }

  // The child is gone or no longer to be trusted: it is ended, and one event says why. Called
  // on the caller's thread (the tracer's event loop): it waits at most 1.2 s for the child.
  // `asked`: a poll went unanswered (else: it sent nothing, unasked, for too long).
  void lose(int64_t wall_ns, Read how, bool asked = true) {
    close(fd_);
    fd_ = -1;
    int sig = 0;
    std::string why;
    if (how == Read::kTimeout || how == Read::kBad) {
      kill(pid_, SIGKILL);
      std::string end = reap(pid_, 200, nullptr, 0);
      why = opts_.library +
            (how == Read::kBad ? "'s sampler process sent a malformed answer"
             : asked           ? " did not answer a poll within " + seconds(opts_.poll_limit_ns) +
                           " (a GPU or driver that no longer answers)"
                     : " sent no figures for " + seconds(opts_.poll_ns + opts_.poll_limit_ns) +
                           " (a GPU or driver that no longer answers)") +
            "; its sampler process was stopped" + (end == kStuck ? std::string(" but ") + end : "");
      if (end != kStuck) pid_ = -1;
    } else {
      // It closed its end: it is exiting (a crash may first write a core dump).
      std::string end = reap(pid_, 1000, &sig, 200);
      why = opts_.library + (sig ? " " + end + " during a poll" : "'s sampler process " + end);
      if (end != kStuck) pid_ = -1;
    }
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
  FrameReader reader_;
  DeviceSamplerInfo info_;
  TraceClock clock_;
  bool started_ = false;
  int64_t last_heard_ = 0;  // CLOCK_MONOTONIC of the child's last poll (or the start)
  std::vector<DeviceEvent> events_;
  std::atomic<uint64_t> answers_{0};
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
  std::vector<char*> env = environment_without_secrets();
  int rc = posix_spawn(&pid, args[0], &fa, &at, args.data(), env.data());
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
  FrameReader reader(fd);
  char type = 0;
  std::string payload;
  Read r = reader.next(mono_now_ns() + opts.open_limit_ns, type, payload);
  DeviceSamplerInfo info;
  std::string_view in = payload;
  if (r == Read::kOk && type == kRefused) {
    close(fd);
    reap(*pid, 1000, nullptr, 200);
    return make_error(payload);
  }
  if (r == Read::kOk && (type != kOpened || !device_wire::get_info(in, info) || !in.empty()))
    r = Read::kBad;
  if (r != Read::kOk) {
    close(fd);
    if (r != Read::kEnd) kill(*pid, SIGKILL);
    int sig = 0;
    std::string end = reap(*pid, 1000, &sig, 200);
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
      std::make_unique<ProcessSampler>(opts, *pid, std::move(reader), fd, std::move(info)));
}

int serve_sampler(int fd, const std::function<Result<std::unique_ptr<DeviceSampler>>()>& open) {
  signal(SIGPIPE, SIG_IGN);  // a parent gone mid-answer is a failed send
  auto s = open();
  if (!s) return send_frame(fd, kRefused, s.error().message) ? 0 : 1;
  if (!*s) return send_frame(fd, kRefused, "no device sampler on this host") ? 0 : 1;
  std::string out;
  device_wire::put_info(out, (*s)->info());
  if (!send_frame(fd, kOpened, out)) return 1;
  auto answer = [&](FrameType type, int64_t wall, const std::vector<uint32_t>& pids) {
    int64_t polled_at = mono_now_ns();
    auto samples = (*s)->poll(wall, pids);
    auto events = (*s)->take_events();
    timespec cpu{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    out.clear();
    device_wire::put_int(out, int64_t(cpu.tv_sec) * 1'000'000'000 + cpu.tv_nsec);
    device_wire::put_int(out, polled_at);  // CLOCK_MONOTONIC, which both sides share
    device_wire::put_samples(out, samples);
    device_wire::put_events(out, events);
    return send_frame(fd, type, out);
  };
  FrameReader reader(fd);
  TraceClock clock;
  int64_t period = 0, due = -1;  // once started: CLOCK_MONOTONIC of the next poll of its own
  while (true) {
    char type = 0;
    std::string req;
    Read r = reader.next(due, type, req);
    if (r == Read::kEnd) return 0;  // the parent closed: done
    if (r == Read::kTimeout) {
      if (!answer(kPushed, clock.now(), {})) return 0;
      // The next one period after this one was due; one that ran long is not caught up.
      due = std::max(due + period, mono_now_ns());
      continue;
    }
    std::string_view in = req;
    int64_t wall = 0;
    std::vector<uint32_t> pids;
    if (r == Read::kOk && type == kPoll && device_wire::get_int(in, wall) &&
        device_wire::get_pids(in, pids) && in.empty()) {
      if (!answer(kReply, wall, pids)) return 0;
    } else if (r == Read::kOk && type == kStart &&
               device_wire::get_int(in, clock.mono_to_wall_ns) &&
               device_wire::get_int(in, period) && in.empty() && period > 0) {
      due = mono_now_ns();
    } else {
      return 2;
    }
  }
}

}  // namespace ingero::hal

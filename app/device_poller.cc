#include "app/device_poller.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "hal/sampler_process.h"

namespace ingero::app {
namespace {

int64_t thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

DevicePoller::DevicePoller(const std::vector<const hal::VendorBackend*>& backends,
                           const hal::DeviceSamplerOptions& opts, capture::TraceClock clock)
    : poll_ns_(opts.poll_ns), clock_(clock), stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  for (const hal::VendorBackend* b : backends) {
    auto s = b->open_device_sampler(opts);
    if (!s)
      notes_.push_back(std::string(b->name()) + ": " + s.error().message);
    else if (*s)
      samplers_.push_back(std::move(*s));
  }
  for (const auto& s : samplers_) {
    if (auto* p = dynamic_cast<hal::SelfPacedSampler*>(s.get()))
      self_paced_.push_back(p);
    else
      polled_.push_back(s.get());
  }
}

DevicePoller::~DevicePoller() {
  stop();
  if (stop_fd_ >= 0) close(stop_fd_);
}

void DevicePoller::stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) != sizeof(one)) {
    // An eventfd write fails only at its counter's limit: the thread is being woken anyway.
  }
  thread_.join();
}

std::vector<const hal::DeviceSamplerInfo*> DevicePoller::infos() const {
  std::vector<const hal::DeviceSamplerInfo*> out;
  for (const auto& s : samplers_) out.push_back(&s->info());
  return out;
}

int64_t DevicePoller::process_cpu_ns() const {
  int64_t sum = 0;
  for (const hal::SelfPacedSampler* s : self_paced_) sum += s->cpu_ns();
  return sum;
}

void DevicePoller::set_gpu_pids(std::vector<uint32_t> pids) {
  std::lock_guard<std::mutex> g(mu_);
  gpu_pids_ = std::move(pids);
}

uint64_t DevicePoller::polls() const {
  if (polled_.empty() && !self_paced_.empty()) return self_paced_.front()->answers();
  return polls_.load();
}

void DevicePoller::poll_once(int64_t now) { poll(now, /*every=*/true); }

void DevicePoller::poll(int64_t now, bool every) {
  std::vector<uint32_t> pids;
  {
    std::lock_guard<std::mutex> g(mu_);
    pids = gpu_pids_;
  }
  std::vector<hal::DeviceSample> got;
  std::vector<hal::DeviceEvent> events;
  auto ask = [&](hal::DeviceSampler& s) {
    auto v = s.poll(now, pids);
    got.insert(got.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
    auto e = s.take_events();
    events.insert(events.end(), std::make_move_iterator(e.begin()),
                  std::make_move_iterator(e.end()));
  };
  if (every)
    for (const auto& s : samplers_) ask(*s);
  else
    for (hal::DeviceSampler* s : polled_) ask(*s);
  ++polls_;
  keep(got, events);
}

void DevicePoller::keep(std::vector<hal::DeviceSample>& got,
                        std::vector<hal::DeviceEvent>& events) {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& x : got) {
    if (pending_.samples.size() >= kMaxPending) {
      ++pending_.dropped;
      continue;
    }
    pending_.samples.push_back(std::move(x));
  }
  for (auto& e : events)
    if (pending_.events.size() < kMaxPending) pending_.events.push_back(std::move(e));
}

void DevicePoller::start() {
  // Those that poll on their own (NVML's process) from now on, no thread of ours waking for
  // them: take() collects what they sent.
  for (hal::SelfPacedSampler* s : self_paced_) s->start(clock_);
  if (polled_.empty() || thread_.joinable() || stop_fd_ < 0) return;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "ingero-gpu-poll");  // as top and perf name it
    run();
  });
}

void DevicePoller::run() {
  int64_t due = capture::mono_now_ns();
  while (true) {
    poll(clock_.now(), /*every=*/false);
    cpu_ns_ = thread_cpu();
    // The next poll one period after this one was due; a poll that ran long is not followed by
    // a burst of catch-up polls.
    due += poll_ns_;
    int64_t wait = due - capture::mono_now_ns();
    if (wait < 0) {
      due -= wait;
      wait = 0;
    }
    pollfd p{stop_fd_, POLLIN, 0};
    timespec ts{time_t(wait / 1'000'000'000), long(wait % 1'000'000'000)};
    int r = ppoll(&p, 1, &ts, nullptr);
    if (r > 0 || (r < 0 && errno != EINTR)) return;  // stopped (or the fd is unusable)
  }
}

DevicePoller::Batch DevicePoller::take() {
  std::vector<hal::DeviceSample> got;
  std::vector<hal::DeviceEvent> events;
  for (hal::SelfPacedSampler* s : self_paced_) {
    s->collect(got);
    auto e = s->take_events();
    events.insert(events.end(), std::make_move_iterator(e.begin()),
                  std::make_move_iterator(e.end()));
  }
  keep(got, events);
  std::lock_guard<std::mutex> g(mu_);
  return std::exchange(pending_, {});
}

ProcessLabels labels_from_cgroup(const std::string& path) {
  ProcessLabels l;
  // Container: the last path element naming one.
  static const char* const kScopes[] = {"docker-", "cri-containerd-", "crio-", "libpod-"};
  size_t last = path.rfind('/');
  std::string leaf = last == std::string::npos ? path : path.substr(last + 1);
  for (const char* p : kScopes)
    if (leaf.rfind(p, 0) == 0 && leaf.size() > 6 && leaf.ends_with(".scope")) {
      l.container_id = leaf.substr(strlen(p), leaf.size() - strlen(p) - 6);
      break;
    }
  if (l.container_id.empty() && (path.find("/docker/") != std::string::npos ||
                                 path.find("/kubepods/") != std::string::npos)) {
    bool hex = leaf.size() >= 32 && leaf.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (hex) l.container_id = leaf;
  }
  if (l.container_id.size() > 12) l.container_id.resize(12);
  // Pod: "pod<uid>" in a systemd slice (dashes for the UID's dashes... underscores) or a
  // cgroupfs directory.
  size_t at = path.find("pod");
  while (at != std::string::npos) {
    bool boundary = at == 0 || path[at - 1] == '/' || path[at - 1] == '-';
    size_t end = path.find_first_of("/.", at);
    std::string uid =
        path.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
    if (boundary && uid.size() >= 32 && path.find("kubepods") != std::string::npos) {
      for (auto& c : uid)
        if (c == '_') c = '-';
      l.pod_uid = uid;
      break;
    }
    at = path.find("pod", at + 3);
  }
  return l;
}

const ProcessLabels& ProcessLabeller::of(uint32_t pid) {
  auto it = cache_.find(pid);
  if (it != cache_.end()) return it->second;
  ProcessLabels l;
  std::string dir = root_ + "/" + std::to_string(pid);
  std::ifstream comm(dir + "/comm");
  std::getline(comm, l.comm);
  std::ifstream cg(dir + "/cgroup");
  for (std::string line; std::getline(cg, line);)
    if (line.rfind("0::", 0) == 0) {  // the unified hierarchy
      ProcessLabels c = labels_from_cgroup(line.substr(3));
      l.container_id = c.container_id;
      l.pod_uid = c.pod_uid;
    }
  return cache_[pid] = std::move(l);
}

void ProcessLabeller::forget_except(const std::vector<uint32_t>& live) {
  std::set<uint32_t> keep(live.begin(), live.end());
  std::erase_if(cache_, [&](const auto& e) { return !keep.count(e.first); });
}

Status record_device_batch(const DevicePoller::Batch& b, hal::EventSink& sinks) {
  auto samples = sinks.on_device_samples(b.samples);
  auto events = sinks.on_device_events(b.events);
  return samples ? events : samples;
}

}  // namespace ingero::app

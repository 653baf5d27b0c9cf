// The tracer's device side channel: every backend's device sampler (hal/device_sampler.h:
// NVML, amdgpu sysfs) polled on a thread of its own every --device-poll-ms, so a slow driver
// call never delays the ring buffers. The event loop takes what was read (take()) and writes
// it to the tracer's sinks (record_device_batch()). A sampler that polls on its own
// (hal::SelfPacedSampler: NVML in its own process) is started instead, and take() collects what
// it sent: no thread here wakes for it, and none is started when every sampler is such.
//
// A backend whose devices are absent (no libnvidia-ml, nvmlInit refused, no amdgpu card) opens
// no sampler and costs nothing after the attempt (for NVML a short-lived process of its own,
// ~20-30 ms of its CPU): the reason is one line of notes().
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capture/host_info.h"
#include "hal/backend.h"
#include "hal/device_sampler.h"
#include "hal/event_sink.h"
#include "hal/sampler_process.h"
#include "serve/metrics/metrics.h"

namespace ingero::app {

class DevicePoller {
 public:
  // Opens the samplers of `backends` that have devices on this host. The thread's polls are
  // stamped on `clock` (the session's).
  DevicePoller(const std::vector<const hal::VendorBackend*>& backends,
               const hal::DeviceSamplerOptions& opts,
               capture::TraceClock clock = {capture::mono_to_wall_offset_ns()});
  ~DevicePoller();  // stops the thread
  DevicePoller(const DevicePoller&) = delete;
  DevicePoller& operator=(const DevicePoller&) = delete;

  bool active() const { return !samplers_.empty(); }
  // "nvml: libnvidia-ml.so.1 not found (...)": why a backend has no sampler.
  const std::vector<std::string>& notes() const { return notes_; }
  std::vector<const hal::DeviceSamplerInfo*> infos() const;

  // Polls every sampler now, then every poll period on the thread, until stop() or destroyed;
  // starts those that poll on their own.
  void start();
  // Stops the thread (what it read stays for take()); poll_once() may follow.
  void stop();
  // The processes that make GPU calls (amdgpu reads their fdinfo), from the event loop.
  void set_gpu_pids(std::vector<uint32_t> pids);
  // One poll of every sampler on the calling thread (tests, the bench, the last one after
  // stop(); never while the thread runs).
  void poll_once(int64_t wall_ns);

  struct Batch {
    std::vector<hal::DeviceSample> samples;
    std::vector<hal::DeviceEvent> events;
    uint64_t dropped = 0;  // samples not kept since the last take: the event loop fell behind
  };
  // What was read since the last take(), with what the self-paced samplers sent; from one
  // thread (the event loop).
  Batch take();
  // Polls made (the thread's, and poll_once()'s); with only self-paced samplers, the answers
  // the first sent.
  uint64_t polls() const;
  int64_t thread_cpu_ns() const { return cpu_ns_.load(); }  // the poll thread's CPU time
  // The CPU time of the samplers' own processes (NVML's: hal/sampler_process.h), as of their
  // last polls.
  int64_t process_cpu_ns() const;

  // At most this many samples wait for the event loop (about 10 minutes of 8 GPUs at 10 Hz).
  static constexpr size_t kMaxPending = 50'000;

 private:
  void run();
  // Polls every sampler (`every`), or those the thread polls.
  void poll(int64_t now, bool every);
  void keep(std::vector<hal::DeviceSample>& got, std::vector<hal::DeviceEvent>& events);
  std::vector<std::unique_ptr<hal::DeviceSampler>> samplers_;
  std::vector<hal::DeviceSampler*> polled_;         // by the thread
  std::vector<hal::SelfPacedSampler*> self_paced_;  // polling on their own, once started
  std::vector<std::string> notes_;
  int64_t poll_ns_;
  capture::TraceClock clock_;
  std::mutex mu_;
  // The thread sleeps in ppoll() on this eventfd until its next poll; stop() writes it. (A wake
  // from ppoll costs the thread about half what a condition variable's timed wait did here.)
  int stop_fd_ = -1;
  std::vector<uint32_t> gpu_pids_;
  Batch pending_;
  std::atomic<uint64_t> polls_{0};
  std::atomic<int64_t> cpu_ns_{0};
  std::thread thread_;
};

// Labels of a process for the per-process device series: its comm and, from its cgroup, the
// container id and pod UID where the path names them (empty otherwise). Read once per pid.
using ProcessLabels = serve::Metrics::ProcessLabels;
class ProcessLabeller {
 public:
  explicit ProcessLabeller(std::string procfs_root = "/proc") : root_(std::move(procfs_root)) {}
  const ProcessLabels& of(uint32_t pid);
  void forget_except(const std::vector<uint32_t>& live);
  size_t size() const { return cache_.size(); }

 private:
  std::string root_;
  std::map<uint32_t, ProcessLabels> cache_;
};
// The container id and pod UID in a cgroup path (docker-<id>.scope, cri-containerd-<id>.scope,
// crio-<id>.scope, libpod-<id>.scope, /docker/<id>; kubepods...-pod<uid>.slice or
// /kubepods/.../pod<uid>/): the container id cut to 12 characters, "" where absent.
ProcessLabels labels_from_cgroup(const std::string& cgroup_path);

// Hands a batch to the sinks (the SinkSet: the trace file, the registry, ...), samples then
// events. Returns a sink's error, if any (the batch is then lost, and counted by the caller).
Status record_device_batch(const DevicePoller::Batch& batch, hal::EventSink& sinks);

}  // namespace ingero::app

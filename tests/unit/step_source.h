// An in-memory TraceSource for step-model tests: GPU calls and scheduler intervals of one
// process (pid 1, "trainer"), and a training loop to fill it with.
#pragma once

#include <algorithm>
#include <map>
#include <vector>

#include "engine/analysis.h"

namespace ingero::engine::step_source {

using hal::Event;
using hal::EventKind;
using hal::Field;

constexpr uint64_t kUs = 1'000, kMs = 1'000'000;

class Source : public TraceSource {
 public:
  void calls(const Window&, const EventFn& fn) override {
    std::stable_sort(calls_.begin(), calls_.end(),
                     [](const Event& x, const Event& y) { return x.ts_ns < y.ts_ns; });
    for (const auto& e : calls_) fn(e);
  }
  void host_events(const Window&, const EventFn& fn) override {
    std::stable_sort(host_.begin(), host_.end(),
                     [](const Event& x, const Event& y) { return x.ts_ns < y.ts_ns; });
    for (const auto& e : host_) fn(e);
  }
  std::vector<SnapshotRow> snapshots(const Window&) override { return {}; }
  std::map<uint32_t, ProcessActivity> process_activity(const Window&) override { return activity_; }
  std::map<uint32_t, ProcessInfo> processes() override { return {{1, {1, "trainer", ""}}}; }
  std::pair<int64_t, int64_t> time_span() override { return {0, 0}; }
  uint64_t event_count(const Window&) override { return calls_.size() + host_.size(); }
  bool has_stacks() override { return !frames_.empty(); }
  std::vector<StackFrameInfo> stack(uint64_t id) override { return frames_[id]; }
  bool has_cpu_samples() override { return !samples_.empty(); }
  void cpu_samples(const Window&, const CpuSampleFn& fn) override {
    for (const auto& s : samples_) fn(s);
  }
  void device_samples(const Window&,
                      const std::function<void(const hal::DeviceSample&)>& fn) override {
    for (const auto& s : devices_) fn(s);
  }
  std::vector<hal::DeviceEvent> device_events(const Window&) override { return device_events_; }

  Event& call(std::string_view op, EventKind k, uint64_t ts, uint64_t dur, uint64_t stack = 0,
              std::string_view api = "cuda_runtime") {
    Event e;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.pid = e.tid = 1;
    e.vendor = "nvidia";
    e.api = api;
    e.op = op;
    e.kind = k;
    e.has_ret = true;
    e.stack_id = stack;
    if (k != EventKind::kAlloc && k != EventKind::kFree) e.set(Field::kStream, 0);
    calls_.push_back(e);
    return calls_.back();
  }
  void offcpu(uint64_t ts, uint64_t dur, bool preempted, uint32_t state, uint32_t by = 0,
              uint32_t tid = 1) {
    Event e;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.pid = 1;
    e.tid = tid;
    e.vendor = "host";
    e.api = "kernel";
    e.op = "sched_switch";
    e.kind = EventKind::kSchedSwitch;
    e.set(Field::kFlags, preempted ? 1 : 0);
    e.set(Field::kState, state);
    if (by) {
      e.set(Field::kPeerPid, by);
      e.set_peer_comm("hog");
    }
    host_.push_back(e);
  }

  std::vector<Event> calls_, host_;
  std::map<uint32_t, ProcessActivity> activity_;  // the kernel's per-process aggregates
  std::map<uint64_t, std::vector<StackFrameInfo>> frames_;
  std::vector<CpuSample> samples_;
  std::vector<hal::DeviceSample> devices_;
  std::vector<hal::DeviceEvent> device_events_;
};

constexpr uint64_t kLossStack = 11, kUploadStack = 12, kRowStack = 13;
constexpr uint64_t kRankStack = 20;  // + the rank's pid: each rank's own launch site

// A loop of `steps` steps of `step` ns: `host` ns of host work, an upload, 10 launches, a loss
// read (D2H copy + sync). Optionally each runtime call has a driver call nested inside.
inline void loop(Source& s, int steps, uint64_t step, uint64_t host, bool nested, int64_t ret = 0) {
  for (int i = 0; i < steps; ++i) {
    uint64_t t = uint64_t(i) * step + host;
    s.call("cudaMemcpy", EventKind::kMemcpy, t, 20 * kUs, kUploadStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
    if (nested)
      s.call("cuMemcpyHtoD", EventKind::kMemcpy, t + kUs, 18 * kUs, 0, "cuda_driver")
          .set(Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
    for (int k = 0; k < 10; ++k) {
      uint64_t l = t + 30 * kUs + uint64_t(k) * 10 * kUs;
      s.call("cudaLaunchKernel", EventKind::kLaunch, l, 8 * kUs).ret = ret;
      if (nested) s.call("cuLaunchKernel", EventKind::kLaunch, l + kUs, 6 * kUs, 0, "cuda_driver");
    }
    uint64_t r = t + 200 * kUs;
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, r, 10 * kUs, kLossStack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, r + 12 * kUs, 100 * kUs, kLossStack).ret =
        ret;
  }
  s.frames_[kLossStack] = {{true, "<module>", "/w/train.py", 43, "", ""}};
  s.frames_[kUploadStack] = {{true, "<module>", "/w/train.py", 35, "", ""}};
}

// Per-row syncs in a step that starts at `t`: 16 rows from t + 2 ms, 400 us apart, each a
// launch and a small device-to-host copy with its sync, both at `stack` (0: no stack).
inline void row_syncs(Source& s, uint64_t t, uint64_t stack) {
  for (int r = 0; r < 16; ++r) {
    uint64_t u = t + 2 * kMs + uint64_t(r) * 400 * kUs;
    s.call("cudaLaunchKernel", EventKind::kLaunch, u, 8 * kUs);
    s.call("cudaMemcpyAsync", EventKind::kMemcpy, u + 20 * kUs, 10 * kUs, stack)
        .set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    s.call("cudaStreamSynchronize", EventKind::kSync, u + 32 * kUs, 20 * kUs, stack);
  }
}

inline const StepSeries& only(const Analysis& a) { return a.steps.processes.at(0); }

}  // namespace ingero::engine::step_source

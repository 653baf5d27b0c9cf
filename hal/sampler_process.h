// A device sampler run in a process of its own, so that a vendor library that crashes or hangs
// (a broken NVIDIA driver's libnvidia-ml) takes that process down, never the tracer or `check`.
//
// The tracer spawns the child (`argv`, normally its own executable with a hidden command), which
// opens the real sampler and talks on fd 3, a Unix socket: first what it opened (its info) or
// why it could not; then answers, each the samples and device events since the one before and
// its own CPU time. It answers a poll() at once; once start()ed it also polls on its own every
// `poll_ns`, stamped on the caller's clock, and sends each answer unasked, so that no thread of
// the caller wakes for it: collect() takes what arrived (the tracer's event loop, which wakes
// anyway). A sampler polling on its own is given no GPU processes (NVML reports every process
// itself).
//
// What the caller sees when the child goes wrong:
//   - it dies or stops answering while opening: open_sampler_process() fails, naming the
//     library, the call it was in and the signal ("crashed inside nvmlInit_v2 (SIGSEGV)");
//   - it dies, sends garbage, takes longer than `poll_limit_ns` to answer a poll, or once
//     started sends nothing for `poll_ns + poll_limit_ns` (it is then killed): one
//     `sampler_lost` event says why, and every later poll and collect give nothing at once. The
//     device figures stop there; the trace goes on.
// Destroying the sampler closes the socket (the child shuts its library down and exits) and
// reaps the child, killing it after a second.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hal/clock.h"
#include "hal/device_sampler.h"
#include "hal/result.h"

namespace ingero::hal {

struct SamplerProcessOptions {
  std::vector<std::string> argv;  // the child; argv[0] is the executable's path
  std::string source;             // "nvml": the source of the events this side adds
  std::string library;            // "libnvidia-ml.so.1": named in what is said when it fails
  std::string open_call;          // "nvmlInit_v2": where opening crashes, when it does
  int64_t poll_ns = 100'000'000;  // the child's period once started
  int64_t open_limit_ns = 25'000'000'000;  // the child's own limits come first
  int64_t poll_limit_ns = 5'000'000'000;
};

// What open_sampler_process() returns, for callers that let it poll on its own.
class SelfPacedSampler : public DeviceSampler {
 public:
  // From now on the child polls every poll_ns, the first at once, stamped `clock.now()`.
  virtual void start(TraceClock clock) = 0;
  // The samples it sent since the last collect() (or poll()), appended to `out`, without
  // waiting; its events go to take_events(). Finds a child gone or silent too long.
  virtual void collect(std::vector<DeviceSample>& out) = 0;
  // The answers received so far, asked or not.
  virtual uint64_t answers() const = 0;
  // The child's CPU time, as of its last answer. Any thread.
  virtual int64_t cpu_ns() const = 0;
};

Result<std::unique_ptr<DeviceSampler>> open_sampler_process(const SamplerProcessOptions& opts);

// The child's side: opens its sampler with `open` and answers the parent on `fd` until the
// parent closes it. Returns the exit status for the child's main().
int serve_sampler(int fd, const std::function<Result<std::unique_ptr<DeviceSampler>>()>& open);

// The kind of the event a lost child leaves (device_events.kind).
inline constexpr const char* kSamplerLost = "sampler_lost";

// An event of a sampler rather than of one device (its event set failed, its process was
// lost): it concerns every device of its source, and its `device` names none.
inline bool is_sampler_event(const DeviceEvent& e) {
  return e.kind == "event_error" || e.kind == kSamplerLost;
}

}  // namespace ingero::hal

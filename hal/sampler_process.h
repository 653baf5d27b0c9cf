// A device sampler run in a process of its own, so that a vendor library that crashes or hangs
// (a broken NVIDIA driver's libnvidia-ml) takes that process down, never the tracer or `check`.
//
// The tracer spawns the child (`argv`, normally its own executable with a hidden command), which
// opens the real sampler and answers on fd 3, a Unix socket: first what it opened (its info) or
// why it could not, then one answer per poll (the samples and the device events since the last
// one, and its own CPU time). The parent's side is an ordinary hal::DeviceSampler.
//
// What the tracer sees when the child goes wrong:
//   - it dies or stops answering while opening: open_sampler_process() fails, naming the
//     library, the call it was in and the signal ("crashed inside nvmlInit_v2 (SIGSEGV)");
//   - it dies during a poll, answers garbage, or takes longer than `poll_limit_ns` (it is then
//     killed): that poll returns nothing, take_events() returns one `sampler_lost` event saying
//     why, and every later poll returns nothing at once. The device figures stop there; the
//     trace goes on.
// Destroying the sampler closes the socket (the child shuts its library down and exits) and
// reaps the child, killing it after a second.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hal/device_sampler.h"
#include "hal/result.h"

namespace ingero::hal {

struct SamplerProcessOptions {
  std::vector<std::string> argv;  // the child; argv[0] is the executable's path
  std::string source;             // "nvml": the source of the events this side adds
  std::string library;            // "libnvidia-ml.so.1": named in what is said when it fails
  std::string open_call;          // "nvmlInit_v2": where opening crashes, when it does
  int64_t open_limit_ns = 25'000'000'000;  // the child's own limits come first
  int64_t poll_limit_ns = 5'000'000'000;
};

Result<std::unique_ptr<DeviceSampler>> open_sampler_process(const SamplerProcessOptions& opts);

// The CPU time the child of a sampler from open_sampler_process() has used, as of its last
// answer; 0 for any other sampler (its CPU is its caller's thread's). Any thread.
int64_t sampler_process_cpu_ns(const DeviceSampler& s);

// The child's side: opens its sampler with `open` and answers the parent on `fd` until the
// parent closes it. Returns the exit status for the child's main().
int serve_sampler(int fd, const std::function<Result<std::unique_ptr<DeviceSampler>>()>& open);

// The kind of the event a lost child leaves (device_events.kind).
inline constexpr const char* kSamplerLost = "sampler_lost";

}  // namespace ingero::hal

// What the devices said (hal/device_sampler.h: NVML, amdgpu), indexed for the step model and
// the rules: each process's own utilisation samples per device, each device's whole-device
// samples, and which devices a process used.
//
// A step is measured where samples cover at least half of it: its GPU busy share is the
// samples' utilisation weighted by how much of the step each covers. The process's own samples
// come first (NVML per-process, amdgpu fdinfo); where they do not cover a step, the samples
// of the devices it used (the whole device: other processes' work counts too). Which devices
// a process used: those with samples of it (utilisation or memory); a process with none is
// taken to use the only device sampled, and no device at all when several were.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hal/device_sampler.h"

namespace ingero::engine {

class DeviceBusy {
 public:
  DeviceBusy() = default;
  // One sample at a time, in any order; then done().
  void add(const hal::DeviceSample& s);
  void done();

  bool empty() const { return devices_.empty(); }
  size_t devices() const { return devices_.size(); }

  struct Measure {
    double busy = 0;           // share of the span, 0..1
    bool per_process = false;  // from the process's own samples
    std::string source;        // "nvml", "amdgpu"
  };
  // The GPU busy share of pid over [a, b), or nullopt where samples cover less than half of it.
  std::optional<Measure> measure(uint32_t pid, int64_t a, int64_t b) const;
  // The devices pid used ((source, index) as "nvml:0"); the only device when it has no samples
  // of its own and one device was sampled.
  std::vector<std::string> devices_of(uint32_t pid) const;
  // A device's display name: "GPU 0 (GPU-8b3c...)".
  std::string device_name(const std::string& key) const;

 private:
  struct Span {
    int64_t start = 0, end = 0;
    float util = 0;  // percent
  };
  using Series = std::vector<Span>;  // sorted by start once done()
  // (pid or kDevice, device key) -> spans
  static constexpr uint64_t kDevice = UINT64_MAX;
  std::map<std::pair<uint64_t, std::string>, Series> series_;
  std::map<uint32_t, std::set<std::string>> used_;  // pid -> device keys
  std::map<std::string, std::string> devices_;      // key -> "GPU 0 (uuid)"
  // Covered time and busy-weighted time of [a, b) in one series.
  static std::pair<int64_t, double> cover(const Series& s, int64_t a, int64_t b);
};

// How explain names a source: "NVML", "amdgpu".
std::string source_label(const std::string& source);

}  // namespace ingero::engine

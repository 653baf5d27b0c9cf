// A backend's device side channel: what the GPU itself says about how busy it is, per device
// and per process, with its memory, clocks, power, temperature, throttling and errors (NVML on
// NVIDIA hosts, amdgpu sysfs on AMD ones). The engine's step model joins these samples to the
// steps: where they cover a step, its GPU busy share is measured instead of bounded.
//
// Plain data and one small interface. The tracer (app/) owns the samplers, polls them on a
// thread of its own (every --device-poll-ms, 100 ms by default) and hands what they read to
// the store and the Prometheus registry, neither of which names a vendor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hal/side_channel.h"

namespace ingero::hal {

// One device's figures over one period, or one process's on one device. Every figure is
// optional: a function the library lacks, or one the device does not support, leaves it absent
// (nullopt), never zero.
struct DeviceSample {
  int64_t ts_ns = 0;            // wall clock (Unix ns, the trace clock): the end of the period
  int64_t period_ns = 0;        // the figures describe (ts_ns - period_ns, ts_ns]; 0: an instant
  std::string source;           // "nvml", "amdgpu": who measured it
  uint32_t device = 0;          // the device's index as the source numbers them
  std::string uuid;             // "GPU-8b3c...", or the PCI address where no UUID is known
  std::optional<uint32_t> pid;  // nullopt: the whole device
  // Percent of the period the device (or the process's work on it) kept the compute engine
  // busy (NVML "gpu" / per-process "sm"; amdgpu gpu_busy_percent), and the memory interface.
  std::optional<double> sm_util, mem_util;
  std::optional<uint64_t> mem_used, mem_total;  // bytes (per process: its allocations)
  std::optional<uint32_t> sm_clock_mhz, mem_clock_mhz;
  std::optional<uint32_t> power_mw;
  std::optional<int32_t> temperature_c;
  std::optional<uint64_t> throttle_reasons;                // NVML clocks-event reason bits
  std::optional<uint64_t> ecc_corrected, ecc_uncorrected;  // volatile totals since boot/reset
};

// Something the device reported once: an Xid, an ECC error, the device lost.
struct DeviceEvent {
  int64_t ts_ns = 0;  // wall clock, when the sampler received it
  std::string source;
  uint32_t device = 0;
  std::string uuid;
  std::string kind;    // "xid", "ecc_uncorrected", "ecc_corrected", "gpu_lost"
  int64_t code = 0;    // the Xid number; for ECC the count it rose by
  std::string detail;  // "GPU has fallen off the bus", "2 uncorrected ECC errors (volatile)"
};

// What a device sampler found when it started, for `check`, the trace's first lines and the
// tests: its devices, and which figures it can give.
struct DeviceSamplerInfo {
  std::string source;                // "nvml"
  std::string library;               // "libnvidia-ml.so.1 (driver 580.159.04)", "/sys/class/drm"
  std::vector<std::string> devices;  // "0: NVIDIA H100 80GB HBM3 (GPU-8b3c...)"
  std::vector<std::string> figures;  // what it gives: "utilisation", "per-process utilisation"
  std::vector<std::string> absent;   // what it cannot: "power (NOT_SUPPORTED)", "ECC (missing)"
  bool events = false;               // device events (Xid, ECC) are delivered
};

class DeviceSampler {
 public:
  virtual ~DeviceSampler() = default;
  virtual const DeviceSamplerInfo& info() const = 0;
  // Reads every device now (wall clock `wall_ns`): one whole-device sample each, and the
  // per-process samples that arrived since the last poll. `gpu_pids` are the processes the
  // tracer saw make GPU calls, for sources that read per-process figures process by process
  // (amdgpu's fdinfo); NVML reports every process itself. Called from one thread; must not
  // block for long (a poll is budgeted at well under a millisecond of CPU).
  virtual std::vector<DeviceSample> poll(int64_t wall_ns,
                                         const std::vector<uint32_t>& gpu_pids) = 0;
  // Device events received since the last call (Xid through NVML's event set, on the
  // sampler's own thread; ECC counters that rose between polls). Any thread.
  virtual std::vector<DeviceEvent> take_events() = 0;
};

// How a backend opens its device sampler.
struct DeviceSamplerOptions {
  std::string sysfs_root = "/sys";    // amdgpu: ROOT/class/drm/card*/device
  std::string procfs_root = "/proc";  // amdgpu: ROOT/PID/fdinfo
  int64_t poll_ns = 100'000'000;      // the poll period, for the periods of the samples
  // NVML: the library to dlopen; the default name is found the way the dynamic loader finds
  // it (LD_LIBRARY_PATH, the ld cache), so a test points LD_LIBRARY_PATH at a stand-in.
  std::string nvml_library = "libnvidia-ml.so.1";
};

}  // namespace ingero::hal

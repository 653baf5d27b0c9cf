// The NVML device sampler: every device's utilisation, memory, clocks, throttle reasons,
// power, temperature and ECC totals, every process's SM and memory utilisation
// (nvmlDeviceGetProcessUtilization, samples newer than the last one seen) and memory, and Xid
// and ECC events from NVML's event set on a thread of its own.
//
// A function the library lacks, or that answers NVML_ERROR_NOT_SUPPORTED, leaves its figure
// absent (the sampler stops asking); any other error leaves it absent for that poll only.
// Utilisation (per device and per process) is read every poll; memory, clocks, throttle
// reasons, power, temperature, ECC totals and per-process memory once a second (the first
// poll, then every kSlowPeriodNs / poll period polls): in other rows they are absent.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backends/nvml/nvml_library.h"
#include "hal/device_sampler.h"

namespace ingero::backends::nvml {

class NvmlSampler final : public hal::DeviceSampler {
 public:
  static constexpr int64_t kSlowPeriodNs = 1'000'000'000;
  // Per-process rows read from one device in one call, at most (no GPU runs more processes).
  static constexpr size_t kMaxProcessRows = 4096;
  // Opens the library (opts.nvml_library), initialises NVML, enumerates the devices, asks each
  // function once to learn what is supported, and starts the event thread where the library
  // has the event-set functions. Errors: the library's (not found, a required function
  // missing, nvmlInit_v2 refused: no driver) and a device count NVML cannot give.
  static Result<std::unique_ptr<NvmlSampler>> open(const hal::DeviceSamplerOptions& opts);
  ~NvmlSampler() override;  // stops the event thread, frees the event set, nvmlShutdown

  const hal::DeviceSamplerInfo& info() const override { return info_; }
  std::vector<hal::DeviceSample> poll(int64_t wall_ns,
                                      const std::vector<uint32_t>& gpu_pids) override;
  std::vector<hal::DeviceEvent> take_events() override;

 private:
  struct Device {
    nvmlDevice_t handle = nullptr;
    uint32_t index = 0;
    std::string uuid, name;
    // Still worth asking: false once the library lacks the function or the device answered
    // NOT_SUPPORTED.
    bool util = true, procs = true, memory = true, running = true, sm_clock = true,
         mem_clock = true, reasons = true, power = true, temperature = true, ecc = true;
    bool lost = false;
    unsigned long long last_seen_us = 0;      // newest per-process sample seen
    std::map<uint32_t, int64_t> last_pid_ns;  // each process's previous sample
    int64_t last_poll_ns = 0;
    bool ecc_known = false;
    uint64_t ecc_corrected = 0, ecc_uncorrected = 0;
  };
  explicit NvmlSampler(std::unique_ptr<NvmlLibrary> lib, int64_t poll_ns)
      : lib_(std::move(lib)), poll_ns_(poll_ns) {}
  // Asks every function once per device: what the devices support, into info_.
  void probe();
  void start_events();
  void event_loop();
  void add_event(hal::DeviceEvent e);
  // A poll's reading of one function: true with a value; false, marking it unsupported on
  // NOT_SUPPORTED, otherwise. GPU_IS_LOST marks the device lost (one event).
  bool ok(Device& d, nvmlReturn_t r, bool& still_supported, int64_t wall_ns);
  // The processes' utilisation samples, and with `slow` their memory.
  void per_process(Device& d, int64_t wall_ns, std::vector<hal::DeviceSample>& out, bool slow);
  void slow_figures(Device& d, hal::DeviceSample& s, int64_t wall_ns);

  std::unique_ptr<NvmlLibrary> lib_;
  int64_t poll_ns_;
  uint64_t polls_ = 0;
  std::vector<Device> devices_;
  hal::DeviceSamplerInfo info_;
  std::vector<nvmlProcessUtilizationSample_t> util_buf_;
  std::vector<nvmlProcessInfo_t> proc_buf_;
  nvmlEventSet_t event_set_ = nullptr;
  std::thread event_thread_;
  std::atomic<bool> stop_{false};
  // CLOCK_REALTIME minus the poll's clock (the session's, which a step of the wall clock while
  // tracing does not move), at the last poll: NVML's own timestamps are CLOCK_REALTIME.
  std::atomic<int64_t> realtime_ahead_ns_{0};
  std::mutex mu_;
  std::vector<hal::DeviceEvent> pending_;
};

// The NVIDIA Xid catalogue's name for the Xids a training job meets ("GPU has fallen off the
// bus" for 79), "" for others.
std::string_view xid_name(int64_t xid);

}  // namespace ingero::backends::nvml

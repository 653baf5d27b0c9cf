// libnvidia-ml opened at run time: dlopen by name (the dynamic loader's search: LD_LIBRARY_PATH,
// the ld cache), the functions ingero needs looked up, nvmlInit_v2 called. Never a build or
// package dependency: a host without the NVIDIA driver has no library and loses nothing but
// the device figures.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/nvml/nvml_api.h"
#include "hal/result.h"

namespace ingero::backends::nvml {

class NvmlLibrary {
 public:
  // Opens `name` and resolves the required functions. Errors: "libnvidia-ml.so.1 not found
  // (DLERROR)", "libnvidia-ml.so.1 lacks nvmlDeviceGetProcessUtilization". A missing optional
  // function is no error: its pointer stays null and its name is in missing().
  static Result<std::unique_ptr<NvmlLibrary>> open(const std::string& name);
  // nvmlShutdown when init() succeeded, then dlclose.
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // nvmlInit_v2, on a thread of its own, for at most `limit_ms` (kInitLimitMs; the environment's
  // INGERO_NVML_INIT_LIMIT_MS where set): a GPU that fell off the bus or a driver that no longer
  // answers can hold it for ever, and the tracer must still start and stop. Errors: "nvmlInit_v2
  // failed: Driver Not Loaded (NVML error 9)", "nvmlInit_v2 did not return within 20 s ...".
  // A library left inside nvmlInit_v2 is never closed. Should the library crash in it, the
  // process says so on stderr (which library, and --device-poll-ms 0) before it dies.
  Status init();
  static constexpr int kInitLimitMs = 20'000;
  // "Not Supported (NVML error 3)": nvmlErrorString where the library has it.
  std::string describe(nvmlReturn_t r) const;
  const std::string& name() const { return name_; }
  // The optional functions the library lacks, by NVML name.
  const std::vector<std::string>& missing() const { return missing_; }

  // Required: never null after open().
  InitFn init_v2 = nullptr;
  ShutdownFn shutdown = nullptr;
  GetCountFn device_count = nullptr;
  GetHandleByIndexFn device_handle = nullptr;
  GetStringFn device_uuid = nullptr;
  GetUtilizationRatesFn utilization = nullptr;
  GetProcessUtilizationFn process_utilization = nullptr;
  // Optional: null when the library lacks them.
  ErrorStringFn error_string = nullptr;
  GetStringFn device_name = nullptr;
  GetDriverVersionFn driver_version = nullptr;
  GetMemoryInfoFn memory_info = nullptr;
  GetComputeRunningProcessesFn running_processes = nullptr;
  GetClockInfoFn clock_info = nullptr;
  GetClocksEventReasonsFn clocks_event_reasons = nullptr;
  GetPowerUsageFn power_usage = nullptr;
  GetTemperatureFn temperature = nullptr;
  GetTotalEccErrorsFn total_ecc_errors = nullptr;
  EventSetCreateFn event_set_create = nullptr;
  RegisterEventsFn register_events = nullptr;
  GetSupportedEventTypesFn supported_event_types = nullptr;
  EventSetWaitFn event_set_wait = nullptr;
  EventSetFreeFn event_set_free = nullptr;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  bool initialised_ = false;
  bool stuck_ = false;  // left inside nvmlInit_v2: neither shut down nor closed
  std::string name_;
  std::vector<std::string> missing_;
};

}  // namespace ingero::backends::nvml

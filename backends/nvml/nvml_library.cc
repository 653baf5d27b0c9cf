#include "backends/nvml/nvml_library.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include "backends/nvml/crash_note.h"

namespace ingero::backends::nvml {
namespace {

template <class Fn>
bool look_up(void* handle, const char* symbol, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return out != nullptr;
}

}  // namespace

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::open(const std::string& name) {
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->name_ = name;
  dlerror();
  lib->handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle_) {
    const char* why = dlerror();
    return make_error(name + " not found (" + std::string(why ? why : "dlopen failed") + ")");
  }
  void* h = lib->handle_;
  struct Required {
    const char* symbol;
    bool found;
  };
  const Required required[] = {
      {"nvmlInit_v2", look_up(h, "nvmlInit_v2", lib->init_v2)},
      {"nvmlShutdown", look_up(h, "nvmlShutdown", lib->shutdown)},
      {"nvmlDeviceGetCount_v2", look_up(h, "nvmlDeviceGetCount_v2", lib->device_count)},
      {"nvmlDeviceGetHandleByIndex_v2",
       look_up(h, "nvmlDeviceGetHandleByIndex_v2", lib->device_handle)},
      {"nvmlDeviceGetUUID", look_up(h, "nvmlDeviceGetUUID", lib->device_uuid)},
      {"nvmlDeviceGetUtilizationRates",
       look_up(h, "nvmlDeviceGetUtilizationRates", lib->utilization)},
      {"nvmlDeviceGetProcessUtilization",
       look_up(h, "nvmlDeviceGetProcessUtilization", lib->process_utilization)},
  };
  for (const auto& r : required)
    if (!r.found) return make_error(name + " lacks " + r.symbol + " (too old a driver?)");
  auto optional = [&](const char* symbol, auto& fn) {
    if (!look_up(h, symbol, fn)) lib->missing_.emplace_back(symbol);
  };
  optional("nvmlErrorString", lib->error_string);
  optional("nvmlDeviceGetName", lib->device_name);
  optional("nvmlSystemGetDriverVersion", lib->driver_version);
  optional("nvmlDeviceGetMemoryInfo", lib->memory_info);
  optional("nvmlDeviceGetComputeRunningProcesses_v3", lib->running_processes);
  optional("nvmlDeviceGetClockInfo", lib->clock_info);
  // The reasons' newer name (drivers 535+), else the older one with the same signature.
  if (!look_up(h, "nvmlDeviceGetCurrentClocksEventReasons", lib->clocks_event_reasons))
    optional("nvmlDeviceGetCurrentClocksThrottleReasons", lib->clocks_event_reasons);
  if (!lib->clocks_event_reasons) {
    lib->missing_.pop_back();
    lib->missing_.emplace_back("nvmlDeviceGetCurrentClocksEventReasons");
  }
  optional("nvmlDeviceGetPowerUsage", lib->power_usage);
  optional("nvmlDeviceGetTemperature", lib->temperature);
  optional("nvmlDeviceGetTotalEccErrors", lib->total_ecc_errors);
  optional("nvmlEventSetCreate", lib->event_set_create);
  optional("nvmlDeviceRegisterEvents", lib->register_events);
  optional("nvmlDeviceGetSupportedEventTypes", lib->supported_event_types);
  optional("nvmlEventSetWait_v2", lib->event_set_wait);
  optional("nvmlEventSetFree", lib->event_set_free);
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (stuck_) return;  // its thread is still inside the library
  if (initialised_) shutdown();
  if (handle_) dlclose(handle_);
}

Status NvmlLibrary::init() {
  int limit_ms = kInitLimitMs;
  if (const char* v = getenv("INGERO_NVML_INIT_LIMIT_MS"); v && atoi(v) > 0) limit_ms = atoi(v);
  auto done = std::make_shared<std::promise<nvmlReturn_t>>();
  std::future<nvmlReturn_t> answer = done->get_future();
  CrashNote note(name_, "nvmlInit_v2");
  std::thread([fn = init_v2, done] {
    CrashNote::Inside inside;
    done->set_value(fn());
  }).detach();
  if (answer.wait_for(std::chrono::milliseconds(limit_ms)) != std::future_status::ready) {
    stuck_ = true;
    return make_error("nvmlInit_v2 did not return within " + std::to_string(limit_ms / 1000) +
                      " s (a GPU or driver that no longer answers: nvidia-smi hangs too)");
  }
  nvmlReturn_t r = answer.get();
  if (r != NVML_SUCCESS) return make_error("nvmlInit_v2 failed: " + describe(r));
  initialised_ = true;
  return {};
}

std::string NvmlLibrary::describe(nvmlReturn_t r) const {
  const char* text = error_string ? error_string(r) : nullptr;
  return std::string(text && *text ? text : "error") + " (NVML error " + std::to_string(r) + ")";
}

}  // namespace ingero::backends::nvml

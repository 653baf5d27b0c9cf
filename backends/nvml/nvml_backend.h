// NVML: the NVIDIA driver's management library as a device side channel (no probes). GPU and
// memory utilisation per device and per process, memory, clocks, throttle reasons, power,
// temperature, ECC totals and Xid events, read through libnvidia-ml.so.1 opened at run time.
#pragma once

#include <memory>
#include <string>

#include "hal/backend.h"

namespace ingero::backends {

// `library`: what to dlopen, by default found as the dynamic loader finds it (tests pass a
// stand-in's path). `sampler_exe`: when set, NVML is opened and polled in a process of its own
// running `sampler_exe __nvml-sampler` (backends/nvml/nvml_child.h, hal/sampler_process.h), so
// that a broken driver library that crashes or hangs costs the device figures, never the
// tracer; when empty (tests, benches), in the calling process.
std::unique_ptr<hal::VendorBackend> make_nvml_backend(std::string library = "libnvidia-ml.so.1",
                                                      std::string sampler_exe = "");

}  // namespace ingero::backends

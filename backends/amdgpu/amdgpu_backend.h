// amdgpu: the kernel driver's sysfs and DRM fdinfo figures as a device side channel (no
// probes): per card busy and memory-busy percent, VRAM, power, temperature and clocks; per
// process engine busy time and VRAM where the kernel has DRM fdinfo (6.x).
#pragma once

#include <memory>

#include "hal/backend.h"

namespace ingero::backends {

std::unique_ptr<hal::VendorBackend> make_amdgpu_backend();

}  // namespace ingero::backends

// AMD HIP (libamdhip64): the same event kinds as CUDA, so every engine rule applies.
#pragma once

#include <memory>

#include "hal/backend.h"

namespace ingero::backends {

std::unique_ptr<hal::VendorBackend> make_hip_backend();

}  // namespace ingero::backends

// NVIDIA CUDA: runtime (libcudart, static copies) and driver (libcuda).
#pragma once

#include <memory>

#include "hal/backend.h"

namespace ingero::backends {

std::unique_ptr<hal::VendorBackend> make_cuda_backend();

}  // namespace ingero::backends

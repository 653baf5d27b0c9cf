// The CUDA runtime's (cudaError_t) and driver's (CUresult) return codes: their names and what
// each means (hal/error_codes.h). The values are CUDA 13's; codes CUDA retired keep their names.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "hal/error_codes.h"

namespace ingero::backends::cuda {

extern const std::span<const hal::ErrorCodeEntry> kRuntimeErrors;  // sorted by code
extern const std::span<const hal::ErrorCodeEntry> kDriverErrors;   // sorted by code

// Code RET of API "cuda_runtime" or "cuda_driver"; nullopt for another API or an unknown code.
std::optional<hal::ErrorCode> error_code(std::string_view api, int64_t ret);

}  // namespace ingero::backends::cuda

// A failed call's return code as people read it: the vendor's name for it ("cudaErrorIllegal
// Address") and what it means whatever the vendor (ErrorClass, hal/event.h). Each backend keeps
// the table of its APIs' codes (VendorBackend::error_code); a trace's reader is given them all
// (ErrorCodeFn), so the engine prints names and reasons by class without a vendor symbol.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>

#include "hal/event.h"

namespace ingero::hal {

struct ErrorCode {
  std::string_view name;  // static storage
  ErrorClass cls = ErrorClass::kOther;
};

// One row of a backend's table; tables are sorted by code.
struct ErrorCodeEntry {
  int64_t code = 0;
  std::string_view name;
  ErrorClass cls = ErrorClass::kOther;
};

// `code`'s row of `table` (sorted by code); nullopt when it has none.
std::optional<ErrorCode> find_error_code(std::span<const ErrorCodeEntry> table, int64_t code);

// "out_of_memory", "not_ready", "no_device", "device_fault", "invalid", "other", "none".
std::string_view error_class_name(ErrorClass c);

// What a trace's reader names return codes with: the code `ret` of a call of API `api`
// ("cuda_runtime"); nullopt where no backend knows it (hal::BackendRegistry::error_code).
using ErrorCodeFn = std::function<std::optional<ErrorCode>(std::string_view api, int64_t ret)>;

}  // namespace ingero::hal

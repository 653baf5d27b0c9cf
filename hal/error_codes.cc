#include "hal/error_codes.h"

#include <algorithm>

namespace ingero::hal {

std::optional<ErrorCode> find_error_code(std::span<const ErrorCodeEntry> table, int64_t code) {
  auto it = std::lower_bound(table.begin(), table.end(), code,
                             [](const ErrorCodeEntry& e, int64_t c) { return e.code < c; });
  if (it == table.end() || it->code != code) return std::nullopt;
  return ErrorCode{.name = it->name, .cls = it->cls};
}

std::string_view error_class_name(ErrorClass c) {
  switch (c) {
    case ErrorClass::kNone:
      return "none";
    case ErrorClass::kOutOfMemory:
      return "out_of_memory";
    case ErrorClass::kOther:
      return "other";
    case ErrorClass::kNotReady:
      return "not_ready";
    case ErrorClass::kNoDevice:
      return "no_device";
    case ErrorClass::kDeviceFault:
      return "device_fault";
    case ErrorClass::kInvalid:
      return "invalid";
  }
  return "other";
}

}  // namespace ingero::hal

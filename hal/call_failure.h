// Whether a call that returned failed: a non-zero code that is not "not ready" (a query whose
// work still runs, a nonblocking call in progress: an answer, hal/error_codes.h). The one test
// behind the op statistics' errors, the per-second summaries' and the error counter.
#pragma once

#include <cstdint>

#include "hal/event.h"

namespace ingero::hal {

// `ret` with the class its backend stored (Field::kErrClass; 0 where none was).
constexpr bool is_failure(int64_t ret, uint64_t err_class) {
  return ret != 0 && err_class != uint64_t(ErrorClass::kNotReady);
}

inline bool is_failure(const Event& e) {
  return e.has_ret && is_failure(e.ret, e.get_or(Field::kErrClass, 0));
}

}  // namespace ingero::hal

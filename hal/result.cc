#include "hal/result.h"

#include <cstring>

namespace ingero {

Error Error::sys(std::string what, int err) {
  return Error{std::move(what) + ": " + std::strerror(err), err};
}

}  // namespace ingero

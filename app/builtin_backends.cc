#include "app/builtin_backends.h"

#include "backends/cuda/cuda_backend.h"

namespace ingero::app {

void register_builtin_backends(hal::BackendRegistry& registry) {
  registry.add(backends::make_cuda_backend());
}

}  // namespace ingero::app

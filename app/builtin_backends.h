// The one place backends are registered. Adding a vendor: a folder under backends/ and a
// line here (see docs/adding-a-backend.md).
#pragma once

#include "hal/backend.h"

namespace ingero::app {

struct BackendOptions {
  bool rdma_verbs = false;  // attach to libibverbs (ingero trace --rdma-verbs)
};
void register_builtin_backends(hal::BackendRegistry& registry, const BackendOptions& opts = {});

}  // namespace ingero::app

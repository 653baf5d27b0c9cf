// The one place backends are registered. Adding a vendor: a folder under backends/ and a
// line here (see docs/adding-a-backend.md).
#pragma once

#include "hal/backend.h"

namespace ingero::app {

struct BackendOptions {
  bool rdma_verbs = false;  // attach to libibverbs (ingero trace --rdma-verbs)
};
void register_builtin_backends(hal::BackendRegistry& registry, const BackendOptions& opts = {});
// The executable that runs a vendor library that may crash or hang the process calling it
// (NVML: backends/nvml/nvml_child.h) in a process of its own. main() sets it to the running
// binary before registering; left empty (tests and benches linking the backends), such
// libraries run in the calling process.
void set_sampler_executable(std::string path);
// The builtin backends' SQL views (hal::BackendRegistry::views()), for the commands that open
// trace files.
std::vector<hal::SqlView> builtin_views();
// The builtin backends' names of return codes (hal::BackendRegistry::error_code), for the
// readers the engine analyses: their chains name "cudaErrorIllegalAddress (700)".
hal::ErrorCodeFn builtin_error_codes();

// Backends `trace` attaches only when a flag asks. `check` audits them anyway (registering
// them with every opt-in on) and says which flag turns each on.
struct OptInBackend {
  std::string_view backend;  // "rdma"
  std::string_view flag;     // "--rdma-verbs"
};
inline constexpr OptInBackend kOptInBackends[] = {{"rdma", "--rdma-verbs"}};
inline constexpr BackendOptions kAllOptInsOn{.rdma_verbs = true};

}  // namespace ingero::app

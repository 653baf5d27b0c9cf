#include "app/builtin_backends.h"

#include "backends/amdgpu/amdgpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/hip/hip_backend.h"
#include "backends/nccl/nccl_backend.h"
#include "backends/nvml/nvml_backend.h"
#include "backends/rdma/rdma_backend.h"

namespace ingero::app {
namespace {

std::string& sampler_executable() {
  static std::string path;
  return path;
}

}  // namespace

void set_sampler_executable(std::string path) { sampler_executable() = std::move(path); }

void register_builtin_backends(hal::BackendRegistry& registry, const BackendOptions& opts) {
  registry.add(backends::make_cuda_backend());
  registry.add(backends::make_hip_backend());
  registry.add(backends::make_nccl_backend());
  registry.add(backends::make_rdma_backend(opts.rdma_verbs));
  registry.add(backends::make_nvml_backend("libnvidia-ml.so.1", sampler_executable()));
  registry.add(backends::make_amdgpu_backend());
}

std::vector<hal::SqlView> builtin_views() {
  hal::BackendRegistry r;
  register_builtin_backends(r);
  return r.views();  // static storage: they outlive r
}

hal::ErrorCodeFn builtin_error_codes() {
  auto r = std::make_shared<hal::BackendRegistry>();
  register_builtin_backends(*r, kAllOptInsOn);
  return [r](std::string_view api, int64_t ret) { return r->error_code(api, ret); };
}

}  // namespace ingero::app

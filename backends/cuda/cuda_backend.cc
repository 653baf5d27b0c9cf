#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/cuda_driver_probes.h"
#include "backends/cuda/cuda_errors.h"
#include "backends/cuda/cuda_runtime_probes.h"

namespace ingero::backends {
namespace {

using namespace ingero::hal;

enum Table { kRuntime = 0, kDriver = 1 };

// The original implementation's view: every CUDA call, with its column names.
constexpr SqlView kViews[] = {
    {.name = "cuda_events",
     .select = "SELECT c.*, c.ts_ns AS timestamp_ns, c.dur_ns AS duration_ns FROM calls c\n"
               " WHERE c.api IN ('cuda_runtime', 'cuda_driver')"},
};

class CudaBackend final : public VendorBackend {
 public:
  std::string_view name() const override { return "cuda"; }

  std::vector<std::string_view> file_hints() const override {
    // libtorch_cuda and friends can carry a static runtime.
    return {"libcudart", "libcuda", "libtorch_cuda", "libtorch_global_deps"};
  }

  std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>& getenv) const override {
    std::vector<std::string> dirs;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      std::string v = getenv(var);
      if (v.empty()) continue;
      dirs.push_back(v + "/lib64");
      dirs.push_back(v + "/lib");
      dirs.push_back(v + "/lib64/stubs");
    }
    dirs.push_back("/usr/local/cuda*/lib64");
    dirs.push_back("/usr/local/cuda*/lib64/stubs");
    dirs.push_back("/usr/local/cuda*/targets/*/lib");
    dirs.push_back("/usr/lib/x86_64-linux-gnu");
    dirs.push_back("/usr/lib64");
    // pip wheels: nvidia-cuda-runtime-cu12 and friends unpack to site-packages/nvidia/*/lib.
    for (const char* root :
         {"/usr/lib/python3*/site-packages", "/usr/lib/python3/dist-packages",
          "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
          "/root/.local/lib/python3*/site-packages",
          "/root/.pyenv/versions/*/lib/python3*/site-packages",
          "/home/*/.local/lib/python3*/site-packages", "/opt/conda/lib/python3*/site-packages"})
      dirs.push_back(std::string(root) + "/nvidia/*/lib");
    for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
      std::string v = getenv(var);
      if (!v.empty()) dirs.push_back(v + "/lib/python3*/site-packages/nvidia/*/lib");
    }
    return dirs;
  }

  std::vector<LibraryMatch> match(const MappedFile& f) const override {
    // The runtime calls into the driver: the layer above it.
    if (basename_matches(f.basename, "libcudart"))
      return {{.vendor = "nvidia", .api = "cuda_runtime", .table = kRuntime, .layer = 1}};
    if (basename_matches(f.basename, "libcuda"))
      return {{.vendor = "nvidia", .api = "cuda_driver", .table = kDriver}};
    // A statically linked runtime (nvcc's default) inside a program or host object.
    if (defines_all(*f.symbols, {"cudaLaunchKernel", "cudaMalloc", "cudaStreamSynchronize"}))
      return {{.vendor = "nvidia",
               .api = "cuda_runtime",
               .table = kRuntime,
               .embedded = true,
               .layer = 1}};
    return {};
  }

  std::span<const ProbeSpec> probes(const LibraryMatch& m) const override {
    if (m.table == kDriver) return cuda::kDriverProbes;
    return cuda::kRuntimeProbes;
  }

  std::vector<std::span<const ProbeSpec>> tables() const override {
    return {cuda::kRuntimeProbes, cuda::kDriverProbes};
  }

  std::span<const SqlView> views() const override { return kViews; }

  std::optional<ErrorCode> error_code(std::string_view api, int64_t ret) const override {
    return cuda::error_code(api, ret);
  }

  void decode(const RawCall&, const ProbeSpec&, Event& ev) const override {
    if (ev.has_ret && ev.ret != 0) {
      auto code = cuda::error_code(ev.api, ev.ret);
      ev.set(Field::kErrClass, uint64_t(code ? code->cls : ErrorClass::kOther));
    }
    if (ev.has(Field::kWidth) && ev.has(Field::kHeight))
      ev.set(Field::kBytes, ev.get_or(Field::kWidth, 0) * ev.get_or(Field::kHeight, 0));
  }
};

}  // namespace

std::unique_ptr<VendorBackend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace ingero::backends

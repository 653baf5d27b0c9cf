#include "backends/hip/hip_backend.h"

#include "backends/hip/hip_probes.h"

namespace ingero::backends {
namespace {

using namespace ingero::hal;

constexpr SqlView kViews[] = {
    {.name = "hip_events",
     .select = "SELECT c.*, c.ts_ns AS timestamp_ns, c.dur_ns AS duration_ns FROM calls c\n"
               " WHERE c.api = 'hip'"},
};

class HipBackend final : public VendorBackend {
 public:
  std::string_view name() const override { return "hip"; }
  std::vector<std::string_view> file_hints() const override { return {"libamdhip64"}; }
  std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>& getenv) const override {
    std::vector<std::string> dirs = {"/opt/rocm*/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"};
    for (const char* var : {"ROCM_PATH", "HIP_PATH"}) {
      std::string v = getenv(var);
      if (!v.empty()) dirs.push_back(v + "/lib");
    }
    // pip wheels of PyTorch for ROCm carry their own runtime.
    for (const char* root :
         {"/usr/local/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages",
          "/root/.local/lib/python3*/site-packages"})
      dirs.push_back(std::string(root) + "/torch/lib");
    return dirs;
  }
  std::vector<LibraryMatch> match(const MappedFile& f) const override {
    if (basename_matches(f.basename, "libamdhip64")) return {{.vendor = "amd", .api = "hip"}};
    return {};
  }
  std::span<const ProbeSpec> probes(const LibraryMatch&) const override { return hip::kHipProbes; }
  std::vector<std::span<const ProbeSpec>> tables() const override { return {hip::kHipProbes}; }
  std::span<const SqlView> views() const override { return kViews; }
  void decode(const RawCall&, const ProbeSpec&, Event& ev) const override {
    // hipErrorOutOfMemory (and hipErrorMemoryAllocation) is 2.
    if (ev.has_ret && ev.ret != 0)
      ev.set(Field::kErrClass,
             uint64_t(ev.ret == 2 ? ErrorClass::kOutOfMemory : ErrorClass::kOther));
  }
};

}  // namespace

std::unique_ptr<VendorBackend> make_hip_backend() { return std::make_unique<HipBackend>(); }

}  // namespace ingero::backends

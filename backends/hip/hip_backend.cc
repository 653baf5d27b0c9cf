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

constexpr ErrorClass kOom = ErrorClass::kOutOfMemory, kNotReady = ErrorClass::kNotReady,
                     kNoDevice = ErrorClass::kNoDevice, kFault = ErrorClass::kDeviceFault,
                     kInvalid = ErrorClass::kInvalid, kOther = ErrorClass::kOther;

// hipError_t, sorted by code (hal/error_codes.h; the classes as CUDA's:
// backends/cuda/cuda_errors.cc).
constexpr ErrorCodeEntry kErrors[] = {
    {1, "hipErrorInvalidValue", kInvalid},
    {2, "hipErrorOutOfMemory", kOom},
    {3, "hipErrorNotInitialized", kNoDevice},
    {4, "hipErrorDeinitialized", kOther},
    {9, "hipErrorInvalidConfiguration", kInvalid},
    {12, "hipErrorInvalidPitchValue", kInvalid},
    {13, "hipErrorInvalidSymbol", kInvalid},
    {17, "hipErrorInvalidDevicePointer", kInvalid},
    {21, "hipErrorInvalidMemcpyDirection", kInvalid},
    {35, "hipErrorInsufficientDriver", kNoDevice},
    {52, "hipErrorMissingConfiguration", kInvalid},
    {53, "hipErrorPriorLaunchFailure", kFault},
    {98, "hipErrorInvalidDeviceFunction", kInvalid},
    {100, "hipErrorNoDevice", kNoDevice},
    // Not CUDA's class: libamdhip64 answers every call (hipMalloc, hipDeviceSynchronize, which
    // takes no argument) with it when no GPU can be used, as in a container without /dev/kfd.
    // Asked for a device it cannot see, it is what HIP_VISIBLE_DEVICES hid: no device either.
    {101, "hipErrorInvalidDevice", kNoDevice},
    {200, "hipErrorInvalidImage", kInvalid},
    {201, "hipErrorInvalidContext", kInvalid},
    {209, "hipErrorNoBinaryForGpu", kNoDevice},
    {214, "hipErrorECCNotCorrectable", kFault},
    {215, "hipErrorUnsupportedLimit", kInvalid},
    {217, "hipErrorPeerAccessUnsupported", kInvalid},
    {218, "hipErrorInvalidKernelFile", kNoDevice},
    {304, "hipErrorOperatingSystem", kOther},
    {400, "hipErrorInvalidHandle", kInvalid},
    {401, "hipErrorIllegalState", kInvalid},
    {500, "hipErrorNotFound", kInvalid},
    {600, "hipErrorNotReady", kNotReady},
    {700, "hipErrorIllegalAddress", kFault},
    {701, "hipErrorLaunchOutOfResources", kInvalid},
    {702, "hipErrorLaunchTimeOut", kFault},
    {704, "hipErrorPeerAccessAlreadyEnabled", kInvalid},
    {705, "hipErrorPeerAccessNotEnabled", kInvalid},
    {708, "hipErrorSetOnActiveProcess", kInvalid},
    {709, "hipErrorContextIsDestroyed", kInvalid},
    {710, "hipErrorAssert", kFault},
    {719, "hipErrorLaunchFailure", kFault},
    {720, "hipErrorCooperativeLaunchTooLarge", kInvalid},
    {801, "hipErrorNotSupported", kInvalid},
    {900, "hipErrorStreamCaptureUnsupported", kInvalid},
    {901, "hipErrorStreamCaptureInvalidated", kInvalid},
    {999, "hipErrorUnknown", kOther},
    {1052, "hipErrorRuntimeMemory", kOther},
    {1053, "hipErrorRuntimeOther", kOther},
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
    // pip wheels of PyTorch for ROCm carry their own runtime, in any environment the CUDA
    // backend looks in for its wheels (a virtualenv or conda's was not looked in).
    for (const char* root :
         {"/usr/lib/python3*/site-packages", "/usr/lib/python3/dist-packages",
          "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
          "/root/.local/lib/python3*/site-packages",
          "/root/.pyenv/versions/*/lib/python3*/site-packages",
          "/home/*/.local/lib/python3*/site-packages", "/opt/conda/lib/python3*/site-packages"})
      dirs.push_back(std::string(root) + "/torch/lib");
    for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
      std::string v = getenv(var);
      if (!v.empty()) dirs.push_back(v + "/lib/python3*/site-packages/torch/lib");
    }
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
    if (ev.has_ret && ev.ret != 0) {
      auto code = find_error_code(kErrors, ev.ret);
      ev.set(Field::kErrClass, uint64_t(code ? code->cls : ErrorClass::kOther));
    }
  }
  std::optional<ErrorCode> error_code(std::string_view api, int64_t ret) const override {
    if (api != "hip") return std::nullopt;
    return find_error_code(kErrors, ret);
  }
};

}  // namespace

std::unique_ptr<VendorBackend> make_hip_backend() { return std::make_unique<HipBackend>(); }

}  // namespace ingero::backends

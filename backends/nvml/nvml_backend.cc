#include "backends/nvml/nvml_backend.h"

#include <cstdlib>

#include "backends/nvml/nvml_child.h"
#include "backends/nvml/nvml_library.h"
#include "backends/nvml/nvml_sampler.h"
#include "hal/sampler_process.h"

namespace ingero::backends {
namespace {

using namespace ingero::hal;

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

class NvmlBackend final : public VendorBackend {
 public:
  NvmlBackend(std::string library, std::string sampler_exe)
      : library_(std::move(library)), sampler_exe_(std::move(sampler_exe)) {}
  std::string_view name() const override { return "nvml"; }
  std::vector<std::string_view> file_hints() const override { return {}; }
  std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>&) const override {
    return {};
  }
  std::vector<LibraryMatch> match(const MappedFile&) const override { return {}; }
  std::span<const ProbeSpec> probes(const LibraryMatch&) const override { return {}; }
  std::vector<std::span<const ProbeSpec>> tables() const override { return {}; }
  void decode(const RawCall&, const ProbeSpec&, Event&) const override {}

  Result<std::unique_ptr<DeviceSampler>> open_device_sampler(
      const DeviceSamplerOptions& opts) const override {
    DeviceSamplerOptions o = opts;
    if (o.nvml_library == DeviceSamplerOptions{}.nvml_library) o.nvml_library = library_;
    return open(o);
  }

  // Whether NVML is there and what it gives. Never a failure: without NVML the GPU side of
  // the steps is a lower bound, and tracing loses nothing else.
  std::vector<CheckLine> check(const std::string&) const override {
    DeviceSamplerOptions o;
    o.nvml_library = library_;
    auto s = open(o);
    if (!s)
      return {{"nvml", CheckLine::Status::kOptional, "unavailable",
               s.error().message +
                   ": GPU busy is not measured; explain gives GPU idle as a lower bound from the "
                   "syncs",
               "install the NVIDIA driver (libnvidia-ml.so.1) to measure GPU utilisation"}};
    const DeviceSamplerInfo& i = (*s)->info();
    if (i.devices.empty())  // every device refused its handle, or none is there
      return {{"nvml", CheckLine::Status::kOptional, "0 devices",
               i.library +
                   "; no device answered: GPU busy is not measured; explain gives GPU idle as a "
                   "lower bound from the syncs",
               "see `nvidia-smi`: the driver sees no usable GPU"}};
    std::string detail = i.library + "; " + joined(i.devices);
    detail += "; gives " + (i.figures.empty() ? std::string("nothing") : joined(i.figures));
    if (!i.absent.empty()) detail += "; absent: " + joined(i.absent);
    bool per_process = false;
    for (const auto& f : i.figures) per_process |= f.rfind("per-process utilisation", 0) == 0;
    return {{"nvml", per_process ? CheckLine::Status::kPass : CheckLine::Status::kOptional,
             std::to_string(i.devices.size()) + " device" + (i.devices.size() == 1 ? "" : "s"),
             detail,
             per_process ? "" : "per-process utilisation is absent: GPU busy is per device"}};
  }

 private:
  Result<std::unique_ptr<DeviceSampler>> open(const DeviceSamplerOptions& o) const {
    if (sampler_exe_.empty()) {
      auto s = nvml::NvmlSampler::open(o);
      if (!s) return s.error();
      return std::unique_ptr<DeviceSampler>(std::move(*s));
    }
    SamplerProcessOptions p;
    p.argv = nvml::sampler_argv(sampler_exe_, o.nvml_library, o.poll_ns);
    p.source = "nvml";
    p.library = o.nvml_library;
    p.open_call = "nvmlInit_v2";
    p.poll_ns = o.poll_ns;
    // The child gives nvmlInit_v2 up after its own limit and says so; this is the backstop.
    int64_t init_ms = nvml::NvmlLibrary::kInitLimitMs;
    if (const char* v = getenv("INGERO_NVML_INIT_LIMIT_MS"); v && atoi(v) > 0) init_ms = atoi(v);
    p.open_limit_ns = (init_ms + 5'000) * 1'000'000;
    if (const char* v = getenv("INGERO_NVML_POLL_LIMIT_MS"); v && atoi(v) > 0)
      p.poll_limit_ns = int64_t(atoi(v)) * 1'000'000;
    return open_sampler_process(p);
  }

  std::string library_;
  std::string sampler_exe_;
};

}  // namespace

std::unique_ptr<VendorBackend> make_nvml_backend(std::string library, std::string sampler_exe) {
  return std::make_unique<NvmlBackend>(std::move(library), std::move(sampler_exe));
}

}  // namespace ingero::backends

#include "backends/nvml/nvml_backend.h"

#include "backends/nvml/nvml_sampler.h"

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
  explicit NvmlBackend(std::string library) : library_(std::move(library)) {}
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
    auto s = nvml::NvmlSampler::open(o);
    if (!s) return s.error();
    return std::unique_ptr<DeviceSampler>(std::move(*s));
  }

  // Whether NVML is there and what it gives. Never a failure: without NVML the GPU side of
  // the steps is a lower bound, and tracing loses nothing else.
  std::vector<CheckLine> check(const std::string&) const override {
    DeviceSamplerOptions o;
    o.nvml_library = library_;
    auto s = nvml::NvmlSampler::open(o);
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
  std::string library_;
};

}  // namespace

std::unique_ptr<VendorBackend> make_nvml_backend(std::string library) {
  return std::make_unique<NvmlBackend>(std::move(library));
}

}  // namespace ingero::backends

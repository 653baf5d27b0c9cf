// The vendor backend contract.
//
// A backend is data plus two small pure functions. probe/ does all I/O (discovery, ELF
// parsing, attaching, reading the ring buffer); a backend only answers:
//   * which library files are its own, and what flavour each is      match()
//   * which functions to trace in that flavour                        probes()
//   * how a captured call becomes Event fields beyond the FieldRefs   decode()
// plus hints that keep discovery cheap (file_hints, install_dirs).
// Optionally (hal/side_channel.h), a side channel beside the probes: device counters polled
// from sysfs, names for its device asynchronous events, its lines in `ingero check`, and SQL
// views over the trace file; and (hal/device_sampler.h) a device sampler: what the GPU itself
// says of its utilisation, per device and per process. The defaults offer none.
//
// Backends depend on hal/ only and never on each other. Registration is explicit: the app
// builds a BackendRegistry and adds each backend once; tests build their own registries.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hal/call_record.h"
#include "hal/device_sampler.h"
#include "hal/elf_symbols.h"
#include "hal/error_codes.h"
#include "hal/event.h"
#include "hal/probe_spec.h"
#include "hal/side_channel.h"

namespace ingero::hal {

// What match() sees of one file. Pure data: probe/ has already parsed the ELF.
struct MappedFile {
  std::string path;                      // openable path in our mount namespace
  std::string display_path;              // the path as the process or filesystem names it
  std::string_view basename;             // of display_path
  const SymbolIndex* symbols = nullptr;  // never null when match() is called
  bool is_main_executable = false;       // the program a process runs (static runtimes)
};

// One flavour of a backend found in one file. vendor/api must point at static storage.
struct LibraryMatch {
  std::string_view vendor;  // "nvidia", "amd", "rdma", ...
  std::string_view api;     // "cuda_runtime", "cuda_driver", "hip", "nccl", "rccl", ...
  int table = 0;            // backend-private: which probe table
  bool embedded = false;    // found by symbol inside a host object (static copy)
  // Where the library sits among its vendor's: a launch through a higher layer makes one through
  // a lower (a runtime's cudaLaunchKernel enters the driver's cuLaunchKernel), never the other
  // way (capture/launch_nesting.h). 0: the lowest, or a library alone.
  int layer = 0;
};

// A captured call as decode() sees it.
class RawCall {
 public:
  explicit RawCall(const CallRecord& rec) : rec_(rec) {}
  const CallRecord& record() const { return rec_; }
  // The value an ArgRef names, or nullopt when its capture faulted or is out of range. Inline:
  // the decoder asks it for every field of every call (~6% of the tracer's CPU out of line).
  std::optional<uint64_t> value(const ArgRef& ref) const {
    switch (ref.src) {
      case ArgRef::Src::kReg:
        if (ref.index >= rec_.hdr.nregs) return std::nullopt;
        return extract(rec_.regs[ref.index], ref);
      case ArgRef::Src::kStack:
        if (ref.index >= rec_.hdr.nstack || (rec_.hdr.flags & INGERO_CALL_STACK_READ_FAULT))
          return std::nullopt;
        return extract(rec_.stack[ref.index], ref);
      case ArgRef::Src::kConst:
        return ref.value;
      default:
        return buffer_value(ref);
    }
  }
  std::span<const uint8_t> entry_bytes() const;
  std::span<const uint8_t> return_bytes() const;
  uint64_t reg(int i) const;
  uint64_t ret() const;

 private:
  static uint64_t extract(uint64_t raw, const ArgRef& ref) {
    raw >>= ref.shift;
    if (ref.width < 8) raw &= (uint64_t{1} << (ref.width * 8)) - 1;
    return raw;
  }
  // value() of the rarer sources: the return value and the entry and return buffers.
  std::optional<uint64_t> buffer_value(const ArgRef& ref) const;
  const CallRecord& rec_;
};

class VendorBackend {
 public:
  virtual ~VendorBackend() = default;
  virtual std::string_view name() const = 0;  // "cuda", "hip", "nccl", "rdma"
  // Basename prefixes worth opening ("libcudart", "libtorch_cuda"). Files outside these
  // (and outside main executables) are never parsed for this backend.
  virtual std::vector<std::string_view> file_hints() const = 0;
  // Directory globs where the vendor installs libraries, from the environment. Pure.
  virtual std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>& getenv) const = 0;
  virtual std::vector<LibraryMatch> match(const MappedFile& file) const = 0;
  virtual std::span<const ProbeSpec> probes(const LibraryMatch& match) const = 0;
  // Every probe table the backend has, for symbol filtering and coverage reports.
  virtual std::vector<std::span<const ProbeSpec>> tables() const = 0;
  // Fills what FieldRefs cannot; the generic fields are already set. Pure.
  virtual void decode(const RawCall& call, const ProbeSpec& spec, Event& ev) const = 0;

  // --- optional side channel --------------------------------------------------------------
  // Reads the device counters under SYSFS_ROOT (a directory laid out as /sys; tests point it
  // at a fake tree). The tracer calls it every 5 s; it may do I/O but never blocks for long.
  // A host without the devices returns an empty list: not an error.
  virtual std::vector<DevicePortSample> poll_counters(const std::string& /*sysfs_root*/) const {
    return {};
  }
  // The name of a device asynchronous event (an Event of kind kRdmaAsyncEvent whose kRdmaEvent
  // field holds TYPE) captured from API; "" when API is not this backend's. Pure.
  virtual std::string_view device_event_name(std::string_view /*api*/, uint64_t /*type*/) const {
    return {};
  }
  // The name and class of return code RET of a call of API ("cuda_runtime"); nullopt when API
  // is not this backend's or the code is not in its table (hal/error_codes.h). Pure.
  virtual std::optional<ErrorCode> error_code(std::string_view /*api*/, int64_t /*ret*/) const {
    return std::nullopt;
  }
  // What `ingero check` says of the side channel on the host whose /sys is SYSFS_ROOT: one
  // line per device class, e.g. "infiniband: 1 devices, 2 ports". None by default.
  virtual std::vector<CheckLine> check(const std::string& /*sysfs_root*/) const { return {}; }
  // Views this backend adds to every trace file (hal/side_channel.h SqlView). Pure.
  virtual std::span<const SqlView> views() const { return {}; }
  // Its device sampler (hal/device_sampler.h) on this host: nullptr when the backend has none
  // (the default); an Error saying why when it has one but this host cannot give it ("no
  // amdgpu card under /sys/class/drm", "libnvidia-ml.so.1 not found", "nvmlInit_v2 failed:
  // Driver Not Loaded"): not a failure of the trace, which goes on without device figures.
  virtual Result<std::unique_ptr<DeviceSampler>> open_device_sampler(
      const DeviceSamplerOptions& /*opts*/) const {
    return std::unique_ptr<DeviceSampler>();
  }
};

class BackendRegistry {
 public:
  void add(std::unique_ptr<VendorBackend> backend);
  const VendorBackend* find(std::string_view name) const;
  std::vector<const VendorBackend*> all() const;
  // Backends named in a comma list ("cuda,hip"); unknown names are an Error listing the
  // known ones. An empty list selects all.
  Result<std::vector<const VendorBackend*>> select(std::string_view names) const;
  // Every backend's views, in registration order. They point at static storage: they
  // outlive the registry.
  std::vector<SqlView> views() const;
  // The first non-empty device_event_name() among the backends; "" when none knows it.
  std::string_view device_event_name(std::string_view api, uint64_t type) const;
  // The first error_code() among the backends that knows it.
  std::optional<ErrorCode> error_code(std::string_view api, int64_t ret) const;

 private:
  std::vector<std::unique_ptr<VendorBackend>> backends_;
};

// Shared helpers for backends.
bool basename_matches(std::string_view basename,
                      std::string_view prefix);  // "libcudart" ~ "libcudart.so.13"
// True if the file defines (dynsym or symtab) every name in `names`.
bool defines_all(const SymbolIndex& symbols, std::initializer_list<std::string_view> names);

}  // namespace ingero::hal

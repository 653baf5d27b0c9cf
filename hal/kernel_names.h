// Kernel names from the host side: which kernel a launch's function pointer or handle is.
//
// A launch carries Field::kFunc: the host stub's address (cudaLaunchKernel from a program built
// by CUDA 12, hipLaunchKernel) or a handle (cuLaunchKernel's CUfunction or CUkernel, the
// cudaKernel_t a CUDA 13 stub passes to cudaLaunchKernel, hipModuleLaunchKernel's
// hipFunction_t). Names come from low-rate probes, specs of kind EventKind::kKernelName that
// fire once per kernel or module (the registration of a module's kernels, a look-up by name or
// by handle), and, for a stub registered before the trace began, from the ELF symbol at its
// address. Capture reads each name in user space (capture/kernel_namer.h), never on the launch
// path, and hands it to the sinks once per (process, function).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ingero::hal {

enum class KernelNameSource : uint8_t {
  kNone = 0,
  kRegistration,  // the runtime registering a module's kernels: __cudaRegisterFunction
  kDriverLookup,  // a look-up by name or by handle: cuModuleGetFunction, cuFuncGetName, ...
  kElfSymbol,     // the symbol at the host stub's address in the executable or library
};
// "registration", "driver_lookup", "elf_symbol" ("" for kNone): kernel_names.source.
std::string_view kernel_name_source_name(KernelNameSource s);
KernelNameSource kernel_name_source_from(std::string_view name);  // kNone when unknown

// What a name source's probe captured, before user space reads the name.
struct NameCapture {
  uint32_t pid = 0;
  uint64_t ts_ns = 0;                 // CLOCK_MONOTONIC, the call's start
  uint64_t func = 0;                  // the key launches carry (stub address or handle)
  std::optional<uint64_t> name_addr;  // where the name's bytes are, in the process
  std::optional<uint64_t> alias_of;   // `func` takes this key's name (a handle of a stub)
  KernelNameSource source = KernelNameSource::kNone;
};

// A kernel named for one process: what sinks receive, once per (pid, func).
struct KernelName {
  uint32_t pid = 0;
  uint64_t func = 0;
  std::string name;  // demangled ("void scale<float>(float*, float, int)")
  std::string raw;   // as the binary spells it ("_Z5scaleIfEvPT_S0_i")
  KernelNameSource source = KernelNameSource::kNone;
  uint64_t ts_ns = 0;  // CLOCK_MONOTONIC: when it became known
};

// A demangled name without its return type and parameter list, for display and labels:
// "void scale<float>(float*, float, int)" -> "scale<float>", "ns::step(double*, int)" ->
// "ns::step", "mul" -> "mul". Template arguments stay: they tell instantiations apart.
std::string short_kernel_name(std::string_view name);

}  // namespace ingero::hal

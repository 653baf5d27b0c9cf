#include "hal/demangle.h"

#include <libiberty/demangle.h>

#include <csetjmp>

namespace ingero::hal {
namespace {

// Where the demangler's pieces go; past the bound it is left at once (longjmp): the demangler
// calls back from C frames that allocate nothing (the callback interface exists for that).
struct Bounded {
  std::string out;
  std::jmp_buf past;
};

void append(const char* s, size_t n, void* opaque) {
  auto* b = static_cast<Bounded*>(opaque);
  if (b->out.size() + n > kMaxDemangled) std::longjmp(b->past, 1);
  b->out.append(s, n);
}

// The demangled name, or "" where it is not a C++ name or would pass the bound. The options
// are __cxa_demangle's (libstdc++ carries the same demangler).
std::string demangle_bounded(const char* mangled) {
  Bounded b;
  if (setjmp(b.past) != 0) return "";
  if (!cplus_demangle_v3_callback(mangled, DMGL_PARAMS | DMGL_TYPES, append, &b)) return "";
  return std::move(b.out);
}

}  // namespace

std::string demangle(const std::string& sym) {
  // "name+0x1f" and "name.isra.0" (how stacks spell them) keep their suffixes.
  size_t plus = sym.rfind("+0x");
  std::string name = sym.substr(0, plus), off = plus == std::string::npos ? "" : sym.substr(plus);
  if (name.rfind("_Z", 0) != 0) return sym;
  size_t dot = name.find('.');
  std::string suffix = dot == std::string::npos ? "" : name.substr(dot);
  if (dot != std::string::npos) name.resize(dot);
  std::string d = demangle_bounded(name.c_str());
  return d.empty() ? sym : d + suffix + off;
}

bool generated_launch_frame(std::string_view function, std::string_view file) {
  if (!file.empty() && (system_library(file) || file.ends_with(".stub.c"))) return true;
  for (std::string_view p :
       {"__device_stub__", "__wrapper__device_stub_", "__cudaLaunchKernel", "__hipLaunchKernel"})
    if (function.starts_with(p)) return true;
  return false;
}

bool system_library(std::string_view path) {
  static constexpr std::string_view kDirs[] = {"/lib/",       "/lib64/",         "/usr/lib/",
                                               "/usr/lib64/", "/usr/local/cuda", "/opt/rocm"};
  for (std::string_view d : kDirs)
    if (path.starts_with(d)) return true;
  // The interpreter: "python3.11", "python3.12d", "libpython3.11.so.1.0" (not "python3.11-foo").
  std::string_view base = path.substr(path.rfind('/') + 1);
  if (base.starts_with("lib")) base.remove_prefix(3);
  if (!base.starts_with("python3.")) return false;
  base.remove_prefix(8);
  size_t digits = 0;
  while (digits < base.size() && base[digits] >= '0' && base[digits] <= '9') ++digits;
  base.remove_prefix(digits);
  return digits > 0 && (base.empty() || base == "d" || base.starts_with(".so"));
}

}  // namespace ingero::hal

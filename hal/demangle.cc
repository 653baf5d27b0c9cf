#include "hal/demangle.h"

#include <cxxabi.h>

#include <cstdlib>

namespace ingero::hal {

std::string demangle(const std::string& sym) {
  // "name+0x1f" and "name.isra.0" (how stacks spell them) keep their suffixes.
  size_t plus = sym.rfind("+0x");
  std::string name = sym.substr(0, plus), off = plus == std::string::npos ? "" : sym.substr(plus);
  if (name.rfind("_Z", 0) != 0) return sym;
  size_t dot = name.find('.');
  std::string suffix = dot == std::string::npos ? "" : name.substr(dot);
  if (dot != std::string::npos) name.resize(dot);
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? std::string(d) + suffix + off : sym;
  std::free(d);
  return out;
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

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
  return false;
}

}  // namespace ingero::hal

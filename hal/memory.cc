#include "hal/memory.h"

#include <algorithm>
#include <fstream>

namespace ingero::hal {

MemoryInfo read_memory_info(const std::string& path) {
  MemoryInfo m;
  std::ifstream in(path);
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") m.total = kib << 10;
    if (key == "MemAvailable:") m.available = kib << 10;
  }
  return m;
}

size_t memory_share(const MemoryInfo& m, size_t lo, size_t hi) {
  uint64_t share = std::min(m.total / 8, m.available / 4);
  return size_t(std::clamp<uint64_t>(share, lo, std::max(lo, hi)));
}

}  // namespace ingero::hal

// The machine's memory, for the analyses that size their in-memory copies by it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ingero::hal {

struct MemoryInfo {
  uint64_t total = 0, available = 0;  // bytes; 0 when unknown
};

// MemTotal and MemAvailable from /proc/meminfo (or `path`); zeros when it cannot be read.
MemoryInfo read_memory_info(const std::string& path = "/proc/meminfo");

// What one in-memory copy of an analysis may take: an eighth of the machine's memory or a
// quarter of what is available now, whichever is less, at least `lo` and at most `hi` (`lo`
// when the memory is unknown).
size_t memory_share(const MemoryInfo& m, size_t lo, size_t hi);

}  // namespace ingero::hal

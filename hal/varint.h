// LEB128 varints and zigzag signed integers: the compact integers of the call cache, the
// quantile sketches and archived rows. Each format's reader checks its own bounds.
#pragma once

#include <cstdint>

namespace ingero::hal {

// Appends `x` as an unsigned LEB128 varint to `out` (a std::string or std::vector<uint8_t>).
template <class Bytes>
inline void put_varint(Bytes& out, uint64_t x) {
  using Byte = typename Bytes::value_type;
  while (x >= 0x80) {
    out.push_back(Byte(uint8_t(x) | 0x80));
    x >>= 7;
  }
  out.push_back(Byte(uint8_t(x)));
}

// Small magnitudes of either sign to small unsigned values, and back.
inline uint64_t zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
inline int64_t unzigzag(uint64_t u) { return int64_t(u >> 1) ^ -int64_t(u & 1); }

}  // namespace ingero::hal

// LEB128 varints and zigzag signed integers: the compact integers of the call cache, the
// quantile sketches and archived rows. Each format's reader checks its own bounds.
#pragma once

#include <cstdint>
#include <string_view>

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

// Reads a varint from the front of `in` and advances past it: false for one cut short, one of
// more than 64 bits, or an overlong one (a last byte of 0 after the first), so that every value
// has one encoding. For formats read from bytes that may be damaged; the column blocks' and the
// call cache's hot readers have their own.
inline bool get_varint(std::string_view& in, uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    auto c = uint8_t(in.front());
    in.remove_prefix(1);
    if (shift == 63 && c > 1) return false;
    out |= uint64_t(c & 0x7f) << shift;
    if (!(c & 0x80)) return c != 0 || shift == 0;
  }
  return false;
}

// Small magnitudes of either sign to small unsigned values, and back.
inline uint64_t zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
inline int64_t unzigzag(uint64_t u) { return int64_t(u >> 1) ^ -int64_t(u & 1); }

}  // namespace ingero::hal

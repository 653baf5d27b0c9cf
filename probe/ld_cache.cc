#include "probe/ld_cache.h"

#include <cstdint>
#include <cstring>

namespace ingero::hal {

Result<std::vector<LdCacheEntry>> parse_ld_cache(std::string_view bytes) {
  constexpr std::string_view kMagic = "glibc-ld.so.cache1.1";
  constexpr size_t kHeader = 48, kEntry = 24;
  // Old-format caches ("ld.so-1.7.0") carry the new format after their own entries.
  size_t base = bytes.find(kMagic);
  if (base == std::string_view::npos) return make_error("not a glibc ld.so.cache (no magic)");
  std::string_view b = bytes.substr(base);
  if (b.size() < kHeader) return make_error("ld.so.cache truncated in header");
  uint32_t nlibs = 0;
  std::memcpy(&nlibs, b.data() + 20, 4);
  if (nlibs > (b.size() - kHeader) / kEntry) return make_error("ld.so.cache truncated in entries");
  auto str_at = [&](uint32_t off) -> std::string_view {
    if (off >= b.size()) return {};
    std::string_view s = b.substr(off);
    size_t end = s.find('\0');
    return end == std::string_view::npos ? std::string_view() : s.substr(0, end);
  };
  std::vector<LdCacheEntry> out;
  out.reserve(nlibs);
  for (uint32_t i = 0; i < nlibs; ++i) {
    const char* e = b.data() + kHeader + size_t(i) * kEntry;
    uint32_t key = 0, value = 0;
    std::memcpy(&key, e + 4, 4);
    std::memcpy(&value, e + 8, 4);
    auto k = str_at(key), v = str_at(value);
    if (k.empty() || v.empty()) continue;
    out.push_back({std::string(k), std::string(v)});
  }
  return out;
}

}  // namespace ingero::hal

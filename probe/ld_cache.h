// Parser for the dynamic loader's cache (/etc/ld.so.cache, "glibc-ld.so.cache1.1" format).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hal/result.h"

namespace ingero::hal {

struct LdCacheEntry {
  std::string soname;  // "libcudart.so.13"
  std::string path;    // "/usr/local/cuda-13.0/lib/libcudart.so.13"
};

// Parses the bytes of an ld.so.cache. A foreign or truncated file is an Error; entries whose
// string offsets fall outside the file are skipped.
Result<std::vector<LdCacheEntry>> parse_ld_cache(std::string_view bytes);

}  // namespace ingero::hal

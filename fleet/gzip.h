// gzip (RFC 1952) compression of request bodies, with zlib. ClickHouse decompresses a body
// sent with "Content-Encoding: gzip" on every version we support (18.16 and current).
#pragma once

#include <string>
#include <string_view>

#include "hal/result.h"

namespace ingero::fleet {

// Level 1: on a 2-core host the shipper should cost little CPU; TSV of trace rows still
// shrinks 8-12x (docs/fleet.md).
ingero::Result<std::string> gzip_compress(std::string_view data, int level = 1);
// For tests and diagnostics.
ingero::Result<std::string> gzip_decompress(std::string_view data);

}  // namespace ingero::fleet

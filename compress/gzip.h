// gzip (RFC 1952) with zlib: the one implementation for everything ingero compresses as gzip.
// The ClickHouse client's request bodies (fleet/, "Content-Encoding: gzip", which ClickHouse
// decodes on every version we support), OTLP/HTTP request bodies when
// OTEL_EXPORTER_OTLP_COMPRESSION is gzip (serve/otlp), and pprof profiles, gzip-compressed
// protobuf by definition (serve/export). It sits below fleet/ and serve/, which do not depend
// on each other, and depends on nothing of ingero but Result.
#pragma once

#include <string>
#include <string_view>

#include "hal/result.h"

namespace ingero::compress {

// One gzip member of `data`. `level` 1..9 (6 is zlib's default; the ClickHouse shipper uses 1,
// docs/fleet.md). An error only when zlib refuses (out of memory).
ingero::Result<std::string> gzip(std::string_view data, int level = 6);
// The whole member decoded; a truncated or corrupt input is an error, never a shorter output.
ingero::Result<std::string> gunzip(std::string_view data);

}  // namespace ingero::compress

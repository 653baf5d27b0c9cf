// gzip (RFC 1952) with zlib, for the formats serve/ writes: pprof profiles are gzip-compressed
// protobuf by definition, and OTLP/HTTP request bodies are when OTEL_EXPORTER_OTLP_COMPRESSION
// is gzip. (fleet/gzip.h is the ClickHouse shipper's own; fleet/ and serve/ do not depend on
// each other.)
#pragma once

#include <string>
#include <string_view>

#include "hal/result.h"

namespace ingero::serve {

// `level` 1..9; 6 is zlib's default.
ingero::Result<std::string> gzip(std::string_view data, int level = 6);
// The whole member decoded; a truncated or corrupt input is an error, never a shorter output.
ingero::Result<std::string> gunzip(std::string_view data);

}  // namespace ingero::serve

// Text that must be UTF-8 on the wire (Prometheus label values, protobuf strings: OTLP and
// pprof) from names any process sets: a comm, an executable's or a cgroup's name may hold any
// bytes. A Prometheus scrape with one invalid label value is refused whole, and a protobuf
// string with invalid UTF-8 makes a message strict decoders reject.
#pragma once

#include <string>
#include <string_view>

namespace ingero::hal {

// Whether s is well-formed UTF-8 (Unicode 15, table 3-7: no overlong forms, no surrogates,
// nothing past U+10FFFF).
bool is_utf8(std::string_view s);

// s, with each byte that does not belong to a well-formed sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view s);

}  // namespace ingero::hal

// Sizes given on the command line and in config files: "2GiB", "500MiB", "64KiB" (binary),
// "1GB", "500MB" (decimal), "4096" (bytes).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace ingero::app {

// The size in bytes; 0 when malformed or not positive.
uint64_t parse_size(const std::string& text);
// A flag's check that its value is a size parse_size() reads ("expected a size: 500MiB, 1GiB").
CLI::Validator size_validator();

}  // namespace ingero::app

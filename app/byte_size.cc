#include "app/byte_size.h"

#include <utility>

namespace ingero::app {

uint64_t parse_size(const std::string& text) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (...) {
    return 0;
  }
  std::string unit = text.substr(end);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},          {"B", 1},
      {"KiB", 1024.0},  {"MiB", 1048576.0},
      {"GiB", 1 << 30}, {"TiB", 1099511627776.0},
      {"KB", 1e3},      {"MB", 1e6},
      {"GB", 1e9},      {"TB", 1e12}};
  for (const auto& [u, mult] : kUnits)
    if (unit == u) return v > 0 ? uint64_t(v * mult) : 0;
  return 0;
}

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& v) { return parse_size(v) > 0 ? "" : "expected a size: 500MiB, 1GiB"; },
      "SIZE");
}

}  // namespace ingero::app

// One resolved frame of a captured call stack, innermost first: what capture produces and
// every sink stores or ships.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ingero::hal {

struct StackFrame {
  bool python = false;
  std::string module;  // native: the mapped file
  std::optional<uint64_t> module_offset;
  std::string build_id, function, file;
  int64_t line = 0;  // 0 = unknown
};

}  // namespace ingero::hal

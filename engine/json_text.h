// JSON text of values that may hold a traced system's names (a comm, a library path, a device or
// kernel name: any bytes). nlohmann::json::dump throws on invalid UTF-8; here such bytes are
// written as U+FFFD, so that a name can never abort a command or the tracer's session end.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ingero::engine {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ingero::engine

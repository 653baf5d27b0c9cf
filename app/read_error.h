// How a command says that reading a trace failed: "reading PATH: ERROR". Errors from the store
// already begin with the file they come from, as SQLite names it (an absolute path): the path
// is then not said twice.
#pragma once

#include <filesystem>
#include <string>

namespace ingero::app {

inline std::string reading_error(const std::string& path, const std::string& error) {
  std::error_code ec;
  std::string full = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (error.starts_with(path + ": ") || (!ec && error.starts_with(full + ": "))) return error;
  return "reading " + path + ": " + error;
}

}  // namespace ingero::app

// How a command says that reading a trace failed: "reading PATH: ERROR". Errors from the store
// already name the file they come from, as SQLite names it (an absolute path): the path is then
// not said twice.
#pragma once

#include <filesystem>
#include <string>

namespace ingero::app {

// Whether `error` already names the file `path`, as given or as SQLite names it.
inline bool names_file(const std::string& path, const std::string& error) {
  std::error_code ec;
  std::string full = std::filesystem::absolute(path, ec).lexically_normal().string();
  return error.find(path + ": ") != std::string::npos ||
         (!ec && error.find(full + ": ") != std::string::npos);
}

// "PATH: ERROR", or ERROR where it names the file already.
inline std::string file_error(const std::string& path, const std::string& error) {
  return names_file(path, error) ? error : path + ": " + error;
}

inline std::string reading_error(const std::string& path, const std::string& error) {
  return names_file(path, error) ? error : "reading " + path + ": " + error;
}

}  // namespace ingero::app

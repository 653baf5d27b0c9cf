// The stand-in libnvidia-ml.so.1 (tests/fake_vendor/fake_nvml.c) from a unit test: its two
// builds, and its script (read at nvmlInit_v2, through FAKE_NVML_SCRIPT, which a sampler's own
// process inherits).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::test {

// Without the optional functions / with every one.
inline const std::string kFakeNvmlPartial =
    std::string(INGERO_FAKE_NVML_DIR) + "/libnvidia-ml.so.1";
inline const std::string kFakeNvmlFull =
    std::string(INGERO_FAKE_NVML_FULL_DIR) + "/libnvidia-ml.so.1";

inline void put_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// Writes the script and points the stand-in at it.
inline void fake_nvml_script(const std::string& text) {
  std::string path = temp_path("nvml.script");
  put_file(path, text);
  setenv("FAKE_NVML_SCRIPT", path.c_str(), 1);
}

}  // namespace ingero::test

// The real H100 traces of tests/fixtures/h100 (ground truth in their README), decompressed under
// the test run's temporary directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::test {

// NAME (starve, emptycache, resnet-clean, resnet-contended, nccl-1rank) as COPY-NAME.db: once
// per run, the same file for every test that reads it; `fresh`: decompressed again, for a test
// that changes it.
inline std::string h100_fixture(const std::string& name, const std::string& copy = "h100",
                                bool fresh = false) {
  std::string out = temp_path(copy + "-" + name + ".db");
  if (fresh || !std::filesystem::exists(out)) {
    EXPECT_TRUE(unpack_fixture("h100/" + name, out)) << name;
  }
  return out;
}

}  // namespace ingero::test

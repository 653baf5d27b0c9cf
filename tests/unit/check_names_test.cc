// Anyone's bytes in `check`'s lines stay on their line: any local user may drop a file in a
// folder check looks in (~/.local/.../site-packages/nvidia/*/lib, CUDA_HOME), and a library
// named "libcudart.so.1\n  [pass]     privileges   root (forged)" printed a verdict of its own
// in root's output (a hostile tester's find).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "test_paths.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(CheckNames, ANewlineInALibrarysNameForgesNoLine) {
  const std::string home = temp_path("nl-cuda");
  std::filesystem::create_directories(home + "/lib64");
  const std::string forged = "\n  [pass]     privileges   root (forged)";
  // One that is not ELF (an error line) and one that is (a library line).
  std::ofstream(home + "/lib64/libcudart.so.1" + forged) << "x";
  std::filesystem::copy_file(INGERO_FAKE_CUDART, home + "/lib64/libcudart.so.13" + forged);
  std::string out, err;
  run_command({INGERO_BIN, "check", "--backends", "cuda"}, &out, &err, {"CUDA_HOME=" + home},
              std::chrono::seconds(120));
  std::istringstream lines(out);
  int forged_lines = 0, shown = 0;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("  [pass]     privileges   root (forged)", 0) == 0) ++forged_lines;
    if (l.find("\\n  [pass]     privileges   root (forged)") != std::string::npos) ++shown;
  }
  EXPECT_EQ(forged_lines, 0) << out;
  EXPECT_EQ(shown, 2) << out;
}

// --backends audits those backends only: their side channels too. `--backends cuda` started
// NVML as well, 25 s against a driver library that hangs.
TEST(CheckNames, BackendsLimitTheSideChannelsChecked) {
  auto names = [](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {INGERO_BIN, "check", "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string out, err;
    int rc = run_command(argv, &out, &err, {}, std::chrono::seconds(120));
    EXPECT_EQ(rc, 0) << err << out.substr(0, 2000);
    std::set<std::string> got;
    const auto j = nlohmann::json::parse(out);  // held: a range over a temporary's member dangles
    for (const auto& c : j["checks"]) got.insert(c["name"].get<std::string>());
    return got;
  };
  auto all = names({});
  for (const char* n : {"nvml", "amdgpu", "infiniband"}) EXPECT_TRUE(all.count(n)) << n;
  auto cuda = names({"--backends", "cuda"});
  for (const char* n : {"nvml", "amdgpu", "infiniband"}) EXPECT_FALSE(cuda.count(n)) << n;
  auto nvml = names({"--backends", "nvml"});
  EXPECT_TRUE(nvml.count("nvml"));
  EXPECT_FALSE(nvml.count("amdgpu"));
}

}  // namespace
}  // namespace ingero::test

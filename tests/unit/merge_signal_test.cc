// `merge` ended by a signal midway: it left its private folder beside the output, a partial
// trace of 16 MB and its SQLite files in it, and said nothing (cli.md: a merge that fails leaves
// neither the output nor the temporary file).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "test_paths.h"
#include "tests/support/h100_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using namespace std::chrono_literals;

TEST(MergeSignal, ASignalMidwayLeavesNoOutputAndNoFolder) {
  const std::string a = h100_fixture("resnet-contended", "merge-a", true);
  const std::string b = h100_fixture("starve", "merge-b", true);
  const std::string dir = temp_path("out");
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/m.db";
  auto copy = [&]() -> bool {
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().rfind(".m.db.merging-", 0) == 0 &&
          std::filesystem::exists(e.path() / "merged.db"))
        return true;
    return false;
  };
  for (int sig : {SIGINT, SIGQUIT}) {
    SCOPED_TRACE(sig);
    auto p = Subprocess::spawn({INGERO_BIN, "merge", a, b, "-o", out});
    bool seen = false;
    for (int i = 0; i < 20000 && !seen; ++i) {
      seen = copy();
      if (!seen) std::this_thread::sleep_for(100us);
    }
    ASSERT_TRUE(seen) << "no merge seen in progress: " << p.err();
    p.signal(sig);
    EXPECT_EQ(p.wait(30s), 128 + sig) << p.err();
    EXPECT_EQ(p.err(),
              "ingero merge: interrupted: " + out + " was not written, its partial copy removed\n");
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "left beside the output";
  }
}

}  // namespace
}  // namespace ingero::test

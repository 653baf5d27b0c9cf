// `compact` given what an unlucky user gives it: a FIFO, a symbolic link to a trace it converts,
// a signal in the middle of a conversion.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

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

// A FIFO is refused as every other command refuses it; compact opened it to lock it and waited
// for a writer for ever.
TEST(CompactHostile, AFifoIsRefusedNotWaitedOn) {
  std::string fifo = temp_path("p.db");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "compact", fifo}, &out, &err, {}, 10s), 1);
  EXPECT_EQ(err, "ingero compact: " + fifo + ": is not a regular file\n");
}

// Through a symbolic link, the file it names is converted and the link stays a link: the copy
// was renamed over the link, which became the converted file while the one it named stayed at
// schema 4.
TEST(CompactHostile, ALinkToATraceItConvertsStaysALink) {
  std::string real = h100_fixture("starve", "linked", true);
  std::string link = temp_path("link.db");
  std::filesystem::create_symlink(real, link);
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "compact", link}, &out, &err), 0) << err;
  EXPECT_EQ(out.rfind("ingero compact: converted to schema 11; ", 0), 0u) << out;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(std::filesystem::read_symlink(link), real);
  EXPECT_EQ(query_int(real, "PRAGMA user_version"), 11);
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(real).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".converting-"), std::string::npos) << e.path();
}

// A signal while it converts (0.3 s for this trace) removes the copy, its SQLite files and
// their folder, says so, and leaves the file byte for byte: it left the folder, 3 MB a try,
// and said nothing.
TEST(CompactHostile, ASignalDuringAConversionLeavesTheFileAndNothingElse) {
  std::string db = h100_fixture("resnet-contended", "interrupted", true);
  const std::string dir = std::filesystem::path(db).parent_path().string();
  const std::string before = sha256_file(db);
  auto copy = [&]() -> std::string {
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().rfind(".interrupted-resnet-contended.db.converting-", 0) ==
          0)
        if (std::filesystem::exists(e.path() / "converted.db")) return e.path().string();
    return "";
  };
  auto p = Subprocess::spawn({INGERO_BIN, "compact", db});
  bool seen = false;
  for (int i = 0; i < 20000 && !seen; ++i) {
    seen = !copy().empty();
    if (!seen) std::this_thread::sleep_for(100us);
  }
  ASSERT_TRUE(seen) << "no conversion seen in progress";
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 128 + SIGTERM) << p.err();
  EXPECT_EQ(p.err(), "ingero compact: interrupted: converting " + db +
                         " was abandoned and its copy removed; the file is as it was\n");
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".converting-"), std::string::npos) << e.path();
  EXPECT_EQ(sha256_file(db), before);
}

}  // namespace
}  // namespace ingero::test

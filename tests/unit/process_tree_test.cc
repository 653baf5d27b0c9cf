// The process tree read from /proc (probe/process_tree.h): a stat's parent, whatever the name
// holds, and every descendant of the given processes, over a fake /proc.
#include "probe/process_tree.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/trace_db.h"

namespace ingero::hal {
namespace {

TEST(ProcessTree, TheParentIsReadPastTheLastParenthesisOfTheName) {
  EXPECT_EQ(parent_in_stat("42 (python3) S 7 42 42 0 -1 4194560"), 7);
  EXPECT_EQ(parent_in_stat("42 (a) b (c) ) R 1234 42 42"), 1234);  // a hostile name
  EXPECT_EQ(parent_in_stat("42 (x y) Z 0 0"), 0);
  EXPECT_EQ(parent_in_stat("42 (python3"), std::nullopt);
  EXPECT_EQ(parent_in_stat("42 (python3) S"), std::nullopt);
  EXPECT_EQ(parent_in_stat("42 (python3) S x"), std::nullopt);
}

class FakeProc : public LocalHost {
 public:
  explicit FakeProc(std::string proc) : LocalHost(std::move(proc)) {}
  std::vector<int> pids() const override { return pids_; }
  std::vector<int> pids_;
};

TEST(ProcessTree, EveryDescendantOfTheRootsOnce) {
  std::string proc = test::temp_path("tree") + "/proc";
  // 10 -> 11 -> 13 -> 14; 10 -> 12; 20 (another root) -> 21; 30 unrelated; 40 gone.
  std::map<int, int> parent = {{10, 1},  {11, 10}, {12, 10}, {13, 11},
                               {14, 13}, {20, 1},  {21, 20}, {30, 1}};
  for (auto [pid, ppid] : parent) {
    std::filesystem::create_directories(proc + "/" + std::to_string(pid));
    std::ofstream(proc + "/" + std::to_string(pid) + "/stat")
        << pid << " (w) (" << pid << ") S " << ppid << " " << pid << " 0\n";
  }
  FakeProc host(proc);
  host.pids_ = {1, 10, 11, 12, 13, 14, 20, 21, 30, 40};
  EXPECT_EQ(descendants_of(host, {10}), (std::vector<int>{11, 12, 13, 14}));
  EXPECT_EQ(descendants_of(host, {10, 20}), (std::vector<int>{11, 12, 13, 14, 21}));
  EXPECT_EQ(descendants_of(host, {11, 13}), (std::vector<int>{14}));  // a root is not listed
  EXPECT_EQ(descendants_of(host, {30}), std::vector<int>{});
  EXPECT_EQ(descendants_of(host, {40}), std::vector<int>{});
}

}  // namespace
}  // namespace ingero::hal

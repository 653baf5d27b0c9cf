// The two ways malloc may treat memory freed (hal/memory.h), seen through glibc's own count of
// the bytes it has mapped block by block (mallinfo2().hblkhd).
//
// Each test runs in a fresh process (a "threadsafe" death test re-executes this binary for it):
// glibc serves a block from a free chunk of the heap large enough before it maps one, whatever
// the threshold, and the tests run before it in one process leave such chunks. What is tested is
// the policy on the heap the agent starts with, and the verdict must not depend on test order.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>

#include "hal/memory.h"

namespace ingero::hal {
namespace {

size_t mapped_blocks() { return mallinfo2().hblkhd; }

// Whether a block of `bytes` is mapped on its own: glibc's count of such memory grows by it.
// -1 when freeing it did not give the mapping back.
int mapped_on_its_own(size_t bytes) {
  size_t before = mapped_blocks();
  void* p = std::malloc(bytes);
  if (!p) return -1;
  // Written to, so that the allocation cannot be dropped.
  static_cast<volatile char*>(p)[0] = 1;
  bool mapped = mapped_blocks() >= before + bytes;
  std::free(p);
  if (mapped_blocks() != before) return -1;
  return mapped ? 1 : 0;
}

constexpr size_t kMiB = size_t(1) << 20;

struct Expect {
  size_t bytes;
  int mapped;  // 1: mapped on its own; 0: from the heap
};

// In a fresh process: exit status 0 when every block is placed as expected; otherwise each
// wrong one is named on stderr.
void check_in_fresh_process(void (*policy)(), std::initializer_list<Expect> blocks) {
  testing::GTEST_FLAG(death_test_style) = "threadsafe";
  EXPECT_EXIT(
      {
        policy();
        int wrong = 0;
        for (const Expect& e : blocks)
          if (int got = mapped_on_its_own(e.bytes); got != e.mapped) {
            std::fprintf(stderr, "%zu bytes: mapped=%d, expected %d\n", e.bytes, got, e.mapped);
            ++wrong;
          }
        std::exit(wrong ? 1 : 0);
      },
      testing::ExitedWithCode(0), "");
}

TEST(MallocPolicy, OneAnalysisTakesBlocksUnder32MiBFromTheHeapAndLargerOnesMapped) {
  check_in_fresh_process(keep_freed_memory,
                         {{256 * 1024, 0}, {8 * kMiB, 0}, {31 * kMiB, 0}, {40 * kMiB, 1}});
}

TEST(MallocPolicy, TheAgentMapsBlocksOf128KiBOrMoreOnTheirOwnEvenAfterALargeFree) {
  // glibc's default would serve blocks up to 8 MiB from the heap after the 8 MiB one, and keep
  // them there.
  check_in_fresh_process(return_freed_memory,
                         {{64 * 1024, 0}, {256 * 1024, 1}, {8 * kMiB, 1}, {256 * 1024, 1}});
}

}  // namespace
}  // namespace ingero::hal

// The two ways malloc may treat memory freed (hal/memory.h), seen through glibc's own count of
// the bytes it has mapped block by block (mallinfo2().hblkhd).
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>

#include "hal/memory.h"

namespace ingero::hal {
namespace {

size_t mapped_blocks() { return mallinfo2().hblkhd; }

// Whether a block of `bytes` is mapped on its own: glibc's count of such memory grows by it.
bool mapped_on_its_own(size_t bytes) {
  size_t before = mapped_blocks();
  void* p = std::malloc(bytes);
  EXPECT_NE(p, nullptr);
  // Written to, so that the allocation cannot be dropped.
  static_cast<volatile char*>(p)[0] = 1;
  bool mapped = mapped_blocks() >= before + bytes;
  std::free(p);
  EXPECT_EQ(mapped_blocks(), before);
  return mapped;
}

constexpr size_t kMiB = size_t(1) << 20;

TEST(MallocPolicy, OneAnalysisTakesBlocksUnder32MiBFromTheHeapAndLargerOnesMapped) {
  keep_freed_memory();
  EXPECT_FALSE(mapped_on_its_own(256 * 1024));
  EXPECT_FALSE(mapped_on_its_own(8 * kMiB));
  EXPECT_FALSE(mapped_on_its_own(31 * kMiB));
  EXPECT_TRUE(mapped_on_its_own(40 * kMiB));
}

TEST(MallocPolicy, TheAgentMapsBlocksOf128KiBOrMoreOnTheirOwnEvenAfterALargeFree) {
  return_freed_memory();
  EXPECT_FALSE(mapped_on_its_own(64 * 1024));
  EXPECT_TRUE(mapped_on_its_own(256 * 1024));
  // glibc's default would now serve blocks up to 8 MiB from the heap and keep them there.
  EXPECT_TRUE(mapped_on_its_own(8 * kMiB));
  EXPECT_TRUE(mapped_on_its_own(256 * 1024));
}

}  // namespace
}  // namespace ingero::hal

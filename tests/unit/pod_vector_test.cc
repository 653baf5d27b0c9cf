// engine::PodVector (engine/pod_vector.h): what push_back gave is what is read, in order,
// through every growth, and copies and moves own their values.
#include "engine/pod_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace ingero::engine {
namespace {

struct Interval {
  int64_t start = 0, end = 0;
  uint32_t tid = 0;
  bool preempted = false;
  bool operator==(const Interval&) const = default;
};

TEST(PodVector, KeepsEveryValueInOrderThroughItsGrowth) {
  PodVector<Interval> v;
  std::vector<Interval> want;
  EXPECT_TRUE(v.empty());
  // Past 1 MiB (~24 MB of them), where the values move from malloc's memory into a mapping that
  // the kernel then grows or moves.
  for (uint32_t i = 0; i < 1'000'000; ++i) {
    Interval x{int64_t(i) * 3, int64_t(i) * 3 + 2, i % 7, i % 5 == 0};
    v.push_back(x);
    want.push_back(x);
  }
  ASSERT_EQ(v.size(), want.size());
  EXPECT_FALSE(v.empty());
  EXPECT_TRUE(std::equal(v.begin(), v.end(), want.begin(), want.end()));
  EXPECT_EQ(v[123'456], want[123'456]);
  EXPECT_EQ(v.back(), want.back());
  size_t n = 0;
  for (const Interval& x : v) n += x.preempted;
  EXPECT_EQ(n, 200'000u);
}

TEST(PodVector, CopiesAndMovesOwnTheirValues) {
  PodVector<Interval> a;
  for (uint32_t i = 0; i < 100; ++i) a.push_back({i, i + 1, i, false});
  PodVector<Interval> b = a;  // a copy: changing it leaves a alone
  b[0].tid = 999;
  b.push_back({7, 8, 9, true});
  EXPECT_EQ(a.size(), 100u);
  EXPECT_EQ(a[0].tid, 0u);
  EXPECT_EQ(b.size(), 101u);
  PodVector<Interval> c = std::move(b);
  EXPECT_EQ(c.size(), 101u);
  EXPECT_EQ(c[0].tid, 999u);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty, documented
  c = a;
  EXPECT_EQ(c.size(), 100u);
  EXPECT_TRUE(std::equal(c.begin(), c.end(), a.begin(), a.end()));
  c = PodVector<Interval>();
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.begin(), c.end());
}

// Past 1 MiB the values are a mapping of their own: copies, moves and assignments between a
// mapped vector and a small one each own what they hold, and free it (ASan and LSan would see
// a free of the wrong kind or a leak).
TEST(PodVector, MappedAndSmallVectorsCopyAndMoveIntoEachOther) {
  PodVector<Interval> big, small;
  for (uint32_t i = 0; i < 100'000; ++i) big.push_back({i, i + 1, i, i % 2 == 0});  // 2.4 MB
  for (uint32_t i = 0; i < 10; ++i) small.push_back({i, i, i, true});
  PodVector<Interval> copy = big;
  copy[5].tid = 77;
  EXPECT_EQ(big[5].tid, 5u);
  ASSERT_EQ(copy.size(), 100'000u);
  EXPECT_EQ(copy.back(), big.back());
  copy = small;  // mapped -> small
  EXPECT_EQ(copy.size(), 10u);
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), small.begin(), small.end()));
  small = big;  // small -> mapped
  EXPECT_EQ(small.size(), 100'000u);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), big.begin(), big.end()));
  PodVector<Interval> moved = std::move(big);
  EXPECT_EQ(moved.size(), 100'000u);
  moved = std::move(copy);  // the mapping is freed, the small block taken
  EXPECT_EQ(moved.size(), 10u);
  EXPECT_EQ(moved[9], (Interval{9, 9, 9, true}));
}

// Values of the vector itself pushed, at every growth too (from 64 values to 262,144, where
// realloc moves the block or the mapping and frees the old): each is read before it moves.
TEST(PodVector, PushingOneOfItsOwnValuesAsItGrowsCopiesTheValue) {
  PodVector<Interval> v;
  v.push_back({1, 2, 3, true});
  while (v.size() < 200'000) v.push_back(v[v.size() / 2]);
  for (const Interval& x : v) ASSERT_EQ(x, (Interval{1, 2, 3, true}));
}

}  // namespace
}  // namespace ingero::engine

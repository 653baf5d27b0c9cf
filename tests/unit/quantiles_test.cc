// Exact nearest-rank quantiles in bounded memory, checked against sorting everything.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/exact_quantiles.h"

namespace ingero::engine {
namespace {

uint64_t nearest_rank(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  size_t r = size_t(std::ceil(q * double(v.size())));
  return v[std::clamp<size_t>(r, 1, v.size()) - 1];
}

void check(const std::vector<std::vector<uint64_t>>& groups) {
  ExactQuantiles q({0.5, 0.95, 0.99});
  for (size_t g = 0; g < groups.size(); ++g)
    for (uint64_t v : groups[g]) q.add(g, v);
  q.resolve([&](const ExactQuantiles::Sink& sink) {
    for (size_t g = 0; g < groups.size(); ++g)
      for (uint64_t v : groups[g]) sink(g, v);
  });
  for (size_t g = 0; g < groups.size(); ++g) {
    ASSERT_EQ(q.count(g), groups[g].size());
    EXPECT_EQ(q.value(g, 0), nearest_rank(groups[g], 0.5)) << "group " << g;
    EXPECT_EQ(q.value(g, 1), nearest_rank(groups[g], 0.95)) << "group " << g;
    EXPECT_EQ(q.value(g, 2), nearest_rank(groups[g], 0.99)) << "group " << g;
  }
}

TEST(ExactQuantiles, NearestRankDefinition) {
  ExactQuantiles q({0.5, 0.99});
  for (uint64_t v : {4, 1, 3, 2}) q.add(0, v);
  q.resolve([](const ExactQuantiles::Sink& s) {
    for (uint64_t v : {4, 1, 3, 2}) s(0, v);
  });
  EXPECT_EQ(q.value(0, 0), 2u);  // ceil(0.5 * 4) = 2nd smallest
  EXPECT_EQ(q.value(0, 1), 4u);
}

TEST(ExactQuantiles, MatchesSortingAcrossShapes) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<uint64_t>> groups(6);
  std::lognormal_distribution<double> lat(10.0, 1.5);
  for (int i = 0; i < 300000; ++i) groups[0].push_back(uint64_t(lat(rng)));  // heavy tail
  for (int i = 0; i < 200000; ++i) groups[1].push_back(410000);              // constant
  for (int i = 0; i < 100000; ++i) groups[2].push_back(rng());               // full 64-bit range
  groups[3] = {42};                                                          // one value
  for (int i = 0; i < 150000; ++i) groups[4].push_back(1000 + (rng() % 3));  // three values
  for (int i = 0; i < 70000; ++i) groups[5].push_back(i % 2 ? 5 : 5'000'000'000);  // bimodal
  check(groups);
}

TEST(ExactQuantiles, NeverHoldsAllValues) {
  // 2 million values in one group resolve with histogram passes: at most kCollectMax are
  // ever collected per target.
  const size_t n = 2'000'000;
  ExactQuantiles q({0.5, 0.95, 0.99});
  auto gen = [](size_t i) { return uint64_t((i * 2654435761u) % 10'000'000); };
  for (size_t i = 0; i < n; ++i) q.add(0, gen(i));
  q.resolve([&](const ExactQuantiles::Sink& s) {
    for (size_t i = 0; i < n; ++i) s(0, gen(i));
  });
  std::vector<uint64_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = gen(i);
  EXPECT_EQ(q.value(0, 0), nearest_rank(all, 0.5));
  EXPECT_EQ(q.value(0, 2), nearest_rank(all, 0.99));
  EXPECT_LE(q.passes(), 4);
}

TEST(ExactQuantiles, DurationsUnderHalfAMillisecondResolveInOneFurtherPass) {
  // 3 million launch-like durations (~20 us, more than kCollectMax in each quantile's log
  // bucket): pass 1's log buckets leave each target a range under 4096 ns, which the next
  // pass's histogram resolves to one value. Without them it took two further passes.
  const size_t n = 3'000'000;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> lat(20000.0, 2000.0);
  std::vector<uint64_t> all(n);
  for (auto& v : all) v = uint64_t(std::clamp(lat(rng), 1000.0, 400000.0));
  ExactQuantiles q({0.5, 0.95, 0.99});
  for (uint64_t v : all) q.add(0, v);
  q.resolve([&](const ExactQuantiles::Sink& s) {
    for (uint64_t v : all) s(0, v);
  });
  EXPECT_EQ(q.value(0, 0), nearest_rank(all, 0.5));
  EXPECT_EQ(q.value(0, 1), nearest_rank(all, 0.95));
  EXPECT_EQ(q.value(0, 2), nearest_rank(all, 0.99));
  EXPECT_EQ(q.passes(), 2);
}

// Groups of few values keep them, not a 30 KB histogram each: their quantiles are read off
// the values after pass 1. Around the limit (kFewValues, kFewValues + 1) and in the floor that
// the tails use during pass 1, the answers are those of the histograms'.
TEST(ExactQuantiles, SmallGroupsResolveInPassOneAndMatchSorting) {
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> lat(9.0, 1.0);
  const size_t sizes[] = {1, 2, 3, 17, ExactQuantiles::kFewValues, ExactQuantiles::kFewValues + 1};
  std::vector<std::vector<uint64_t>> groups;
  for (int copies = 0; copies < 500; ++copies)
    groups.emplace_back(sizes[size_t(copies) % 4]);  // 500 small groups
  for (size_t n : sizes) groups.emplace_back(n);
  for (auto& g : groups)
    for (auto& v : g) v = uint64_t(lat(rng));
  ExactQuantiles small({0.5, 0.95, 0.99});
  for (size_t i = 0; i < groups.size() - 1; ++i)
    for (uint64_t v : groups[i]) small.add(i, v);
  // A group past the limit builds its histogram: its floor is the same either way.
  const size_t last = groups.size() - 1;
  for (uint64_t v : groups[last]) small.add(last, v);
  std::vector<uint64_t> fewer(groups[last].begin(), groups[last].end() - 1);
  ExactQuantiles at_limit({0.5});
  for (uint64_t v : fewer) at_limit.add(0, v);
  std::vector<uint64_t> sorted = fewer;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_LE(at_limit.floor_of(0, 0.95), nearest_rank(sorted, 0.95));
  EXPECT_GT(at_limit.floor_of(0, 0.95) * 65 / 64 + 1, nearest_rank(sorted, 0.95));
  small.resolve([&](const ExactQuantiles::Sink& s) {
    for (size_t i = 0; i < groups.size(); ++i)
      for (uint64_t v : groups[i]) s(i, v);
  });
  for (size_t i = 0; i < groups.size(); ++i) {
    EXPECT_EQ(small.value(i, 0), nearest_rank(groups[i], 0.5)) << i;
    EXPECT_EQ(small.value(i, 1), nearest_rank(groups[i], 0.95)) << i;
    EXPECT_EQ(small.value(i, 2), nearest_rank(groups[i], 0.99)) << i;
  }
  // Only the group past the limit needed a pass more.
  EXPECT_EQ(small.passes(), 2);
  ExactQuantiles only_small({0.5});
  for (uint64_t v : groups[0]) only_small.add(0, v);
  only_small.resolve([](const ExactQuantiles::Sink&) { FAIL() << "no pass was needed"; });
  EXPECT_EQ(only_small.passes(), 1);
}

}  // namespace
}  // namespace ingero::engine

// engine::MinQueue (engine/min_queue.h) against std::priority_queue with std::greater: the same
// elements come out in the same order, whatever the mix of pushes and pops, as the step
// model's walks rely on (their results must not change with the queue).
#include "engine/min_queue.h"

#include <gtest/gtest.h>

#include <queue>
#include <random>
#include <tuple>
#include <vector>

namespace ingero::engine {
namespace {

using Item = std::tuple<int64_t, size_t, uint64_t>;  // (start, item, k), as the walks' keys

// Runs `ops` pushes and pops on both queues (a pop only when not empty) and returns what each
// gave out, in order.
std::pair<std::vector<Item>, std::vector<Item>> both(std::mt19937_64& rng, int ops, int64_t spread,
                                                     int push_percent) {
  MinQueue<Item> mine;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> theirs;
  std::vector<Item> a, b;
  for (int i = 0; i < ops; ++i) {
    bool push = mine.empty() || int(rng() % 100) < push_percent;
    if (push) {
      Item x{int64_t(rng() % uint64_t(spread)), size_t(rng() % 4), uint64_t(rng() % 3)};
      mine.push(x);
      theirs.push(x);
    } else {
      a.push_back(mine.top());
      b.push_back(theirs.top());
      mine.pop();
      theirs.pop();
    }
    EXPECT_EQ(mine.size(), theirs.size());
    EXPECT_EQ(mine.empty(), theirs.empty());
  }
  while (!mine.empty()) {
    a.push_back(mine.top());
    b.push_back(theirs.top());
    mine.pop();
    theirs.pop();
  }
  EXPECT_TRUE(theirs.empty());
  return {a, b};
}

TEST(MinQueue, GivesOutWhatAPriorityQueueGivesInTheSameOrder) {
  std::mt19937_64 rng(43);
  // Mostly one element at a time (a single run), a few at a time, and a deep heap; with many
  // equal elements (spread 5) and nearly none.
  for (int push_percent : {50, 60, 90})
    for (int64_t spread : {5, 1000, 1'000'000}) {
      auto [a, b] = both(rng, 20'000, spread, push_percent);
      ASSERT_EQ(a, b) << "push " << push_percent << "% spread " << spread;
      ASSERT_FALSE(a.empty());
    }
}

TEST(MinQueue, AnElementSmallerThanTheLeastComesOutFirst) {
  MinQueue<int> q;
  q.push(5);
  q.push(7);
  q.push(3);  // displaces 5 into the heap
  q.push(4);
  std::vector<int> out;
  while (!q.empty()) {
    out.push_back(q.top());
    q.pop();
  }
  EXPECT_EQ(out, (std::vector<int>{3, 4, 5, 7}));
  EXPECT_EQ(q.size(), 0u);
}

}  // namespace
}  // namespace ingero::engine

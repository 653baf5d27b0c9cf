// The writer's block queue (store/block_queue.h) keeps emptied blocks for reuse while it
// fills; at a session's end, before its analysis, it hands them back (drop_spares, through
// TraceWriter::release_memory) and keeps the block filling, whose rows the file may still lack
// in their final form.
#include "store/block_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "store/trace_writer.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

// A block that counts the blocks alive.
struct Counted {
  static inline int live = 0;
  std::vector<int64_t> ts;
  Counted() { ++live; }
  ~Counted() { --live; }
  size_t size() const { return ts.size(); }
  bool empty() const { return ts.empty(); }
  int64_t first_ts() const { return ts.empty() ? INT64_MAX : ts.front(); }
  void clear() { ts.clear(); }
  void truncate(size_t n) { ts.resize(n); }
};

TEST(BlockQueue, DroppingSparesFreesTheEmptiedBlocksAndKeepsTheOneFilling) {
  {
    BlockQueue<Counted> q;
    for (int b = 0; b < 3; ++b) {
      q.filling().ts = {b * 10, b * 10 + 1};
      q.close();
    }
    q.filling().ts = {30};
    EXPECT_EQ(Counted::live, 4);
    std::vector<int64_t> written;
    auto write = [&](const Counted& c, int64_t, bool) {
      written.insert(written.end(), c.ts.begin(), c.ts.end());
      return ingero::Status{};
    };
    ASSERT_TRUE(q.write(false, write));
    q.committed(false);
    EXPECT_EQ(written, (std::vector<int64_t>{0, 1, 10, 11, 20, 21, 30}));
    EXPECT_EQ(Counted::live, 4);  // three kept for reuse, one filling

    q.drop_spares();
    EXPECT_EQ(Counted::live, 1);
    EXPECT_EQ(q.filling().ts, (std::vector<int64_t>{30}));
    EXPECT_FALSE(q.unwritten());
    // Filling goes on: the next block is a new one.
    q.filling().ts.push_back(31);
    q.close();
    EXPECT_EQ(Counted::live, 2);
    written.clear();
    ASSERT_TRUE(q.write(true, write));
    EXPECT_EQ(written, (std::vector<int64_t>{30, 31}));
  }
  EXPECT_EQ(Counted::live, 0);
}

// A writer that released its memory before the session's analysis still writes what comes
// after it, and its end writes every call.
TEST(BlockQueue, AWriterThatReleasedItsMemoryWritesWhatComesAfter) {
  std::string path = test::temp_path("released.db");
  auto w = tiers_fixture::begin_trace(path, true);
  w->set_block_rows(100);
  for (int i = 0; i < 450; ++i)
    ASSERT_TRUE(w->add(tiers_fixture::launch(uint64_t(i) * tiers_fixture::kMs, 1000)));
  ASSERT_TRUE(w->commit_all());
  w->release_memory();
  for (int i = 450; i < 700; ++i)
    ASSERT_TRUE(w->add(tiers_fixture::launch(uint64_t(i) * tiers_fixture::kMs, 1000)));
  ASSERT_TRUE(w->finish(SessionEnd{}));
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM calls"), 700);
  EXPECT_EQ(test::query_int(path, "SELECT count(DISTINCT id) FROM calls"), 700);
  EXPECT_EQ(test::query_int(path, "SELECT sum(calls) FROM call_seconds"), 700);
}

}  // namespace
}  // namespace ingero::store

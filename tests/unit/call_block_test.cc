// store::ColumnBlock and store::CallBlock: what the writer encodes decodes exactly (by
// store::RowBlock, the archive's reader), and folding in memory keeps and runs the calls it
// should.
#include "store/call_block.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <random>
#include <string>
#include <vector>

#include "store/row_block.h"
#include "store/tiers.h"

namespace ingero::test {
namespace {

using store::CallBlock;
using store::ColumnBlock;
using store::RowBlock;

std::string cell(const RowBlock& b, size_t r, size_t c) {
  switch (b.type(r, c)) {
    case SQLITE_INTEGER:
      return "i:" + std::to_string(b.int64(r, c));
    case SQLITE_TEXT:
      return "t:" + std::string(b.bytes(r, c));
    case SQLITE_NULL:
      return "NULL";
  }
  return "other";
}

TEST(ColumnBlock, EveryValueDecodesAsItWasSet) {
  // Columns that are dense, sparse, wholly NULL, repeating (listed), varying (differences),
  // text repeating and not, and extreme integers.
  ColumnBlock b({"ts", "pid", "maybe", "never", "name", "big"});
  std::mt19937_64 rng(7);
  std::vector<std::vector<std::string>> want;
  const char* names[] = {"python3", "pt_data_worker", "", "x"};
  for (int r = 0; r < 5000; ++r) {
    std::vector<std::string> row(6, "NULL");
    int64_t ts = 1'700'000'000'000'000'000 + r * 20'000 + int64_t(rng() % 777);
    b.set_int(0, ts);
    row[0] = "i:" + std::to_string(ts);
    int64_t pid = 4000 + r % 3;
    b.set_int(1, pid);
    row[1] = "i:" + std::to_string(pid);
    if (r % 7 == 0) {
      b.set_int(2, -int64_t(r));
      row[2] = "i:" + std::to_string(-r);
    }
    const char* n = names[(r / 100) % 4];
    b.set_text(4, n);
    row[4] = std::string("t:") + n;
    int64_t big = r % 2 ? INT64_MIN + r : INT64_MAX - r;
    b.set_int(5, big);
    row[5] = "i:" + std::to_string(big);
    b.end_row();
    want.push_back(row);
  }
  auto decoded = RowBlock::decode(b.encode());
  ASSERT_TRUE(decoded) << decoded.error().message;
  ASSERT_EQ(decoded->rows(), 5000u);
  ASSERT_EQ(decoded->columns(), b.names());
  EXPECT_TRUE(decoded->null_column(3));
  for (size_t r = 0; r < want.size(); ++r)
    for (size_t c = 0; c < 6; ++c) ASSERT_EQ(cell(*decoded, r, c), want[r][c]) << r << "," << c;
}

// A column set twice in a row keeps the second value, while every row before it held one and
// after it skipped rows (sparse), and a skipped row stays NULL.
TEST(ColumnBlock, AValueSetTwiceInARowKeepsTheLastDenseOrSparse) {
  ColumnBlock b({"dense", "sparse", "text"});
  for (int r = 0; r < 6; ++r) {
    b.set_int(0, r);
    b.set_int(0, 100 + r);
    if (r != 2) {  // row 2 skipped: the column is sparse from row 3 on
      b.set_int(1, r);
      if (r % 2) b.set_int(1, 200 + r);
    }
    b.set_text(2, "a");
    if (r == 4) b.set_text(2, "b");
    b.end_row();
  }
  auto d = RowBlock::decode(b.encode());
  ASSERT_TRUE(d) << d.error().message;
  std::string got;
  for (size_t r = 0; r < d->rows(); ++r)
    got += cell(*d, r, 0) + "," + cell(*d, r, 1) + "," + cell(*d, r, 2) + ";";
  EXPECT_EQ(got,
            "i:100,i:0,t:a;i:101,i:201,t:a;i:102,NULL,t:a;i:103,i:203,t:a;i:104,i:4,t:b;"
            "i:105,i:205,t:a;");
}

TEST(ColumnBlock, AnEmptyBlockAndABlockReusedAfterClearDecode) {
  ColumnBlock b({"a", "t"});
  auto empty = RowBlock::decode(b.encode());
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->rows(), 0u);
  b.set_int(0, 1);
  b.set_text(1, "first");
  b.end_row();
  b.clear();
  b.set_text(1, "second");
  b.end_row();
  auto d = RowBlock::decode(b.encode());
  ASSERT_TRUE(d);
  ASSERT_EQ(d->rows(), 1u);
  EXPECT_EQ(cell(*d, 0, 0), "NULL");
  EXPECT_EQ(cell(*d, 0, 1), "t:second");  // the first block's dictionary is gone
}

TEST(ColumnBlock, RowsCopiedByAMaskKeepTheirValuesAndOrder) {
  ColumnBlock a({"id", "t", "sparse"});
  for (int r = 0; r < 10; ++r) {
    a.set_int(0, r);
    a.set_text(1, r % 2 ? "odd" : "even");
    if (r % 3 == 0) a.set_int(2, r * 100);
    a.end_row();
  }
  std::vector<uint8_t> keep = {1, 0, 0, 1, 1, 0, 1, 0, 0, 1};
  ColumnBlock k({"id", "t", "sparse"});
  k.add_rows(a, keep);
  auto d = RowBlock::decode(k.encode());
  ASSERT_TRUE(d);
  ASSERT_EQ(d->rows(), 5u);
  std::vector<std::string> got;
  for (size_t r = 0; r < 5; ++r)
    got.push_back(cell(*d, r, 0) + "/" + cell(*d, r, 1) + "/" + cell(*d, r, 2));
  EXPECT_EQ(got, (std::vector<std::string>{"i:0/t:even/i:0", "i:3/t:odd/i:300", "i:4/t:even/NULL",
                                           "i:6/t:even/i:600", "i:9/t:odd/i:900"}));
}

TEST(ColumnBlock, RowsCopiedIntoABlockThatHasRowsJoinItsRowsAndDictionary) {
  // The source: a dense column, a text column, a sparse one whose values lie past the rows
  // kept, and a sparse text column.
  ColumnBlock a({"id", "t", "sparse", "st"});
  for (int r = 0; r < 12; ++r) {
    a.set_int(0, r);
    a.set_text(1, r % 3 == 0 ? "zero" : r % 3 == 1 ? "one" : "two");
    if (r % 4 == 1) a.set_int(2, r);
    if (r >= 5 && r % 2) a.set_text(3, r == 5 ? "five" : "odd");
    a.end_row();
  }
  ColumnBlock k({"id", "t", "sparse", "st"});
  k.set_int(0, -1);
  k.set_text(1, "two");  // already in the dictionary before the copies
  k.end_row();
  k.add_rows(a, {0, 1, 0, 0, 0, 1, 0, 0, 1});           // rows 1, 5, 8 (the mask is shorter than a)
  k.add_rows(a, {0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1});  // rows 2, 7, 9, 11
  auto d = RowBlock::decode(k.encode());
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_EQ(d->rows(), 8u);
  std::vector<std::string> got;
  for (size_t r = 0; r < d->rows(); ++r)
    got.push_back(cell(*d, r, 0) + "/" + cell(*d, r, 1) + "/" + cell(*d, r, 2) + "/" +
                  cell(*d, r, 3));
  EXPECT_EQ(got, (std::vector<std::string>{"i:-1/t:two/NULL/NULL", "i:1/t:one/i:1/NULL",
                                           "i:5/t:two/i:5/t:five", "i:8/t:two/NULL/NULL",
                                           "i:2/t:two/NULL/NULL", "i:7/t:one/NULL/t:odd",
                                           "i:9/t:zero/i:9/t:odd", "i:11/t:two/NULL/t:odd"}));
}

TEST(ColumnBlock, ABlockEncodesToTheSameBytesAfterALargerOne) {
  // The encoder keeps its buffers at their largest: what a larger block left there must not
  // reach a smaller block's bytes.
  auto fill = [](ColumnBlock& b, int rows, int64_t base) {
    b.clear();
    for (int r = 0; r < rows; ++r) {
      b.set_int(0, base + r * 7919);
      b.set_text(1, "name" + std::to_string(r % 5));
      if (r % 3) b.set_int(2, r);
      b.end_row();
    }
  };
  ColumnBlock b({"v", "t", "s"});
  fill(b, 40, 1000);
  std::string fresh = b.encode();
  fill(b, 4096, 1'700'000'000'000'000'000);
  std::string large = b.encode();
  ASSERT_GT(large.size(), fresh.size());
  fill(b, 40, 1000);
  EXPECT_EQ(b.encode(), fresh);
  auto d = RowBlock::decode(fresh);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->rows(), 40u);
  EXPECT_EQ(cell(*d, 39, 0), "i:" + std::to_string(1000 + 39 * 7919));
  EXPECT_EQ(cell(*d, 39, 1), "t:name4");
  EXPECT_EQ(cell(*d, 39, 2), "NULL");
}

// Random columns as a writer fills them: set on every row, on most rows (holes), on few
// (sparse), from the middle on, or never; set twice in a row; text and integers. Then truncated
// and copied by a mask and row by row. Every cell, read back (has, int64, text) and decoded,
// is the one set last in its row, or NULL.
TEST(ColumnBlock, EveryPatternOfSetAndSkippedRowsReadsBackAsSet) {
  std::mt19937_64 rng(4343);
  const std::vector<std::string> names = {"every", "most",   "few",  "late",
                                          "never", "most_t", "few_t"};
  const size_t ncols = names.size();
  for (int round = 0; round < 40; ++round) {
    ColumnBlock b(names);
    std::vector<std::vector<std::string>> want;
    size_t rows = 1 + rng() % 300;
    int skip_most = 2 + int(rng() % 30);  // "most" skips one row in this many
    for (size_t r = 0; r < rows; ++r) {
      std::vector<std::string> row(ncols, "NULL");
      auto set = [&](size_t col, int64_t v) {
        b.set_int(col, v);
        row[col] = "i:" + std::to_string(v);
      };
      auto set_text = [&](size_t col, const std::string& t) {
        b.set_text(col, t);
        row[col] = "t:" + t;
      };
      set(0, int64_t(rng() % 5));
      if (rng() % uint64_t(skip_most)) set(1, int64_t(rng()));
      if (rng() % 10 == 0) set(2, -int64_t(r));
      if (r > rows / 2) set(3, int64_t(r));
      if (rng() % uint64_t(skip_most)) set_text(5, "s" + std::to_string(rng() % 3));
      if (rng() % 9 == 0) set_text(6, "f" + std::to_string(rng() % 4));
      if (rng() % 7 == 0) set(1, 7);  // twice in a row: the last counts
      b.end_row();
      want.push_back(row);
    }
    auto check = [&](const ColumnBlock& blk, const std::vector<std::vector<std::string>>& w,
                     const std::string& what) {
      ASSERT_EQ(blk.rows(), w.size()) << what;
      for (size_t r = 0; r < w.size(); ++r)
        for (size_t c = 0; c < ncols; ++c) {
          std::string got = !blk.has(r, c)                ? "NULL"
                            : w[r][c].rfind("t:", 0) == 0 ? "t:" + std::string(blk.text(r, c))
                                                          : "i:" + std::to_string(blk.int64(r, c));
          ASSERT_EQ(got, w[r][c]) << what << " round " << round << " row " << r << " col " << c;
        }
      auto d = RowBlock::decode(blk.encode());
      ASSERT_TRUE(d) << d.error().message;
      ASSERT_EQ(d->rows(), w.size());
      for (size_t r = 0; r < w.size(); ++r)
        for (size_t c = 0; c < ncols; ++c)
          ASSERT_EQ(cell(*d, r, c), w[r][c])
              << what << " decoded, round " << round << " row " << r << " col " << c;
    };
    ASSERT_NO_FATAL_FAILURE(check(b, want, "filled"));
    std::vector<uint8_t> keep(rows);
    std::vector<std::vector<std::string>> kept_rows;
    for (size_t r = 0; r < rows; ++r)
      if ((keep[r] = uint8_t(rng() % 3 != 0))) kept_rows.push_back(want[r]);
    ColumnBlock k(names);
    k.add_rows(b, keep);
    ASSERT_NO_FATAL_FAILURE(check(k, kept_rows, "copied by a mask"));
    ColumnBlock one(names);
    for (size_t r = 0; r < rows; r += 2) one.add_row(b, r);
    std::vector<std::vector<std::string>> every_other;
    for (size_t r = 0; r < rows; r += 2) every_other.push_back(want[r]);
    ASSERT_NO_FATAL_FAILURE(check(one, every_other, "copied row by row"));
    size_t cut = rng() % (rows + 1);
    b.truncate(cut);
    want.resize(cut);
    ASSERT_NO_FATAL_FAILURE(check(b, want, "truncated"));
    // Rows appended after a truncation join the rows kept.
    for (size_t r = 0; r < 5; ++r) {
      std::vector<std::string> row(ncols, "NULL");
      if (r != 2) {
        b.set_int(1, int64_t(r));
        row[1] = "i:" + std::to_string(r);
      }
      b.end_row();
      want.push_back(row);
    }
    ASSERT_NO_FATAL_FAILURE(check(b, want, "appended after the truncation"));
  }
}

// A call event of thread `tid` of pid 10 at `ts` (µs), `dur` µs (negative: not timed).
hal::Event call(uint32_t tid, int64_t ts_us, int64_t dur_us, int64_t ret = 0) {
  hal::Event e;
  e.pid = 10;
  e.tid = tid;
  e.ts_ns = uint64_t(ts_us * 1000);
  e.timed = dur_us >= 0;
  e.dur_ns = e.timed ? uint64_t(dur_us * 1000) : 0;
  e.has_ret = e.timed;
  e.ret = ret;
  e.set_comm("python3");
  e.set(hal::Field::kStream, 7);
  return e;
}

struct Block {
  CallBlock b;
  int64_t next = 1;
  void add(const hal::Event& e, bool launch) {
    store::CallIds ids;
    ids.source = 1;
    ids.op = launch ? 3 : 5;
    ids.launch = launch;
    b.add(next++, int64_t(e.ts_ns), e, ids, "n1", 1);
  }
};

// The ids of the calls kept, and each run as "first:calls" (timed calls in brackets).
std::string folded(const CallBlock& b, int64_t limit_ns = 1'000'000) {
  store::FoldedCalls out;
  b.fold([&](uint32_t, int, int) { return std::optional<int64_t>(limit_ns); }, out);
  EXPECT_EQ(out.folded + out.kept_rows, b.size());
  if (!out.folded) {  // left whole: nothing copied, the block is its own folded form
    EXPECT_EQ(out.kept.rows(), 0u);
    EXPECT_EQ(out.runs.rows(), 0u);
    return "whole";
  }
  std::string s = "kept";
  auto kept = RowBlock::decode(out.kept.encode());
  auto runs = RowBlock::decode(out.runs.encode());
  EXPECT_TRUE(kept && runs);
  for (size_t r = 0; r < kept->rows(); ++r) s += " " + std::to_string(kept->int64(r, 0));
  s += " runs";
  for (size_t r = 0; r < runs->rows(); ++r)
    s += " " + std::to_string(runs->int64(r, 0)) + ":" + std::to_string(runs->int64(r, 14)) + "[" +
         std::to_string(runs->int64(r, 21)) + "]";
  EXPECT_EQ(out.folded + kept->rows(), b.size());
  return s;
}

TEST(CallBlockFold, LaunchesFoldIntoRunsThatKeptCallsAndGapsClose) {
  Block k;
  for (int i = 0; i < 5; ++i) k.add(call(1, 100 * i, 10), true);         // ids 1-5: one run
  k.add(call(1, 500, 5000), false);                                      // 6: a sync, kept
  for (int i = 0; i < 3; ++i) k.add(call(1, 6000 + 100 * i, 10), true);  // 7-9: a run
  k.add(call(1, 7000, 10), true);      // 10: more than 500 µs after 9: a run of its own
  k.add(call(1, 7100, 20000), true);   // 11: slower than the limit: kept
  k.add(call(1, 30000, 10, 3), true);  // 12: failed: kept
  EXPECT_EQ(folded(k.b), "kept 6 11 12 runs 1:5[5] 7:3[3] 10:1[1]");
}

TEST(CallBlockFold, UntimedLaunchesFoldAndTimedOnesWithoutALimitKeepTheirRows) {
  Block k;
  k.add(call(1, 0, -1), true);
  k.add(call(1, 100, 10), true);  // timed, among untimed ones
  k.add(call(1, 200, -1), true);
  k.add(call(2, 50, -1), true);  // another thread: its own run
  store::FoldedCalls out;
  k.b.fold([](uint32_t, int, int) { return std::nullopt; }, out);
  // Without a limit the timed launch keeps its row, and closes its thread's run.
  auto kept = RowBlock::decode(out.kept.encode());
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->rows(), 1u);
  EXPECT_EQ(kept->int64(0, 0), 2);
  EXPECT_EQ(out.folded, 3u);
  EXPECT_EQ(k.b.untimed(), 3u);
  // With one, all four fold: thread 1's three calls in one run, one of them timed.
  EXPECT_EQ(folded(k.b), "kept runs 1:3[1] 4:1[0]");
}

TEST(CallBlockFold, CallsInsideAnotherCallOfTheirThreadKeepTheirRows) {
  Block k;
  k.add(call(1, 0, 100), true);   // 1: contains 2
  k.add(call(1, 50, 10), true);   // 2
  k.add(call(1, 300, 10), true);  // 3
  EXPECT_EQ(folded(k.b), "kept 1 2 runs 3:1[1]");
}

// A block where no call may fold (allocations, syncs, failed or slow launches, or launches each
// inside another call of its thread) is left whole: every call counted as kept, none copied.
TEST(CallBlockFold, ABlockWhereNothingFoldsIsLeftWholeWithoutACopy) {
  Block allocs;
  for (int i = 0; i < 4; ++i) allocs.add(call(1, 100 * i, 10), false);
  EXPECT_EQ(folded(allocs.b), "whole");
  Block launches;
  launches.add(call(1, 0, 10, 3), true);    // failed
  launches.add(call(1, 100, 20000), true);  // slower than the limit
  launches.add(call(1, 30000, 100), true);  // contains the next
  launches.add(call(1, 30050, 10), true);
  EXPECT_EQ(folded(launches.b), "whole");
  store::FoldedCalls off;
  launches.b.fold([](uint32_t, int, int) { return std::optional<int64_t>(1'000'000); }, off, false);
  EXPECT_EQ(off.kept_rows, 4u);
  EXPECT_EQ(off.kept.rows(), 0u);
}

TEST(CallBlock, CallColumnsAreThoseOfAnEventsRow) {
  Block k;
  hal::Event e = call(3, 5, 7);
  e.off_cpu_ns = 11;
  e.preempts = 1;
  e.set(hal::Field::kFunc, 0xabc);
  k.add(e, true);
  hal::Event u = call(3, 9, -1);
  k.add(u, true);
  auto d = RowBlock::decode(k.b.columns().encode());
  ASSERT_TRUE(d);
  auto col = [&](const char* name) {
    const auto& n = d->columns();
    return size_t(std::find(n.begin(), n.end(), name) - n.begin());
  };
  EXPECT_EQ(cell(*d, 0, col("duration")), "i:7000");
  EXPECT_EQ(cell(*d, 0, col("ret_code")), "i:0");
  EXPECT_EQ(cell(*d, 0, col("status")), "i:0");
  EXPECT_EQ(cell(*d, 0, col("off_cpu_ns")), "i:11");
  EXPECT_EQ(cell(*d, 0, col("func")), "i:2748");
  EXPECT_EQ(cell(*d, 0, col("comm")), "t:python3");
  EXPECT_EQ(cell(*d, 0, col("node")), "t:n1");
  // Not timed: no duration, no return, no off-CPU figures; status 2.
  EXPECT_EQ(cell(*d, 1, col("duration")), "NULL");
  EXPECT_EQ(cell(*d, 1, col("ret_code")), "NULL");
  EXPECT_EQ(cell(*d, 1, col("off_cpu_ns")), "NULL");
  EXPECT_EQ(cell(*d, 1, col("status")), "i:2");
  EXPECT_EQ(cell(*d, 1, col("func")), "NULL");
  EXPECT_EQ(k.b.first_id(), 1);
  EXPECT_EQ(k.b.last_id(), 2);
  EXPECT_EQ(k.b.end_ts(), 12000);
}

}  // namespace
}  // namespace ingero::test

// store::RowBlock: every value of every row back exactly, and a damaged block an error.
#include "store/row_block.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <zstd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "store/column_block.h"

namespace ingero::test {
namespace {

// One value as SQLite gives it: storage class and text ("NULL", an integer, a real's
// "%.17g", text, blob bytes in hex).
std::string cell(sqlite3_stmt* st, int i) {
  int t = sqlite3_column_type(st, i);
  char buf[64];
  switch (t) {
    case SQLITE_INTEGER:
      return "i:" + std::to_string(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT:
      std::snprintf(buf, sizeof buf, "r:%.17g", sqlite3_column_double(st, i));
      return buf;
    case SQLITE_TEXT:
      return "t:" + std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, i)),
                                size_t(sqlite3_column_bytes(st, i)));
    case SQLITE_BLOB: {
      std::string hex = "b:";
      auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st, i));
      for (int k = 0; k < sqlite3_column_bytes(st, i); ++k) {
        std::snprintf(buf, sizeof buf, "%02x", p[k]);
        hex += buf;
      }
      return hex;
    }
  }
  return "NULL";
}

std::string block_cell(const store::RowBlock& b, size_t r, size_t c) {
  char buf[64];
  switch (b.type(r, c)) {
    case SQLITE_INTEGER:
      return "i:" + std::to_string(b.int64(r, c));
    case SQLITE_FLOAT:
      std::snprintf(buf, sizeof buf, "r:%.17g", b.real(r, c));
      return buf;
    case SQLITE_TEXT:
      return "t:" + std::string(b.bytes(r, c));
    case SQLITE_BLOB: {
      std::string hex = "b:";
      for (unsigned char ch : b.bytes(r, c)) {
        std::snprintf(buf, sizeof buf, "%02x", ch);
        hex += buf;
      }
      return hex;
    }
  }
  return "NULL";
}

// Rows with every storage class, extremes, repeats and mixed columns.
const char* kValues = R"SQL(
CREATE TABLE t(a, b, c, d, e);
INSERT INTO t VALUES
  (1, 'comm', 0.5, x'00ff', NULL),
  (-9223372036854775808, '', -0.0, x'', 7),
  (9223372036854775807, 'comm', 1e308, NULL, 'seven'),
  (0, 'ü✓', -1.5e-300, x'0102', 7.25),
  (NULL, NULL, NULL, NULL, x'07'),
  (42, 'comm', 2.0, x'00ff', 7);
)SQL";

struct Table {
  std::vector<std::vector<std::string>> rows;
  store::RowBlock block;
};

Table encode_values(size_t repeat = 1) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, kValues, nullptr, nullptr, nullptr), SQLITE_OK);
  Table t{{}, store::RowBlock({"a", "b", "c", "d", "e"})};
  for (size_t k = 0; k < repeat; ++k) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT a, b, c, d, e FROM t", -1, &st, nullptr), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < 5; ++i) row.push_back(cell(st, i));
      t.rows.push_back(row);
      t.block.add_row(st);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return t;
}

TEST(RowBlock, GivesBackEveryValueWithItsStorageClass) {
  Table t = encode_values(50);  // repeats: the integer columns take the list encoding
  std::string bytes = t.block.encode();
  ASSERT_FALSE(bytes.empty());
  auto back = store::RowBlock::decode(bytes);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->rows(), t.rows.size());
  EXPECT_EQ(back->columns(), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  for (size_t r = 0; r < t.rows.size(); ++r)
    for (size_t c = 0; c < 5; ++c)
      EXPECT_EQ(block_cell(*back, r, c), t.rows[r][c]) << r << "," << c;
  // Once each: differences instead of a list.
  Table once = encode_values(1);
  auto one = store::RowBlock::decode(once.block.encode());
  ASSERT_TRUE(one) << one.error().message;
  for (size_t r = 0; r < once.rows.size(); ++r)
    for (size_t c = 0; c < 5; ++c) EXPECT_EQ(block_cell(*one, r, c), once.rows[r][c]);
}

TEST(RowBlock, AnAlteredOrCutBlockIsAnError) {
  std::string bytes = encode_values(50).block.encode();
  ASSERT_TRUE(store::RowBlock::decode(bytes));
  // Every bit of every byte flipped in turn: an Error, or (a bit the frame's decoder ignores)
  // the very same rows. Never other values.
  Table t = encode_values(50);
  size_t errors = 0, same = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ (1 << bit));
      auto r = store::RowBlock::decode(bad);
      if (!r) {
        ++errors;
        EXPECT_EQ(r.error().message.rfind("damaged archive block: ", 0), 0u);
        continue;
      }
      ++same;
      ASSERT_EQ(r->rows(), t.rows.size()) << "byte " << i << " bit " << bit;
      for (size_t row = 0; row < t.rows.size(); ++row)
        for (size_t c = 0; c < 5; ++c)
          ASSERT_EQ(block_cell(*r, row, c), t.rows[row][c]) << "byte " << i << " bit " << bit;
    }
  // The few that decode (9 of 1,560 here: an unused bit of the frame header, bits of the
  // compressed data's tables that no symbol uses) give the same content, checksum and all.
  EXPECT_EQ(errors + same, bytes.size() * 8);
  EXPECT_GT(errors, bytes.size() * 8 * 9 / 10);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(store::RowBlock::decode(bytes.substr(0, n))) << "cut to " << n << " bytes";
  EXPECT_FALSE(store::RowBlock::decode(bytes + "x"));
  EXPECT_FALSE(store::RowBlock::decode("not a block at all"));
}

// `content` compressed as a block is, with its checksum.
std::string packed(const std::string& content) {
  std::string out(ZSTD_compressBound(content.size()), '\0');
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  size_t n = ZSTD_compress2(cctx, out.data(), out.size(), content.data(), content.size());
  ZSTD_freeCCtx(cctx);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

// A block compressed with its checksum whose content is wrong (a writer's bug, or a file made
// to mislead): each row's storage class must be one SQLite has, 1 to 5. Every other byte is
// refused, whatever its low bits (33 and 129 would read as classes 1 if only those were
// looked at).
TEST(RowBlock, AStorageClassSQLiteDoesNotHaveIsAnError) {
  store::ColumnBlock one({"a"});
  one.set_int(0, 7);
  one.end_row();
  one.end_row();  // NULL: the column lists each row's class
  std::string raw;
  one.encode_raw(raw);
  // version, rows, columns, the name's length and the name, then the column: 0 (classes per
  // row), then the rows' classes.
  const std::string head(
      "\x01\x02\x01\x01"
      "a"
      "\x00\x01\x05",
      8);
  ASSERT_EQ(raw.substr(0, head.size()), head);
  auto good = store::RowBlock::decode(packed(raw));
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->int64(0, 0), 7);
  EXPECT_EQ(good->type(1, 0), SQLITE_NULL);
  for (int bad : {0, 6, 7, 8, 33, 129, 255}) {
    std::string altered = raw;
    altered[6] = char(bad);
    auto r = store::RowBlock::decode(packed(altered));
    ASSERT_FALSE(r) << "class " << bad;
    EXPECT_EQ(r.error().message, "damaged archive block: bad storage class") << "class " << bad;
  }
}

// A reader of a few of a block's columns (store/archive_scan.h) reads past the others: those
// asked for come back exactly, the others all NULL, whatever the storage it decodes into held
// before (a full block of the same columns).
TEST(RowBlock, ColumnsNotAskedForAreReadPastAndReadAsNull) {
  for (size_t repeat : {1, 50}) {  // differences, and lists of distinct values
    Table t = encode_values(repeat);
    std::string bytes = t.block.encode();
    store::RowBlock into;
    ASSERT_TRUE(store::RowBlock::decode_into(bytes, into));
    const std::vector<std::string> only = {"b", "d", "not a column"};
    ASSERT_TRUE(store::RowBlock::decode_into(bytes, into, 64u << 20, &only));
    ASSERT_EQ(into.rows(), t.rows.size());
    EXPECT_EQ(into.columns(), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
    for (size_t c : {0, 2, 4}) EXPECT_TRUE(into.null_column(c)) << c;
    for (size_t r = 0; r < t.rows.size(); ++r)
      for (size_t c = 0; c < 5; ++c)
        EXPECT_EQ(block_cell(into, r, c), c == 1 || c == 3 ? t.rows[r][c] : "NULL")
            << repeat << ": " << r << "," << c;
    const std::vector<std::string> none;
    ASSERT_TRUE(store::RowBlock::decode_into(bytes, into, 64u << 20, &none));
    for (size_t c = 0; c < 5; ++c) EXPECT_TRUE(into.null_column(c)) << c;
  }
}

// Content whose checksum is right but whose layout is not (a writer's bug, a file made to
// mislead) is refused when its columns are read past as when they are read: cut anywhere, a
// byte too many, or a storage class SQLite does not have.
TEST(RowBlock, AColumnReadPastIsCheckedAsFarAsReadingPastNeeds) {
  for (size_t repeat : {1, 50}) {
    std::string bytes = encode_values(repeat).block.encode();
    std::string raw(ZSTD_getFrameContentSize(bytes.data(), bytes.size()), '\0');
    ASSERT_EQ(ZSTD_decompress(raw.data(), raw.size(), bytes.data(), bytes.size()), raw.size());
    const std::vector<std::string> none;
    store::RowBlock into;
    ASSERT_TRUE(store::RowBlock::decode_into(packed(raw), into, 64u << 20, &none));
    for (size_t n = 0; n < raw.size(); ++n) {
      auto st = store::RowBlock::decode_into(packed(raw.substr(0, n)), into, 64u << 20, &none);
      ASSERT_FALSE(st) << repeat << ": cut to " << n << " of " << raw.size();
    }
    EXPECT_FALSE(store::RowBlock::decode_into(packed(raw + "x"), into, 64u << 20, &none));
  }
  store::ColumnBlock one({"a"});
  one.set_int(0, 7);
  one.end_row();
  one.end_row();
  std::string raw;
  one.encode_raw(raw);
  raw[6] = char(6);  // the first row's class (as in the test above)
  const std::vector<std::string> none;
  store::RowBlock into;
  auto st = store::RowBlock::decode_into(packed(raw), into, 64u << 20, &none);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "damaged archive block: bad storage class");
}

}  // namespace
}  // namespace ingero::test

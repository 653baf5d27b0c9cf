// A block of table rows stored as one compressed value: how archived calls keep every column
// of every row in a few bytes (store/call_archive.h).
//
// The encoding is generic over SQLite values, so a decoded row is exactly the row that was
// encoded: the same columns, types and values, NULLs included. Column by column:
//   - the storage class of each row (one byte for the column when all rows share it);
//   - integers as zigzag varints of the difference from the column's previous integer, or,
//     where few distinct values repeat (pids, ops, stack hashes), as indexes into a list of
//     them;
//   - reals as their 8 bytes; text and blobs as indexes into the block's list of distinct
//     values.
// The whole is then compressed with zstd. A training loop repeats its op sequence, stacks and
// launch shapes every step, so a call takes a few bytes where an `events` row takes ~120.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hal/result.h"

namespace ingero::store {

class RowBlock {
 public:
  RowBlock() = default;
  explicit RowBlock(std::vector<std::string> columns) : columns_(std::move(columns)) {
    cols_.resize(columns_.size());
  }

  // Appends the current row of `st`, whose result columns `first`.. `first + columns() - 1`
  // are this block's columns, in order.
  void add_row(sqlite3_stmt* st, int first = 0);
  // Appends row `row` of `from`, a block of the same columns.
  void add_row(const RowBlock& from, size_t row);
  // The compressed block (empty rows give a valid empty block).
  std::string encode(int level = 3) const;
  // Decodes what encode() wrote. Anything else (a truncated or altered value, a count that
  // does not add up, more than `max_bytes` decompressed) is an Error; nothing is guessed.
  static ingero::Result<RowBlock> decode(std::string_view bytes, size_t max_bytes = 64u << 20);
  // The same into `into`, whose columns' storage is reused (a reader of many blocks allocates
  // nothing after the first). On an Error `into` is left empty. With `only`, a column not named
  // there is read past and kept as all NULL: a reader of a few of a block's columns does not
  // store the others (its layout is checked as far as reading past it needs).
  static ingero::Status decode_into(std::string_view bytes, RowBlock& into,
                                    size_t max_bytes = 64u << 20,
                                    const std::vector<std::string>* only = nullptr);

  const std::vector<std::string>& columns() const { return columns_; }
  size_t rows() const { return rows_; }
  // The column's storage class in `row` (SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT,
  // SQLITE_BLOB, SQLITE_NULL) and its value; int64() of a non-integer is 0.
  int type(size_t row, size_t col) const {
    const Column& c = cols_[col];
    return c.types.empty() ? c.uniform : c.types[row];
  }
  // Whether every row of the column is NULL.
  bool null_column(size_t col) const {
    return cols_[col].types.empty() && cols_[col].uniform == SQLITE_NULL;
  }
  int64_t int64(size_t row, size_t col) const {
    return type(row, col) == SQLITE_INTEGER ? cols_[col].values[row] : 0;
  }
  double real(size_t row, size_t col) const;
  std::string_view bytes(size_t row, size_t col) const;  // text or blob
  // Hands the value to SQLite (a virtual table's xColumn).
  void result(sqlite3_context* ctx, size_t row, size_t col) const;

  // One column's decoded storage, for a reader that looks at the same columns row after row
  // (store/archive_scan.h): the class and value of a row without going through the block's
  // column list. Valid until the block is decoded into again.
  struct ColumnView {
    const uint8_t* types = nullptr;  // null: every row is of class `uniform`
    uint8_t uniform = SQLITE_NULL;
    const int64_t* values = nullptr;
    const std::string* strings = nullptr;
    int type(size_t row) const { return types ? types[row] : uniform; }
  };
  ColumnView view(size_t col) const {
    const Column& c = cols_[col];
    return {c.types.empty() ? nullptr : c.types.data(), c.uniform, c.values.data(),
            c.strings.data()};
  }

 private:
  // Decoded, a column of one storage class has no `types`, and one of NULLs no `values`.
  struct Column {
    std::vector<uint8_t> types;
    uint8_t uniform = SQLITE_NULL;
    std::vector<int64_t> values;  // an integer, a real's bits, or an index into `strings`
    std::vector<std::string> strings;
    // Encoding: string -> its index, looked up by string_view (no copy per cell).
    struct Hash {
      using is_transparent = void;
      size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
    };
    std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> index;
  };
  struct Reader;
  static void append(Column& col, int type, int64_t v, std::string_view s);
  // Decodes one column of `rows` rows: an empty string, or what is wrong with it.
  static std::string decode_column(Reader& in, Column& col, size_t rows);
  // Reads past one column of `rows` rows, storing nothing; the same errors.
  static std::string skip_column(Reader& in, size_t rows);
  std::vector<std::string> columns_;
  std::vector<Column> cols_;
  size_t rows_ = 0;
};

}  // namespace ingero::store

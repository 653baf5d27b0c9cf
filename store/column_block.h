// The writing side of store::RowBlock (store/row_block.h): rows appended value by value, in
// typed columns, and encoded into the very bytes RowBlock::decode reads. This is how the trace
// writer keeps calls (store/call_block.h): a call goes from the decoded event into these
// columns once, and is never written as an SQLite row to be read back.
//
// Appending costs a few stores per value given: a column keeps only the rows where it holds a
// value (a NULL costs nothing), so a call's ~60 mostly-empty columns cost what its ~20 values
// cost. Integers and text only (calls and runs have no reals and no blobs).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ingero::store {

class ColumnBlock {
 public:
  explicit ColumnBlock(std::vector<std::string> names);

  // The row being appended is rows(); values set before end_row() belong to it. A column given
  // no value in a row is NULL there. Setting a column twice in one row keeps the last value.
  // Inline wherever it is called (a call sets ~20 columns): a call and a prologue a value
  // were a tenth of the tracer's CPU.
  [[gnu::always_inline]] void set_int(size_t col, int64_t v) {
    Column& c = cols_[col];
    if (!c.sparse && c.v.size() == rows_)  // the next row, as every row before it
      c.v.push_back(v);
    else
      put(c, v);
  }
  void set_text(size_t col, std::string_view s);
  void end_row() { ++rows_; }

  size_t rows() const { return rows_; }
  size_t columns() const { return cols_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  // Whether `col` holds a value in `row`, and which (0 / "" when NULL). Rows are found by
  // search where the column is sparse: for reading back a few rows (a run's first call), not
  // for scanning.
  bool has(size_t row, size_t col) const;
  int64_t int64(size_t row, size_t col) const;
  std::string_view text(size_t row, size_t col) const;

  // Appends row `row` of `from` (a block of the same columns).
  void add_row(const ColumnBlock& from, size_t row);
  // Appends the rows of `from` whose `keep` is set, in order, column by column: how the rows
  // folding keeps are copied into a block of their own (one pass over each column's values).
  void add_rows(const ColumnBlock& from, const std::vector<uint8_t>& keep);

  // The rows, as RowBlock::encode would give them (the same bytes RowBlock::decode reads),
  // compressed with zstd at `level` with its content checksum.
  std::string encode(int level = 3) const;
  // The same into `out` (its storage reused: a writer encoding block after block allocates, and
  // faults in, nothing after the first). False when compression failed (`out` then empty).
  bool encode_into(std::string& out, int level = 3) const;
  // The rows before compression (what encode_into compresses), into `raw`.
  void encode_raw(std::string& raw) const;
  // Forgets the rows, keeping the columns' storage for the next block.
  void clear();
  // Keeps the first `rows` rows.
  void truncate(size_t rows);

 private:
  struct Column {
    bool text = false;
    // Row r's value is v[r], for every row up to v.size() but those listed in `holes` (NULL
    // rows, their v a placeholder), while no more than half the rows are holes: a call's
    // launch fields, skipped by the few syncs and copies among its launches, still cost one
    // store a value. Past that (`sparse`), `at` lists the rows holding a value, ascending, and
    // v holds theirs. Most columns of a call are set on every row or never.
    bool sparse = false;
    std::vector<uint32_t> at;
    std::vector<uint32_t> holes;  // ascending; empty while sparse
    std::vector<int64_t> v;       // their integers, or indexes into `strings`
    uint32_t row_of(size_t i) const { return sparse ? at[i] : uint32_t(i); }
    // Whether v[i] holds a value (not a hole's placeholder).
    bool holds(size_t i) const {
      return sparse || holes.empty() || !std::binary_search(holes.begin(), holes.end(), i);
    }
    // The values held, in row order, into `out` (v itself when there is no hole).
    const std::vector<int64_t>& held(std::vector<int64_t>& out) const;
    // From holes to `at`: the rows holding a value listed, the placeholders dropped.
    void make_sparse();
    std::vector<std::string> strings;
    struct Hash {
      using is_transparent = void;
      size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
    };
    // text -> its index in `strings`
    std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> index;
    uint32_t last_index = 0;  // the last text set: a column repeats itself
    bool last_valid = false;
    // Where row r's value is: v[find(r)], or npos.
    size_t find(size_t row) const;
  };
  void put(Column& c, int64_t v);
  class RawBytes;
  void encode_column(const Column& c, RawBytes& raw) const;
  // The rows before compression into the first bytes of `storage`, which only grows; returns
  // how many.
  size_t encode_raw_into(std::string& storage) const;
  std::vector<std::string> names_;
  std::vector<Column> cols_;
  size_t rows_ = 0;
};

}  // namespace ingero::store

#include "store/column_block.h"

#include <sqlite3.h>
#include <zstd.h>

#include <algorithm>
#include <memory>

#include "hal/varint.h"

namespace ingero::store {
namespace {

using hal::put_varint;
using hal::zigzag;

constexpr uint64_t kVersion = 1;  // RowBlock's

// The distinct integers of a column, up to a bound, and each one's index once sorted: an
// open-addressing table sized for the bound (a column is listed when it has at most a quarter
// as many distinct values as values).
class DistinctInts {
 public:
  // Counts the distinct values of `v`; false as soon as there are more than `max`. When true,
  // indexes() holds each value's index among them, sorted.
  bool collect(const std::vector<int64_t>& v, size_t max) {
    size_t cap = 16;
    while (cap < 2 * max + 2) cap <<= 1;
    mask_ = cap - 1;
    keys_.assign(cap, 0);
    used_.assign(cap, 0);
    first_.resize(cap);
    values_.clear();
    order_.clear();
    // Each value's slot once: a value's index is known from its first sight (the order it was
    // first seen in), then mapped to its rank once the values are sorted.
    for (int64_t x : v) {
      size_t h = slot(x);
      if (!used_[h]) {
        if (values_.size() == max) return false;
        used_[h] = 1;
        keys_[h] = x;
        first_[h] = uint32_t(values_.size());
        values_.push_back(x);
      }
      order_.push_back(first_[h]);
    }
    rank_.resize(values_.size());
    std::sort(values_.begin(), values_.end());
    for (uint32_t i = 0; i < values_.size(); ++i) rank_[first_[slot(values_[i])]] = i;
    for (auto& o : order_) o = rank_[o];
    return true;
  }
  const std::vector<int64_t>& sorted() const { return values_; }
  const std::vector<uint32_t>& indexes() const { return order_; }

 private:
  size_t slot(int64_t x) const {
    uint64_t h = uint64_t(x) * 0x9E3779B97F4A7C15ull;
    size_t i = size_t(h >> 40) & mask_;
    while (used_[i] && keys_[i] != x) i = (i + 1) & mask_;
    return i;
  }
  size_t mask_ = 0;
  std::vector<int64_t> keys_;
  std::vector<uint8_t> used_;
  std::vector<uint32_t> first_;  // by slot: the index of its value in the order first seen
  std::vector<int64_t> values_;
  std::vector<uint32_t> order_;  // by row: its value's index (first seen, then sorted)
  std::vector<uint32_t> rank_;   // by first-seen index: the sorted index
};

// Appends f(v) of each of `values` as a varint (hal/varint.h's bytes): the room for the
// longest is made once, not a push_back a byte (a block's values were a tenth of the tracer's
// CPU written one byte at a time).
template <class T, class F>
void append_varints(std::string& raw, const std::vector<T>& values, F&& f) {
  size_t at = raw.size();
  raw.resize(at + values.size() * 10);
  char* p = raw.data() + at;
  for (T v : values) {
    uint64_t x = f(v);
    while (x >= 0x80) {
      *p++ = char(uint8_t(x) | 0x80);
      x >>= 7;
    }
    *p++ = char(uint8_t(x));
  }
  raw.resize(size_t(p - raw.data()));
}

}  // namespace

ColumnBlock::ColumnBlock(std::vector<std::string> names)
    : names_(std::move(names)), cols_(names_.size()) {}

void ColumnBlock::put(Column& c, int64_t v) {
  if (!c.sparse) {
    if (c.v.size() == rows_) {  // the next row, as every row before it
      c.v.push_back(v);
      return;
    }
    if (c.v.size() == rows_ + 1) {  // this row again
      c.v.back() = v;
      return;
    }
    c.sparse = true;  // rows were skipped: list the rows from now on
    c.at.resize(c.v.size());
    for (size_t i = 0; i < c.at.size(); ++i) c.at[i] = uint32_t(i);
  }
  if (!c.at.empty() && c.at.back() == rows_) {
    c.v.back() = v;
    return;
  }
  c.at.push_back(uint32_t(rows_));
  c.v.push_back(v);
}

void ColumnBlock::set_int(size_t col, int64_t v) { put(cols_[col], v); }

void ColumnBlock::set_text(size_t col, std::string_view s) {
  Column& c = cols_[col];
  c.text = true;
  if (!c.last_valid || c.strings[c.last_index] != s) {
    auto it = c.index.find(s);
    if (it == c.index.end()) {
      it = c.index.emplace(std::string(s), uint32_t(c.strings.size())).first;
      c.strings.emplace_back(s);
    }
    c.last_index = it->second;
    c.last_valid = true;
  }
  put(c, c.last_index);
}

size_t ColumnBlock::Column::find(size_t row) const {
  if (!sparse) return row < v.size() ? row : std::string::npos;
  if (at.size() > row && at[row] == row) return row;
  auto it = std::lower_bound(at.begin(), at.end(), uint32_t(row));
  return it != at.end() && *it == row ? size_t(it - at.begin()) : std::string::npos;
}

bool ColumnBlock::has(size_t row, size_t col) const {
  return cols_[col].find(row) != std::string::npos;
}

int64_t ColumnBlock::int64(size_t row, size_t col) const {
  const Column& c = cols_[col];
  size_t i = c.find(row);
  return i == std::string::npos || c.text ? 0 : c.v[i];
}

std::string_view ColumnBlock::text(size_t row, size_t col) const {
  const Column& c = cols_[col];
  size_t i = c.find(row);
  return i == std::string::npos || !c.text ? std::string_view() : c.strings[size_t(c.v[i])];
}

void ColumnBlock::add_row(const ColumnBlock& from, size_t row) {
  for (size_t col = 0; col < cols_.size(); ++col) {
    const Column& f = from.cols_[col];
    size_t i = f.find(row);
    if (i == std::string::npos) continue;
    if (f.text)
      set_text(col, f.strings[size_t(f.v[i])]);
    else
      set_int(col, f.v[i]);
  }
  end_row();
}

void ColumnBlock::add_rows(const ColumnBlock& from, const std::vector<uint8_t>& keep) {
  // Where each kept row of `from` lands here.
  static thread_local std::vector<uint32_t> to;
  to.resize(keep.size());
  uint32_t next = uint32_t(rows_);
  for (size_t r = 0; r < keep.size(); ++r) to[r] = keep[r] ? next++ : UINT32_MAX;
  for (size_t col = 0; col < cols_.size(); ++col) {
    const Column& f = from.cols_[col];
    Column& c = cols_[col];
    for (size_t i = 0; i < f.v.size(); ++i) {
      uint32_t r = f.row_of(i);
      if (r >= keep.size() || !keep[r]) continue;
      rows_ = to[r];  // put() appends to the row being built
      if (f.text)
        set_text(col, f.strings[size_t(f.v[i])]);
      else
        put(c, f.v[i]);
    }
  }
  rows_ = next;
}

void ColumnBlock::truncate(size_t rows) {
  if (rows >= rows_) return;
  for (Column& c : cols_) {
    while (!c.v.empty() && c.row_of(c.v.size() - 1) >= rows) {
      if (c.sparse) c.at.pop_back();
      c.v.pop_back();
    }
    if (!c.text) continue;
    // The dictionary keeps only the strings still used: a block lists no more strings than
    // rows (RowBlock::decode checks it).
    std::vector<std::string> used;
    std::unordered_map<uint32_t, uint32_t> renum;
    for (int64_t& v : c.v) {
      auto [it, fresh] = renum.try_emplace(uint32_t(v), uint32_t(used.size()));
      if (fresh) used.push_back(std::move(c.strings[size_t(v)]));
      v = it->second;
    }
    c.strings = std::move(used);
    c.index.clear();
    for (uint32_t i = 0; i < c.strings.size(); ++i) c.index.emplace(c.strings[i], i);
    c.last_valid = false;
  }
  rows_ = rows;
}

void ColumnBlock::clear() {
  for (Column& c : cols_) {
    c.sparse = false;
    c.at.clear();
    c.v.clear();
    c.strings.clear();
    c.index.clear();
    c.last_valid = false;
  }
  rows_ = 0;
}

void ColumnBlock::encode_column(const Column& c, std::string& raw) const {
  size_t n = c.v.size();
  int type = c.text ? SQLITE_TEXT : SQLITE_INTEGER;
  // Storage classes: one byte for the column where every row shares it.
  if (n == 0 || n == rows_) {
    raw.push_back(1);
    if (rows_ > 0) raw.push_back(char(n == 0 ? SQLITE_NULL : type));
  } else {
    raw.push_back(0);
    size_t start = raw.size();
    raw.append(rows_, char(SQLITE_NULL));
    for (size_t i = 0; i < n; ++i) raw[start + c.row_of(i)] = char(type);
  }
  if (c.text || n == 0) {
    raw.push_back(0);  // no integers
  } else {
    // A list of the distinct values where they repeat (pids, ops, stacks), else differences.
    static thread_local DistinctInts distinct;
    bool listed = distinct.collect(c.v, n / 4);
    raw.push_back(char(listed ? 1 : 0));
    int64_t prev = 0;
    auto delta = [&prev](int64_t v) {
      uint64_t d = zigzag(int64_t(uint64_t(v) - uint64_t(prev)));
      prev = v;
      return d;
    };
    if (listed) {
      put_varint(raw, distinct.sorted().size());
      append_varints(raw, distinct.sorted(), delta);
      append_varints(raw, distinct.indexes(), [](uint32_t i) { return uint64_t(i); });
    } else {
      append_varints(raw, c.v, delta);
    }
  }
  // Text: the list of the distinct values used, then each row's index into it. The column's
  // dictionary holds only strings set in this block (clear() empties it).
  put_varint(raw, c.text ? c.strings.size() : 0);
  if (c.text) {
    for (const auto& s : c.strings) {
      put_varint(raw, s.size());
      raw += s;
    }
    append_varints(raw, c.v, [](int64_t v) { return uint64_t(v); });
  }
}

std::string ColumnBlock::encode(int level) const {
  std::string out;
  encode_into(out, level);
  return out;
}

bool ColumnBlock::encode_into(std::string& out, int level) const {
  static thread_local std::string raw;
  raw.clear();
  put_varint(raw, kVersion);
  put_varint(raw, rows_);
  put_varint(raw, names_.size());
  for (const auto& name : names_) {
    put_varint(raw, name.size());
    raw += name;
  }
  for (const Column& c : cols_) encode_column(c, raw);
  // With zstd's checksum of the content, which RowBlock::decode requires.
  static thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(),
                                                                              ZSTD_freeCCtx);
  out.resize(ZSTD_compressBound(raw.size()));
  size_t n = cctx ? ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level) : 1;
  if (cctx && !ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  if (cctx && !ZSTD_isError(n))
    n = ZSTD_compress2(cctx.get(), out.data(), out.size(), raw.data(), raw.size());
  bool ok = cctx && !ZSTD_isError(n);
  out.resize(ok ? n : 0);
  return ok;
}

}  // namespace ingero::store

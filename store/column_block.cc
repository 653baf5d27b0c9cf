#include "store/column_block.h"

#include <sqlite3.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "hal/varint.h"

namespace ingero::store {

// The bytes of a block before compression, written through a pointer into room made ahead. The
// storage is never cleared or zero-filled: a writer encoding block after block only appends
// (std::string::resize zero-fills what it adds, which was a tenth of the encoding's work).
class ColumnBlock::RawBytes {
 public:
  explicit RawBytes(std::string& storage) : s_(storage) {}
  // Room for `n` more bytes at the end; used() then says where the writing stopped.
  char* room(size_t n) {
    if (n_ + n > s_.size()) s_.resize(std::max(n_ + n, 2 * s_.size()));
    return s_.data() + n_;
  }
  void used(const char* end) { n_ = size_t(end - s_.data()); }
  void push(char c) {
    *room(1) = c;
    ++n_;
  }
  void fill(size_t n, char c) {
    std::memset(room(n), c, n);
    n_ += n;
  }
  void append(std::string_view b) {
    std::memcpy(room(b.size()), b.data(), b.size());
    n_ += b.size();
  }
  void varint(uint64_t x) {
    char* p = room(10);
    while (x >= 0x80) {
      *p++ = char(uint8_t(x) | 0x80);
      x >>= 7;
    }
    *p++ = char(uint8_t(x));
    used(p);
  }
  const char* data() const { return s_.data(); }
  size_t size() const { return n_; }
  char& at(size_t i) { return s_[i]; }

 private:
  std::string& s_;
  size_t n_ = 0;
};

namespace {

using hal::zigzag;

constexpr uint64_t kVersion = 1;  // RowBlock's

// The distinct integers of a column, up to a bound, and each one's index once sorted: an
// open-addressing table sized for the bound (a column is listed when it has at most a quarter
// as many distinct values as values).
//
// It runs on every integer column of every block the writer encodes, so it does little per
// value: a value equal to the one before it (a thread's pid, op and stack run on) is not looked
// up again, a column that only grows (ids, timestamps) is known unlisted from one pass without
// a lookup, and the table is not cleared between columns (a slot is empty unless it carries
// the current column's mark).
class DistinctInts {
 public:
  // Counts the distinct values of `v`; false as soon as there are more than `max`. When true,
  // row r's value is sorted()[rank(order()[r])]: its index in the order first seen, mapped to
  // its index among the values sorted (the encoder maps them as it writes them).
  bool collect(const std::vector<int64_t>& v, size_t max) {
    values_.clear();
    order_.clear();
    if (v.size() > max && increasing(v)) return false;  // as many distinct values as rows
    size_t cap = 16;
    while (cap < 2 * max + 2) cap <<= 1;
    if (keys_.size() < cap) {
      keys_.resize(cap);
      mark_.resize(cap);
      first_.resize(cap);
    }
    if (++now_ == 0) {  // the marks wrapped: clear them once
      std::fill(mark_.begin(), mark_.end(), 0);
      now_ = 1;
    }
    const size_t mask = cap - 1;
    const uint32_t now = now_;
    int64_t* keys = keys_.data();
    uint32_t* mark = mark_.data();
    uint32_t* first = first_.data();
    order_.resize(v.size());
    uint32_t* order = order_.data();
    // Each value's slot once: a value's index is known from its first sight (the order it was
    // first seen in), then mapped to its rank once the values are sorted.
    int64_t prev = 0;
    uint32_t prev_index = UINT32_MAX;
    for (size_t r = 0; r < v.size(); ++r) {
      int64_t x = v[r];
      if (x != prev || prev_index == UINT32_MAX) {
        size_t h = slot(keys, mark, now, mask, x);
        if (mark[h] != now) {
          if (values_.size() == max) return false;
          mark[h] = now;
          keys[h] = x;
          first[h] = uint32_t(values_.size());
          values_.push_back(x);
        }
        prev = x;
        prev_index = first[h];
      }
      order[r] = prev_index;
    }
    rank_.resize(values_.size());
    std::sort(values_.begin(), values_.end());
    for (uint32_t i = 0; i < values_.size(); ++i)
      rank_[first[slot(keys, mark, now, mask, values_[i])]] = i;
    return true;
  }
  const std::vector<int64_t>& sorted() const { return values_; }
  const std::vector<uint32_t>& order() const { return order_; }
  const std::vector<uint32_t>& ranks() const { return rank_; }

 private:
  static bool increasing(const std::vector<int64_t>& v) {
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] <= v[i - 1]) return false;
    return true;
  }
  static size_t slot(const int64_t* keys, const uint32_t* mark, uint32_t now, size_t mask,
                     int64_t x) {
    uint64_t h = uint64_t(x) * 0x9E3779B97F4A7C15ull;
    size_t i = size_t(h >> 40) & mask;
    while (mark[i] == now && keys[i] != x) i = (i + 1) & mask;
    return i;
  }
  uint32_t now_ = 0;             // the current column's mark
  std::vector<int64_t> keys_;    // by slot
  std::vector<uint32_t> mark_;   // by slot: the column that filled it
  std::vector<uint32_t> first_;  // by slot: the index of its value in the order first seen
  std::vector<int64_t> values_;
  std::vector<uint32_t> order_;  // by row: its value's index in the order first seen
  std::vector<uint32_t> rank_;   // by first-seen index: the sorted index
};

// Appends f(v) of each of `values` as a varint (hal/varint.h's bytes): the room for the
// longest is made once, not a push_back a byte (a block's values were a tenth of the tracer's
// CPU written one byte at a time).
template <class Raw, class T, class F>
void append_varints(Raw& raw, const std::vector<T>& values, F&& f) {
  char* p = raw.room(values.size() * 10);
  for (T v : values) {
    uint64_t x = f(v);
    while (x >= 0x80) {
      *p++ = char(uint8_t(x) | 0x80);
      x >>= 7;
    }
    *p++ = char(uint8_t(x));
  }
  raw.used(p);
}

}  // namespace

ColumnBlock::ColumnBlock(std::vector<std::string> names)
    : names_(std::move(names)), cols_(names_.size()) {}

void ColumnBlock::put(Column& c, int64_t v) {
  if (!c.sparse) {
    const size_t n = c.v.size();
    if (n == rows_) {  // the next row, as every row before it
      c.v.push_back(v);
      return;
    }
    if (n == rows_ + 1) {  // this row again
      c.v.back() = v;
      return;
    }
    // Rows n .. rows_ - 1 were skipped: holes, while at most half the rows are.
    const size_t gap = rows_ - n;
    if (2 * (c.holes.size() + gap) <= rows_ + 1) {
      for (size_t r = n; r < rows_; ++r) c.holes.push_back(uint32_t(r));
      c.v.resize(rows_, 0);
      c.v.push_back(v);
      return;
    }
    c.make_sparse();  // list the rows from now on
  }
  if (!c.at.empty() && c.at.back() == rows_) {
    c.v.back() = v;
    return;
  }
  c.at.push_back(uint32_t(rows_));
  c.v.push_back(v);
}

void ColumnBlock::Column::make_sparse() {
  sparse = true;
  at.clear();
  size_t h = 0, kept = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (h < holes.size() && holes[h] == i) {
      ++h;
      continue;
    }
    at.push_back(uint32_t(i));
    v[kept++] = v[i];
  }
  v.resize(kept);
  holes.clear();
}

const std::vector<int64_t>& ColumnBlock::Column::held(std::vector<int64_t>& out) const {
  if (sparse || holes.empty()) return v;
  // The runs of values between the holes, each copied at once (a column with holes has few).
  out.clear();
  size_t from = 0;
  for (uint32_t h : holes) {
    out.insert(out.end(), v.begin() + long(from), v.begin() + long(h));
    from = size_t(h) + 1;
  }
  out.insert(out.end(), v.begin() + long(from), v.end());
  return out;
}

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
  if (!sparse) return row < v.size() && holds(row) ? row : std::string::npos;
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
  // Folding keeps a few calls of a block: each column visits the rows kept, not every row.
  static thread_local std::vector<uint32_t> kept;     // the rows of `from` kept, ascending
  static thread_local std::vector<uint32_t> text_at;  // a text's index in `from` -> here
  kept.clear();
  for (size_t r = 0; r < keep.size(); ++r)
    if (keep[r]) kept.push_back(uint32_t(r));
  const size_t first = rows_;
  for (size_t col = 0; col < cols_.size(); ++col) {
    const Column& f = from.cols_[col];
    Column& c = cols_[col];
    if (f.v.empty()) continue;
    if (f.text) text_at.assign(f.strings.size(), UINT32_MAX);
    // Kept row k of `from` is row first + k here; put() appends to the row being built.
    auto add = [&](size_t k, int64_t v) {
      rows_ = first + k;
      if (!f.text) return put(c, v);
      uint32_t& here = text_at[size_t(v)];
      if (here != UINT32_MAX) return put(c, here);  // a text seen: no lookup of the string
      set_text(col, f.strings[size_t(v)]);
      here = c.last_index;
    };
    if (!f.sparse) {
      size_t h = 0;  // the holes and the rows kept, both ascending, walked together
      for (size_t k = 0; k < kept.size() && kept[k] < f.v.size(); ++k) {
        while (h < f.holes.size() && f.holes[h] < kept[k]) ++h;
        if (h < f.holes.size() && f.holes[h] == kept[k]) continue;
        add(k, f.v[kept[k]]);
      }
      continue;
    }
    size_t k = 0;  // the rows holding a value and the rows kept, both ascending, walked together
    for (size_t i = 0; i < f.v.size() && k < kept.size(); ++i) {
      while (k < kept.size() && kept[k] < f.at[i]) ++k;
      if (k < kept.size() && kept[k] == f.at[i]) add(k, f.v[i]);
    }
  }
  rows_ = first + kept.size();
}

void ColumnBlock::truncate(size_t rows) {
  if (rows >= rows_) return;
  for (Column& c : cols_) {
    while (!c.v.empty() && c.row_of(c.v.size() - 1) >= rows) {
      if (c.sparse) c.at.pop_back();
      c.v.pop_back();
    }
    while (!c.holes.empty() && c.holes.back() >= rows) c.holes.pop_back();
    if (!c.text) continue;
    // The dictionary keeps only the strings still used: a block lists no more strings than
    // rows (RowBlock::decode checks it).
    std::vector<std::string> used;
    std::unordered_map<uint32_t, uint32_t> renum;
    for (size_t i = 0; i < c.v.size(); ++i) {
      if (!c.holds(i)) continue;  // a placeholder names no string
      int64_t& v = c.v[i];
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
    c.holes.clear();
    c.v.clear();
    c.strings.clear();
    c.index.clear();
    c.last_valid = false;
  }
  rows_ = 0;
}

void ColumnBlock::encode_column(const Column& c, RawBytes& raw) const {
  // The values held, in row order (v without its holes' placeholders).
  static thread_local std::vector<int64_t> scratch;
  const std::vector<int64_t>& vals = c.held(scratch);
  size_t n = vals.size();
  int type = c.text ? SQLITE_TEXT : SQLITE_INTEGER;
  // Storage classes: one byte for the column where every row shares it.
  if (n == 0 || n == rows_) {
    raw.push(1);
    if (rows_ > 0) raw.push(char(n == 0 ? SQLITE_NULL : type));
  } else {
    raw.push(0);
    size_t start = raw.size();
    raw.fill(rows_, char(SQLITE_NULL));
    if (c.sparse) {
      for (size_t i = 0; i < n; ++i) raw.at(start + c.at[i]) = char(type);
    } else {
      std::memset(&raw.at(start), type, c.v.size());
      for (uint32_t h : c.holes) raw.at(start + h) = char(SQLITE_NULL);
    }
  }
  if (c.text || n == 0) {
    raw.push(0);  // no integers
  } else {
    // A list of the distinct values where they repeat (pids, ops, stacks), else differences.
    static thread_local DistinctInts distinct;
    bool listed = distinct.collect(vals, n / 4);
    raw.push(char(listed ? 1 : 0));
    int64_t prev = 0;
    auto delta = [&prev](int64_t v) {
      uint64_t d = zigzag(int64_t(uint64_t(v) - uint64_t(prev)));
      prev = v;
      return d;
    };
    if (listed) {
      raw.varint(distinct.sorted().size());
      append_varints(raw, distinct.sorted(), delta);
      const uint32_t* rank = distinct.ranks().data();
      append_varints(raw, distinct.order(), [rank](uint32_t i) { return uint64_t(rank[i]); });
    } else {
      append_varints(raw, vals, delta);
    }
  }
  // Text: the list of the distinct values used, then each row's index into it. The column's
  // dictionary holds only strings set in this block (clear() empties it).
  raw.varint(c.text ? c.strings.size() : 0);
  if (c.text) {
    for (const auto& s : c.strings) {
      raw.varint(s.size());
      raw.append(s);
    }
    append_varints(raw, vals, [](int64_t v) { return uint64_t(v); });
  }
}

std::string ColumnBlock::encode(int level) const {
  std::string out;
  encode_into(out, level);
  return out;
}

size_t ColumnBlock::encode_raw_into(std::string& storage) const {
  RawBytes raw(storage);
  raw.varint(kVersion);
  raw.varint(rows_);
  raw.varint(names_.size());
  for (const auto& name : names_) {
    raw.varint(name.size());
    raw.append(name);
  }
  for (const Column& c : cols_) encode_column(c, raw);
  return raw.size();
}

void ColumnBlock::encode_raw(std::string& raw) const { raw.resize(encode_raw_into(raw)); }

bool ColumnBlock::encode_into(std::string& out, int level) const {
  // Both kept at their largest, so that neither is zero-filled again block after block.
  static thread_local std::string raw, packed;
  size_t n_raw = encode_raw_into(raw);
  // With zstd's checksum of the content, which RowBlock::decode requires.
  static thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(),
                                                                              ZSTD_freeCCtx);
  if (packed.size() < ZSTD_compressBound(n_raw)) packed.resize(ZSTD_compressBound(n_raw));
  size_t n = cctx ? ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level) : 1;
  if (cctx && !ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  if (cctx && !ZSTD_isError(n))
    n = ZSTD_compress2(cctx.get(), packed.data(), packed.size(), raw.data(), n_raw);
  bool ok = cctx && !ZSTD_isError(n);
  out.assign(packed.data(), ok ? n : 0);
  return ok;
}

}  // namespace ingero::store

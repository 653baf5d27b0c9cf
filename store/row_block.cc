#include "store/row_block.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "hal/varint.h"

namespace ingero::store {
namespace {

constexpr uint64_t kVersion = 1;
constexpr uint64_t kMaxRows = 1u << 20, kMaxColumns = 4096, kMaxCells = 1u << 26;

using hal::put_varint;
using hal::unzigzag;
using hal::zigzag;

bool is_string(int type) { return type == SQLITE_TEXT || type == SQLITE_BLOB; }

}  // namespace

// Reads what put_varint wrote; every read checks the end, and a failed one sticks.
struct RowBlock::Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;

  uint64_t varint() {
    if (p < end && *p < 0x80) return *p++;  // most are one byte: list indexes, small steps
    if (end - p >= 10) {                    // a whole varint fits: no check of the end per byte
      uint64_t x = 0;
      for (int shift = 0; shift < 70; shift += 7) {
        uint8_t b = *p++;
        x |= uint64_t(b & 0x7f) << shift;
        if (!(b & 0x80)) return x;
      }
      ok = false;
      return 0;
    }
    uint64_t x = 0;
    for (int shift = 0; ok; shift += 7) {
      if (p == end || shift > 63) break;
      uint8_t b = *p++;
      x |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return x;
    }
    ok = false;
    return 0;
  }
  std::string_view bytes(uint64_t n) {
    if (!ok || n > uint64_t(end - p)) {
      ok = false;
      return {};
    }
    std::string_view s(reinterpret_cast<const char*>(p), n);
    p += n;
    return s;
  }
  uint8_t byte() {
    auto s = bytes(1);
    return ok ? uint8_t(s[0]) : 0;
  }
  // Reads past `n` varints.
  void skip_varints(uint64_t n) {
    for (; n > 0 && ok; --n) {
      int len = 1;
      while (p < end && (*p & 0x80) && len < 10) ++p, ++len;
      if (p == end || (*p & 0x80)) {
        ok = false;
        return;
      }
      ++p;
    }
  }
};

void RowBlock::append(Column& col, int type, int64_t v, std::string_view s) {
  if (is_string(type)) {
    auto it = col.index.find(s);
    if (it == col.index.end()) {
      it = col.index.emplace(std::string(s), int64_t(col.strings.size())).first;
      col.strings.emplace_back(s);
    }
    v = it->second;
  }
  col.types.push_back(uint8_t(type));
  col.values.push_back(type == SQLITE_NULL ? 0 : v);
}

void RowBlock::add_row(sqlite3_stmt* st, int first) {
  for (size_t c = 0; c < cols_.size(); ++c) {
    int i = first + int(c);
    int type = sqlite3_column_type(st, i);
    int64_t v = 0;
    std::string_view s;
    if (type == SQLITE_INTEGER) {
      v = sqlite3_column_int64(st, i);
    } else if (type == SQLITE_FLOAT) {
      double d = sqlite3_column_double(st, i);
      std::memcpy(&v, &d, sizeof v);
    } else if (is_string(type)) {
      const void* p = type == SQLITE_TEXT ? static_cast<const void*>(sqlite3_column_text(st, i))
                                          : sqlite3_column_blob(st, i);
      s = std::string_view(static_cast<const char*>(p ? p : ""),
                           size_t(sqlite3_column_bytes(st, i)));
    }
    append(cols_[c], type, v, s);
  }
  ++rows_;
}

void RowBlock::add_row(const RowBlock& from, size_t row) {
  for (size_t c = 0; c < cols_.size(); ++c) {
    int type = from.type(row, c);
    int64_t v = 0;
    if (type == SQLITE_INTEGER) {
      v = from.int64(row, c);
    } else if (type == SQLITE_FLOAT) {
      double d = from.real(row, c);
      std::memcpy(&v, &d, sizeof v);
    }
    append(cols_[c], type, v, is_string(type) ? from.bytes(row, c) : std::string_view());
  }
  ++rows_;
}

std::string RowBlock::encode(int level) const {
  std::string raw;
  put_varint(raw, kVersion);
  put_varint(raw, rows_);
  put_varint(raw, columns_.size());
  for (const auto& name : columns_) {
    put_varint(raw, name.size());
    raw += name;
  }
  for (const Column& col : cols_) {
    bool uniform = std::all_of(col.types.begin(), col.types.end(),
                               [&](uint8_t t) { return t == col.types.front(); });
    raw.push_back(char(uniform ? 1 : 0));
    if (uniform && rows_ > 0)
      raw.push_back(char(col.types.front()));
    else if (!uniform)
      raw.append(col.types.begin(), col.types.end());
    // Integers: a list of the distinct values when they repeat, else differences.
    std::vector<int64_t> ints;
    for (size_t r = 0; r < rows_; ++r)
      if (col.types[r] == SQLITE_INTEGER) ints.push_back(col.values[r]);
    std::vector<int64_t> distinct(ints);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    bool listed = !ints.empty() && distinct.size() * 4 <= ints.size();
    raw.push_back(char(listed ? 1 : 0));
    int64_t prev = 0;
    if (listed) {
      put_varint(raw, distinct.size());
      for (int64_t v : distinct) {
        put_varint(raw, zigzag(int64_t(uint64_t(v) - uint64_t(prev))));
        prev = v;
      }
      for (int64_t v : ints)
        put_varint(raw, uint64_t(std::lower_bound(distinct.begin(), distinct.end(), v) -
                                 distinct.begin()));
    } else {
      for (int64_t v : ints) {
        put_varint(raw, zigzag(int64_t(uint64_t(v) - uint64_t(prev))));
        prev = v;
      }
    }
    for (size_t r = 0; r < rows_; ++r)
      if (col.types[r] == SQLITE_FLOAT)
        raw.append(reinterpret_cast<const char*>(&col.values[r]), 8);
    put_varint(raw, col.strings.size());
    for (const auto& s : col.strings) {
      put_varint(raw, s.size());
      raw += s;
    }
    for (size_t r = 0; r < rows_; ++r)
      if (is_string(col.types[r])) put_varint(raw, uint64_t(col.values[r]));
  }
  // With zstd's checksum of the content, which decode() requires: a block altered anywhere
  // fails to decode instead of giving other values.
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  size_t n = cctx ? ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level) : 1;
  if (cctx && !ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  if (cctx && !ZSTD_isError(n))
    n = ZSTD_compress2(cctx.get(), out.data(), out.size(), raw.data(), raw.size());
  out.resize(!cctx || ZSTD_isError(n) ? 0 : n);
  return out;
}

std::string RowBlock::decode_column(Reader& in, Column& col, size_t rows) {
  // The storage classes present, bit t for class t (bit 8 for any byte above 7): a column
  // without reals, or without text, skips the pass over its rows that would look for them
  // (nearly every column of calls). SQLite's classes are 1 to 5; any other bit is damage.
  auto bit = [](uint8_t t) { return t < 8 ? 1u << t : 1u << 8; };
  constexpr unsigned kClasses = (1u << SQLITE_INTEGER) | (1u << SQLITE_FLOAT) |
                                (1u << SQLITE_TEXT) | (1u << SQLITE_BLOB) | (1u << SQLITE_NULL);
  unsigned seen = 0;
  uint8_t uniform = in.byte();
  if (uniform == 1) {
    col.uniform = rows > 0 ? in.byte() : uint8_t(SQLITE_NULL);
    seen = bit(col.uniform);
  } else {
    auto t = in.bytes(rows);
    col.types.assign(t.begin(), t.end());
    for (uint8_t c : col.types) seen |= bit(c);
  }
  if (seen & ~kClasses) return "bad storage class";
  const bool any_float = seen & (1u << SQLITE_FLOAT);
  const bool any_string = seen & ((1u << SQLITE_TEXT) | (1u << SQLITE_BLOB));
  if (!in.ok) return "";  // the caller says truncated
  auto type = [&](size_t r) { return col.types.empty() ? col.uniform : col.types[r]; };
  bool all_null = col.types.empty() && col.uniform == SQLITE_NULL;
  bool all_ints = col.types.empty() && col.uniform == SQLITE_INTEGER;
  // A value of a row of another class than the column's stays unread (int64(), real() and
  // bytes() look at the row's class first). Every row of a column is written below, a NULL
  // row's value 0, so a decoded block does not depend on the storage it reused: resized, not
  // zeroed first (which was a memset of every cell of every block, 5% of explain).
  if (all_null)
    col.values.clear();
  else
    col.values.resize(rows);
  // Integers: differences, or indexes into the list of distinct values.
  uint8_t listed = in.byte();
  int64_t prev = 0;
  static thread_local std::vector<int64_t> distinct;
  distinct.clear();
  if (listed) {
    uint64_t k = in.varint();
    if (k > rows) return "bad value list";
    for (uint64_t i = 0; i < k && in.ok; ++i) {
      prev = int64_t(uint64_t(prev) + uint64_t(unzigzag(in.varint())));
      distinct.push_back(prev);
    }
  }
  int64_t* out = col.values.data();
  if (all_ints && in.ok) {
    // The common case, nearly every cell of a block of calls: no class to look at per row. A
    // read past the end sticks (in.ok) and reads 0s: the caller then says truncated.
    if (listed) {
      const int64_t* d = distinct.data();
      size_t k = distinct.size();
      for (size_t r = 0; r < rows; ++r) {
        uint64_t i = in.varint();
        if (i >= k) return in.ok ? "bad value index" : "";
        out[r] = d[i];
      }
    } else {
      for (size_t r = 0; r < rows; ++r) {
        prev = int64_t(uint64_t(prev) + uint64_t(unzigzag(in.varint())));
        out[r] = prev;
      }
    }
  }
  for (size_t r = 0; r < rows && in.ok && !all_ints && !all_null; ++r) {
    if (type(r) != SQLITE_INTEGER) {
      if (type(r) == SQLITE_NULL) out[r] = 0;
      continue;
    }
    if (listed) {
      uint64_t i = in.varint();
      if (i >= distinct.size()) return "bad value index";
      out[r] = distinct[i];
    } else {
      prev = int64_t(uint64_t(prev) + uint64_t(unzigzag(in.varint())));
      out[r] = prev;
    }
  }
  for (size_t r = 0; r < rows && in.ok && any_float; ++r)
    if (type(r) == SQLITE_FLOAT) {
      auto v = in.bytes(8);
      if (in.ok) std::memcpy(&out[r], v.data(), 8);
    }
  // Text and blobs: the list of distinct values, then each row's index.
  uint64_t k = in.varint();
  if (k > rows) return "bad string list";
  for (uint64_t i = 0; i < k && in.ok; ++i) col.strings.emplace_back(in.bytes(in.varint()));
  for (size_t r = 0; r < rows && in.ok && any_string; ++r) {
    if (!is_string(type(r))) continue;
    uint64_t i = in.varint();
    if (i >= col.strings.size()) return "bad string index";
    out[r] = int64_t(i);
  }
  return "";
}

std::string RowBlock::skip_column(Reader& in, size_t rows) {
  // decode_column's reads, in its order, counting each class's rows instead of storing them.
  uint64_t of[256] = {};
  if (in.byte() == 1) {
    if (rows > 0) of[in.byte()] = rows;
  } else {
    for (char c : in.bytes(rows)) ++of[uint8_t(c)];
  }
  if (!in.ok) return "";
  for (int t = 0; t < 256; ++t)
    if (of[t] && (t < SQLITE_INTEGER || t > SQLITE_NULL)) return "bad storage class";
  if (in.byte()) {  // the list of distinct integers, then an index a row
    uint64_t k = in.varint();
    if (k > rows) return "bad value list";
    in.skip_varints(k);
  }
  in.skip_varints(of[SQLITE_INTEGER]);
  in.bytes(8 * of[SQLITE_FLOAT]);
  uint64_t k = in.varint();
  if (k > rows) return "bad string list";
  for (uint64_t i = 0; i < k && in.ok; ++i) in.bytes(in.varint());
  in.skip_varints(of[SQLITE_TEXT] + of[SQLITE_BLOB]);
  return "";
}

ingero::Result<RowBlock> RowBlock::decode(std::string_view bytes, size_t max_bytes) {
  RowBlock b;
  if (auto st = decode_into(bytes, b, max_bytes); !st) return st.error();
  return b;
}

ingero::Status RowBlock::decode_into(std::string_view bytes, RowBlock& b, size_t max_bytes,
                                     const std::vector<std::string>* only) {
  auto bad = [&b](const std::string& why) {
    b.rows_ = 0;
    b.columns_.clear();
    b.cols_.clear();
    return ingero::make_error("damaged archive block: " + why);
  };
  unsigned long long size = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    return bad("not a compressed block");
  // The frame header's descriptor (RFC 8878, after the 4-byte magic): bit 2 says the content
  // checksum follows.
  if (bytes.size() < 5 || !(uint8_t(bytes[4]) & 0x04)) return bad("no checksum");
  if (size > max_bytes) return bad("it claims " + std::to_string(size) + " bytes");
  // One buffer per thread, reused: a block decompresses to ~100 KB.
  static thread_local std::string raw;
  raw.resize(size);
  // One frame exactly: bytes after it are damage too.
  if (ZSTD_findFrameCompressedSize(bytes.data(), bytes.size()) != bytes.size())
    return bad("its length is not its frame's");
  size_t n = ZSTD_decompress(raw.data(), raw.size(), bytes.data(), bytes.size());
  if (ZSTD_isError(n) || n != size) return bad("it does not decompress");
  auto* p = reinterpret_cast<const uint8_t*>(raw.data());
  Reader in{p, p + raw.size()};
  if (in.varint() != kVersion) return bad("unknown version");
  uint64_t rows = in.varint(), ncols = in.varint();
  // Bounded before anything is allocated by them: a hostile block costs at most ~0.5 GB.
  if (!in.ok || rows > kMaxRows || ncols > kMaxColumns || rows * ncols > kMaxCells)
    return bad("bad header");
  b.rows_ = rows;
  b.columns_.resize(ncols);
  for (uint64_t c = 0; c < ncols && in.ok; ++c) b.columns_[c].assign(in.bytes(in.varint()));
  // The columns' vectors keep their capacity: a reader decoding block after block into one
  // RowBlock allocates (and faults in) nothing after the first. Values keep their size too:
  // decode_column writes every row over them (clearing them first would have zeroed every
  // cell of every block).
  b.cols_.resize(ncols);
  for (Column& col : b.cols_) {
    col.types.clear();
    col.uniform = SQLITE_NULL;
    col.strings.clear();
    col.index.clear();
  }
  for (size_t c = 0; c < ncols && in.ok; ++c) {
    bool wanted = !only || std::find(only->begin(), only->end(), b.columns_[c]) != only->end();
    // A column read past stays all NULL (uniform, no values), as cleared above.
    std::string why = wanted ? decode_column(in, b.cols_[c], rows) : skip_column(in, rows);
    if (!why.empty()) return bad(why);
  }
  if (!in.ok) return bad("truncated");
  if (in.p != in.end) return bad("trailing bytes");
  return {};
}

double RowBlock::real(size_t row, size_t col) const {
  const Column& c = cols_[col];
  int t = type(row, col);
  if (t == SQLITE_INTEGER) return double(c.values[row]);
  if (t != SQLITE_FLOAT) return 0;
  double d;
  std::memcpy(&d, &c.values[row], sizeof d);
  return d;
}

std::string_view RowBlock::bytes(size_t row, size_t col) const {
  const Column& c = cols_[col];
  return is_string(type(row, col)) ? std::string_view(c.strings[size_t(c.values[row])])
                                   : std::string_view();
}

void RowBlock::result(sqlite3_context* ctx, size_t row, size_t col) const {
  switch (type(row, col)) {
    case SQLITE_INTEGER:
      sqlite3_result_int64(ctx, cols_[col].values[row]);
      break;
    case SQLITE_FLOAT:
      sqlite3_result_double(ctx, real(row, col));
      break;
    case SQLITE_TEXT: {
      auto s = bytes(row, col);
      sqlite3_result_text(ctx, s.data(), int(s.size()), SQLITE_TRANSIENT);
      break;
    }
    case SQLITE_BLOB: {
      auto s = bytes(row, col);
      sqlite3_result_blob(ctx, s.data(), int(s.size()), SQLITE_TRANSIENT);
      break;
    }
    default:
      sqlite3_result_null(ctx);
  }
}

}  // namespace ingero::store

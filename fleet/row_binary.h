// ClickHouse's RowBinary format, the body of every INSERT the shipper sends: rows one after the
// other, each value in its column's binary layout, with no separators and no escaping.
//
//   UInt8, UInt32, UInt64, Int64   little-endian, the type's width
//   Float64                        the IEEE 754 double, little-endian
//   String                         its length as an unsigned LEB128 varint, then its bytes
//   Nullable(T)                    one byte, 1 for NULL (nothing follows), 0 then T's value
//
// ClickHouse 18.16 (Debian 12) and current versions read it on HTTP INSERTs, compressed
// (Content-Encoding: gzip). Compared with TabSeparated it costs the encoder no formatting or
// escaping and the server no parsing: the shipper encodes integers as they are stored.
// Values follow the trace file's (SpoolRow and the call blocks alike): a NULL where the
// column is not Nullable is 0 or ''.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/ch_schema.h"
#include "hal/result.h"

namespace ingero::fleet {

// The column types the shipper writes (ch_schema.h uses no others).
enum class ChBase : uint8_t { kString, kUInt8, kUInt32, kUInt64, kInt64, kFloat64 };
struct ChType {
  ChBase base = ChBase::kInt64;
  bool nullable = false;
};

// "Nullable(Int64)" -> {kInt64, true}. An Error names a type the encoder does not know.
ingero::Result<ChType> parse_ch_type(std::string_view type);
// The types of a table's columns, in order (an Error when one is unknown).
ingero::Result<std::vector<ChType>> column_types(const TableSpec& t);

// Appends values to a RowBinary body. Each call writes one whole value, the Nullable flag
// included.
class RowBinary {
 public:
  explicit RowBinary(std::string& out) : out_(out) {}
  void null(ChType t) {
    if (t.nullable)
      out_.push_back('\1');
    else if (t.base == ChBase::kString)
      out_.push_back('\0');  // '' (length 0)
    else
      fixed(t.base, 0);
  }
  void integer(ChType t, int64_t v) {
    if (t.nullable) out_.push_back('\0');
    if (t.base == ChBase::kString) {
      char buf[24];
      text_of(v, buf);
      string_value(buf);
    } else if (t.base == ChBase::kFloat64) {
      double d = double(v);
      raw(&d, 8);
    } else {
      fixed(t.base, v);
    }
  }
  void real(ChType t, double v) {
    if (t.nullable) out_.push_back('\0');
    if (t.base == ChBase::kFloat64)
      raw(&v, 8);
    else if (t.base == ChBase::kString) {
      char buf[40];
      real_text(v, buf);
      string_value(buf);
    } else
      fixed(t.base, int64_t(v));
  }
  // Text into a String column; into an integer column, its leading integer (as SQLite reads
  // text as an integer).
  void text(ChType t, std::string_view s);

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void fixed(ChBase b, int64_t v) {
    switch (b) {
      case ChBase::kUInt8: {
        uint8_t x = uint8_t(v);
        raw(&x, 1);
        break;
      }
      case ChBase::kUInt32: {
        uint32_t x = uint32_t(v);
        raw(&x, 4);
        break;
      }
      default:
        raw(&v, 8);  // UInt64, Int64 (two's complement: the same bytes)
    }
  }
  void string_value(std::string_view s) {
    uint64_t n = s.size();
    while (n >= 0x80) {
      out_.push_back(char(uint8_t(n) | 0x80));
      n >>= 7;
    }
    out_.push_back(char(n));
    out_.append(s);
  }
  static void text_of(int64_t v, char* buf);   // as SQLite writes an integer as text
  static void real_text(double v, char* buf);  // and a real ("12.5", "1.0")
  std::string& out_;
};

}  // namespace ingero::fleet

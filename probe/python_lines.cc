// Source lines from a CPython code object's line table (probe/python.h): the PEP 657 location
// table of 3.11+, and 3.10's (bytecode delta, line delta) pairs.
#include <string>

#include "probe/python.h"

namespace ingero::hal {

namespace {

// PEP 657 location table varints: 6-bit chunks, bit 6 = more.
struct TableReader {
  const std::string& t;
  size_t i = 0;
  bool ok = true;
  int byte() {
    if (i >= t.size()) {
      ok = false;
      return 0;
    }
    return static_cast<unsigned char>(t[i++]);
  }
  uint64_t varint() {
    int b = byte();
    uint64_t v = b & 63;
    int shift = 6;
    while (ok && (b & 64) && shift < 64) {
      b = byte();
      v |= uint64_t(b & 63) << shift;
      shift += 6;
    }
    return v;
  }
  int64_t svarint() {
    uint64_t v = varint();
    return (v & 1) ? -int64_t(v >> 1) : int64_t(v >> 1);
  }
};

}  // namespace

int python_line_location_table(const std::string& table, int firstlineno, uint64_t byte_offset) {
  uint64_t target = byte_offset / 2;  // code units
  TableReader r{table};
  int64_t line = firstlineno;
  uint64_t addr = 0;
  while (r.i < table.size()) {
    int first = r.byte();
    if (!(first & 0x80)) return 0;  // not at an entry start: malformed
    int code = (first >> 3) & 15;
    uint64_t len = uint64_t(first & 7) + 1;
    bool has_line = true;
    if (code == 15) {
      has_line = false;
    } else if (code == 14) {
      line += r.svarint();
      r.varint();  // end line delta
      r.varint();  // column + 1
      r.varint();  // end column + 1
    } else if (code == 13) {
      line += r.svarint();
    } else if (code >= 10) {
      line += code - 10;
      r.byte();
      r.byte();
    } else {
      r.byte();
    }
    if (!r.ok) return 0;
    if (target >= addr && target < addr + len) return has_line && line > 0 ? int(line) : 0;
    addr += len;
  }
  return 0;
}

int python_line_310(const std::string& table, int firstlineno, uint64_t byte_offset) {
  uint64_t start = 0, end = 0;
  int64_t computed = firstlineno;
  int64_t line = -1;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    start = end;
    end += static_cast<unsigned char>(table[i]);
    int ldelta = static_cast<signed char>(table[i + 1]);
    if (ldelta == -128) {
      line = -1;
    } else {
      computed += ldelta;
      line = computed;
    }
    if (byte_offset >= start && byte_offset < end) return line > 0 ? int(line) : 0;
  }
  return 0;
}

}  // namespace ingero::hal

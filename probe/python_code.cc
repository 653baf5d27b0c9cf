// A Python process's code objects (probe/python.h): as BPF shipped them or read from the
// process, checked against PyCode_Type, cached, and resolved to `file:line in function`.
#include <algorithm>
#include <cstring>

#include "probe/python.h"

namespace ingero::hal {

void PythonProcess::add_code(const ingero_py_code_rec& r) {
  Code c;
  bool file_ok = r.file_len <= INGERO_PY_FILE_MAX, name_ok = r.name_len <= INGERO_PY_NAME_MAX;
  bool table_ok = r.table_len != 0xffffffff;
  if (file_ok && name_ok && table_ok) {
    c.file.assign(r.file, r.file_len);
    c.name.assign(r.name, r.name_len);
    size_t n = std::min<size_t>(r.table_len, INGERO_PY_TABLE_MAX);
    c.linetable.assign(reinterpret_cast<const char*>(r.table), n);
    c.table_cut = r.table_len > INGERO_PY_TABLE_MAX;
    c.firstlineno = r.firstlineno;
    c.ok = true;
    verified_ = true;
    codes_[r.code] = std::move(c);
    return;
  }
  // A long or non-ASCII name: read it from the process while it lives.
  bool gone = false;
  if (read_code(r.code, c, &gone)) codes_[r.code] = std::move(c);
}

std::optional<std::string> PythonProcess::read_str(const ProcessMemory& mem, uint64_t obj) const {
  auto type = mem.u64(obj + layout_.ob_type);
  if (!type || *type != unicode_type_) return std::nullopt;
  auto len = mem.u64(obj + layout_.unicode_length);
  uint32_t state = 0;
  if (!len || *len > 4096 || !mem.read(obj + layout_.unicode_state, &state, 4)) return std::nullopt;
  unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || (kind != 1 && kind != 2 && kind != 4)) return std::nullopt;
  uint64_t data = obj + (ascii ? layout_.ascii_size : layout_.compact_size);
  std::string raw(size_t(*len) * kind, '\0');
  if (!raw.empty() && !mem.read(data, raw.data(), raw.size())) return std::nullopt;
  if (kind == 1 && ascii) return raw;
  std::string out;  // UCS1/2/4 -> UTF-8
  for (size_t i = 0; i < *len; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, raw.data() + i * kind, kind);
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += char(0xC0 | (c >> 6));
      out += char(0x80 | (c & 63));
    } else if (c < 0x10000) {
      out += char(0xE0 | (c >> 12));
      out += char(0x80 | ((c >> 6) & 63));
      out += char(0x80 | (c & 63));
    } else {
      out += char(0xF0 | (c >> 18));
      out += char(0x80 | ((c >> 12) & 63));
      out += char(0x80 | ((c >> 6) & 63));
      out += char(0x80 | (c & 63));
    }
  }
  return out;
}

std::optional<std::string> PythonProcess::read_bytes(const ProcessMemory& mem, uint64_t obj) const {
  auto type = mem.u64(obj + layout_.ob_type);
  if (!type || *type != bytes_type_) return std::nullopt;
  auto n = mem.u64(obj + layout_.var_size);
  if (!n || *n > (1u << 20)) return std::nullopt;
  std::string out(size_t(*n), '\0');
  if (!out.empty() && !mem.read(obj + layout_.bytes_sval, out.data(), out.size()))
    return std::nullopt;
  return out;
}

bool PythonProcess::read_code(uint64_t code_addr, Code& c, bool* gone) {
  ProcessMemory mem(pid_, proc_root_);
  auto type = mem.u64(code_addr + layout_.ob_type);
  if (!type) {
    *gone = true;
    return false;
  }
  c = Code{};
  if (*type != code_type_) return true;  // a verdict: not a code object (c.ok stays false)
  auto fn = mem.u64(code_addr + layout_.code_filename);
  uint64_t name_off =
      layout_.code_qualname != kNoOffset ? layout_.code_qualname : layout_.code_name;
  auto nm = mem.u64(code_addr + name_off);
  auto lt = mem.u64(code_addr + layout_.code_linetable);
  auto first = mem.i32(code_addr + layout_.code_firstlineno);
  auto file = fn ? read_str(mem, *fn) : std::nullopt;
  auto name = nm ? read_str(mem, *nm) : std::nullopt;
  auto table = lt ? read_bytes(mem, *lt) : std::nullopt;
  if (file && name && table && first) {
    c.file = *file;
    c.name = *name;
    c.linetable = *table;
    c.firstlineno = *first;
    c.ok = true;
    verified_ = true;
  }
  return true;
}

std::optional<PyFrameInfo> PythonProcess::resolve(uint64_t code_addr, uint64_t instr) {
  auto it = codes_.find(code_addr);
  if (it == codes_.end()) {
    Code c;
    bool gone = false;
    if (!read_code(code_addr, c, &gone)) {  // gone (exited), not wrong: no verdict to remember
      ++unreadable_;
      return std::nullopt;
    }
    it = codes_.emplace(code_addr, std::move(c)).first;
  }
  if (!it->second.ok) {
    ++invalid_;
    return std::nullopt;
  }
  const Code& c = it->second;
  uint64_t offset;
  if (layout_.instr_is_index) {
    offset = uint64_t(uint32_t(instr)) * 2;  // 3.10: f_lasti counts code units
  } else {
    uint64_t base = code_addr + layout_.code_adaptive;
    if (instr < base || instr - base > (64u << 20)) {
      ++invalid_;
      return std::nullopt;
    }
    offset = instr - base;
  }
  PyFrameInfo f;
  f.file = c.file;
  f.function = c.name;
  auto line_of = [&](const Code& x) {
    return layout_.location_table ? python_line_location_table(x.linetable, x.firstlineno, offset)
                                  : python_line_310(x.linetable, x.firstlineno, offset);
  };
  f.line = line_of(c);
  if (!f.line && c.table_cut) {  // past the shipped part of the table: the live one, if any
    Code full;
    bool gone = false;
    if (read_code(code_addr, full, &gone) && full.ok) {
      f.line = line_of(full);
      it->second = std::move(full);
    }
  }
  return f;
}

}  // namespace ingero::hal

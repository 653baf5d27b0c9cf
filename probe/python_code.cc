#include "probe/python.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "hal/elf_symbols.h"

namespace ingero::hal {

namespace {

// The layouts of the CPython versions without _Py_DebugOffsets.
constexpr PyLayout kLayouts[] = {
    // _PyRuntimeState.interpreters.head, PyInterpreterState.tstate_head; PyFrameObject.
    {.major = 3,
     .minor = 10,
     .runtime_interp_head = 32,
     .interp_threads_head = 8,
     .tstate_next = 8,
     .tstate_interp = 16,
     .tstate_thread_id = 176,  // thread_id (pthread_self): 3.10 has no native_thread_id
     .thread_id_is_pthread = true,
     .tstate_frame = 24,    // PyThreadState.frame
     .frame_code = 32,      // PyFrameObject.f_code
     .frame_previous = 24,  // f_back
     .frame_instr = 96,     // f_lasti (instruction index)
     .instr_is_index = true,
     .code_filename = 104,
     .code_name = 112,
     .code_firstlineno = 40,
     .code_linetable = 120,
     .ascii_size = 48,
     .compact_size = 72,
     .location_table = false},
    {.major = 3,
     .minor = 11,
     .runtime_interp_head = 40,
     .interp_threads_head = 16,
     .tstate_next = 8,
     .tstate_interp = 16,
     .tstate_thread_id = 160,  // native_thread_id
     .tstate_frame = 56,       // cframe
     .cframe_current_frame = 8,
     .frame_code = 32,
     .frame_previous = 48,
     .frame_instr = 56,  // prev_instr
     .frame_owner = 69,
     .frame_is_entry = 68,
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_firstlineno = 72,
     .code_linetable = 136,
     .code_adaptive = 184,
     .ascii_size = 48,
     .compact_size = 72,
     .location_table = true},
    {.major = 3,
     .minor = 12,
     .runtime_interp_head = 40,
     .interp_threads_head = 72,
     .tstate_next = 8,
     .tstate_interp = 16,
     .tstate_thread_id = 144,
     .tstate_frame = 56,  // cframe
     .cframe_current_frame = 0,
     .frame_code = 0,
     .frame_previous = 8,
     .frame_instr = 56,  // prev_instr
     .frame_owner = 70,
     .owner_cstack = 3,  // FRAME_OWNED_BY_CSTACK
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_firstlineno = 68,
     .code_linetable = 136,
     .code_adaptive = 192,
     .ascii_size = 40,
     .compact_size = 56,
     .location_table = true},
};

// Where 3.13's _Py_DebugOffsets keeps each offset we read (a uint64_t at that byte).
constexpr std::pair<uint32_t PyLayout::*, size_t> kDebugOffsets313[] = {
    {&PyLayout::runtime_interp_head, 40}, {&PyLayout::interp_threads_head, 72},
    {&PyLayout::tstate_next, 168},        {&PyLayout::tstate_interp, 176},
    {&PyLayout::tstate_frame, 184},                                      // current_frame
    {&PyLayout::tstate_thread_id, 200},                                  // native_thread_id
    {&PyLayout::frame_previous, 232},     {&PyLayout::frame_code, 240},  // f_executable
    {&PyLayout::frame_instr, 248},                                       // instr_ptr
    {&PyLayout::frame_owner, 264},        {&PyLayout::code_filename, 280},
    {&PyLayout::code_name, 288},          {&PyLayout::code_qualname, 296},
    {&PyLayout::code_linetable, 304},     {&PyLayout::code_firstlineno, 312},
    {&PyLayout::code_adaptive, 344},      {&PyLayout::ob_type, 360},
    {&PyLayout::var_size, 520},           {&PyLayout::bytes_sval, 528},
    {&PyLayout::unicode_state, 544},      {&PyLayout::unicode_length, 552},
    {&PyLayout::ascii_size, 560},
};

}  // namespace

std::optional<PyLayout> python_layout(int major, int minor) {
  for (const auto& l : kLayouts)
    if (l.major == major && l.minor == minor) return l;
  return std::nullopt;
}

Result<PyLayout> python_layout_from_debug_offsets(const uint8_t* d, size_t size) {
  // The 3.13 _Py_DebugOffsets: cookie, version, free_threaded, then groups of uint64_t.
  constexpr size_t kSize313 = 584;
  if (size < kSize313) return make_error("_Py_DebugOffsets: short read");
  if (std::memcmp(d, "xdebugpy", 8) != 0) return make_error("_Py_DebugOffsets: no cookie");
  auto u = [&](size_t off) {
    uint64_t v;
    std::memcpy(&v, d + off, 8);
    return v;
  };
  uint64_t version = u(8);
  int major = int((version >> 24) & 0xff), minor = int((version >> 16) & 0xff);
  if (major != 3 || minor != 13)
    return make_error("_Py_DebugOffsets of Python " + std::to_string(major) + "." +
                      std::to_string(minor) + ": only the 3.13 layout of the offsets is known");
  if (u(16) != 0) return make_error("free-threaded (no-GIL) CPython builds are not supported");
  PyLayout l;
  l.major = 3;
  l.minor = 13;
  for (const auto& [member, at] : kDebugOffsets313) {
    uint64_t v = u(at);
    l.*member = v < kNoOffset ? uint32_t(v) : kNoOffset;
  }
  l.owner_cstack = 3;
  l.compact_size = l.ascii_size + 16;  // utf8_length, utf8
  l.location_table = true;
  for (uint32_t v :
       {l.runtime_interp_head, l.interp_threads_head, l.tstate_frame, l.tstate_thread_id,
        l.frame_code, l.frame_instr, l.code_linetable, l.code_adaptive})
    if (v == kNoOffset) return make_error("_Py_DebugOffsets: an offset is out of range");
  return l;
}

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

ProcessMemory::ProcessMemory(int pid, const std::string& proc_root) {
  fd_ = ::open((proc_root + "/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
}

ProcessMemory::~ProcessMemory() {
  if (fd_ >= 0) ::close(fd_);
}

bool ProcessMemory::read(uint64_t addr, void* out, size_t n) const {
  if (fd_ < 0 || addr == 0) return false;
  ssize_t got = pread(fd_, out, n, off_t(addr));
  return got == ssize_t(n);
}

std::optional<uint64_t> ProcessMemory::u64(uint64_t addr) const {
  uint64_t v;
  if (!read(addr, &v, 8)) return std::nullopt;
  return v;
}

std::optional<int32_t> ProcessMemory::i32(uint64_t addr) const {
  int32_t v;
  if (!read(addr, &v, 4)) return std::nullopt;
  return v;
}

namespace {

// "python3.11", "libpython3.12.so.1.0", "python3.10d" -> {3, 11}
std::optional<std::pair<int, int>> version_from_name(const std::string& base) {
  static const std::regex re(R"((?:^|lib)python(\d)\.(\d+))");
  std::smatch m;
  if (!std::regex_search(base, m, re)) return std::nullopt;
  return std::make_pair(std::stoi(m[1]), std::stoi(m[2]));
}

}  // namespace

Result<std::optional<PythonProcess>> PythonProcess::inspect(int pid,
                                                            const std::vector<MapEntry>& maps,
                                                            const std::string& proc_root) {
  // Candidate modules: mapped files whose name says python, in map order (the executable
  // first, then libpython).
  std::vector<std::string> seen;
  for (const auto& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || m.deleted) continue;
    std::string base = std::filesystem::path(m.path).filename();
    if (base.find("python") == std::string::npos) continue;
    if (std::find(seen.begin(), seen.end(), m.path) != seen.end()) continue;
    seen.push_back(m.path);
  }
  std::string root = proc_root + "/" + std::to_string(pid) + "/root";
  for (const auto& path : seen) {
    auto idx = SymbolIndex::load(root + path);
    if (!idx) idx = SymbolIndex::load(path);
    if (!idx) continue;
    const ElfSymbol* rt = (*idx)->find_object("_PyRuntime");
    if (!rt) continue;
    // Load bias from the mapping of file offset 0.
    const MapEntry* first = nullptr;
    for (const auto& m : maps)
      if (m.path == path && m.offset == 0) {
        first = &m;
        break;
      }
    if (!first || (*idx)->loads().empty()) continue;
    uint64_t base_vaddr = (*idx)->loads().front().vaddr & ~uint64_t(0xfff);
    uint64_t bias = first->start - base_vaddr;
    PythonProcess p;
    p.pid_ = pid;
    p.proc_root_ = proc_root;
    p.interpreter_ = path;
    p.runtime_ = rt->value + bias;
    auto obj = [&](const char* n) -> uint64_t {
      const ElfSymbol* s = (*idx)->find_object(n);
      return s ? s->value + bias : 0;
    };
    p.code_type_ = obj("PyCode_Type");
    p.unicode_type_ = obj("PyUnicode_Type");
    p.bytes_type_ = obj("PyBytes_Type");
    ProcessMemory mem(pid, proc_root);
    if (!mem.ok()) return make_error("pid " + std::to_string(pid) + ": cannot read process memory");
    // The version: the binary's Py_Version (3.11+), else its file name.
    int major = 0, minor = 0;
    if (uint64_t pv = obj("Py_Version")) {
      uint32_t hex = 0;
      if (mem.read(pv, &hex, 4)) major = int((hex >> 24) & 0xff), minor = int((hex >> 16) & 0xff);
    }
    if (!major) {
      auto v = version_from_name(std::filesystem::path(path).filename());
      if (v) major = v->first, minor = v->second;
    }
    if (major == 3 && minor == 13) {
      uint8_t buf[584];
      if (!mem.read(p.runtime_, buf, sizeof buf))
        return make_error(path + ": cannot read _Py_DebugOffsets of pid " + std::to_string(pid));
      auto l = python_layout_from_debug_offsets(buf, sizeof buf);
      if (!l) return make_error(path + ": " + l.error().message);
      p.layout_ = *l;
    } else if (auto l = python_layout(major, minor)) {
      p.layout_ = *l;
    } else {
      return make_error(path + ": Python " + std::to_string(major) + "." + std::to_string(minor) +
                        " has no known frame layout (supported: 3.10-3.13)");
    }
    if (!p.code_type_ || !p.unicode_type_ || !p.bytes_type_)
      return make_error(
          path +
          ": PyCode_Type/PyUnicode_Type/PyBytes_Type are not exported; cannot verify frames");
    // Verify: the first thread state points back at its interpreter.
    auto interp = mem.u64(p.runtime_ + p.layout_.runtime_interp_head);
    if (!interp) return make_error(path + ": cannot read _PyRuntime of pid " + std::to_string(pid));
    if (*interp) {
      auto ts = mem.u64(*interp + p.layout_.interp_threads_head);
      if (ts && *ts) {
        auto back = mem.u64(*ts + p.layout_.tstate_interp);
        // A thread state whose interpreter is not set yet is still being linked (a read racing
        // the interpreter's start): not yet verifiable, and no sign of another layout.
        if (back && *back == 0) return std::optional<PythonProcess>(std::move(p));
        if (!back || *back != *interp)
          return make_error(
              path + " (Python " + p.layout_.version() +
              "): the thread list does not lead back to the interpreter; the build's layout "
              "differs from CPython's (a distro patch?). Python frames are off for pid " +
              std::to_string(pid));
        p.verified_ = true;
      }
    }
    return std::optional<PythonProcess>(std::move(p));
  }
  return std::optional<PythonProcess>();
}

ingero_py_config PythonProcess::bpf_config() const {
  ingero_py_config c{};
  const PyLayout& l = layout_;
  c.runtime = runtime_;
  c.version = uint32_t(l.major << 8 | l.minor);
  c.runtime_interp_head = uint16_t(l.runtime_interp_head);
  c.interp_threads_head = uint16_t(l.interp_threads_head);
  c.tstate_next = uint16_t(l.tstate_next);
  c.tstate_thread_id = uint16_t(l.tstate_thread_id);
  c.tstate_frame = uint16_t(l.tstate_frame);
  c.cframe_current_frame = uint16_t(l.cframe_current_frame);
  c.frame_code = uint16_t(l.frame_code);
  c.frame_previous = uint16_t(l.frame_previous);
  c.frame_instr = uint16_t(l.frame_instr);
  c.frame_owner = uint16_t(l.frame_owner);
  c.frame_is_entry = uint16_t(l.frame_is_entry);
  c.thread_id_is_pthread = l.thread_id_is_pthread ? 1 : 0;
  c.instr_is_int = l.instr_is_index ? 1 : 0;
  c.owner_cstack = l.owner_cstack;
  c.code_type = code_type_;
  c.code_filename = uint16_t(l.code_filename);
  c.code_name = uint16_t(l.code_qualname != kNoOffset ? l.code_qualname : l.code_name);
  c.code_firstlineno = uint16_t(l.code_firstlineno);
  c.code_linetable = uint16_t(l.code_linetable);
  c.unicode_state = uint16_t(l.unicode_state);
  c.unicode_length = uint16_t(l.unicode_length);
  c.ascii_data = uint16_t(l.ascii_size);
  c.bytes_size = uint16_t(l.var_size);
  c.bytes_data = uint16_t(l.bytes_sval);
  return c;
}

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

// How a process's interpreter is found and its layout chosen and verified (probe/python.h:
// PythonProcess::inspect), and what the BPF walk is told of it.
#include <algorithm>
#include <filesystem>
#include <regex>
#include <utility>

#include "hal/elf_symbols.h"
#include "probe/python.h"

namespace ingero::hal {

namespace {

// "python3.11", "libpython3.12.so.1.0", "python3.10d" -> {3, 11}
std::optional<std::pair<int, int>> version_from_name(const std::string& base) {
  static const std::regex re(R"((?:^|lib)python(\d)\.(\d+))");
  std::smatch m;
  if (!std::regex_search(base, m, re)) return std::nullopt;
  return std::make_pair(std::stoi(m[1]), std::stoi(m[2]));
}

// Candidate modules: mapped files whose name says python, in map order (the executable first,
// then libpython).
std::vector<std::string> python_modules(const std::vector<MapEntry>& maps) {
  std::vector<std::string> seen;
  for (const auto& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || m.deleted) continue;
    // The file's name: looked at in every mapping of every process shown at its exec.
    std::string_view base = std::string_view(m.path).substr(m.path.rfind('/') + 1);
    if (base.find("python") == std::string_view::npos) continue;
    if (std::find(seen.begin(), seen.end(), m.path) != seen.end()) continue;
    seen.push_back(m.path);
  }
  return seen;
}

// The load bias of `path` in the process, from its mapping of file offset 0; nullopt when it
// has none or the file no loadable segment.
std::optional<uint64_t> load_bias(const std::vector<MapEntry>& maps, const std::string& path,
                                  const SymbolIndex& idx) {
  const MapEntry* first = nullptr;
  for (const auto& m : maps)
    if (m.path == path && m.offset == 0) {
      first = &m;
      break;
    }
  if (!first || idx.loads().empty()) return std::nullopt;
  uint64_t base_vaddr = idx.loads().front().vaddr & ~uint64_t(0xfff);
  return first->start - base_vaddr;
}

// The version: the binary's Py_Version (3.11+; `py_version` is its address, 0 when it has
// none), else its file name; {0, 0} when neither says.
std::pair<int, int> python_version(const ProcessMemory& mem, uint64_t py_version,
                                   const std::string& path) {
  int major = 0, minor = 0;
  if (py_version) {
    uint32_t hex = 0;
    if (mem.read(py_version, &hex, 4))
      major = int((hex >> 24) & 0xff), minor = int((hex >> 16) & 0xff);
  }
  if (!major) {
    auto v = version_from_name(std::filesystem::path(path).filename());
    if (v) major = v->first, minor = v->second;
  }
  return {major, minor};
}

// The layout of that version: 3.13's from its _Py_DebugOffsets at `runtime`, the others' from
// the table. An Error for a version without one.
Result<PyLayout> layout_of(const ProcessMemory& mem, uint64_t runtime, int major, int minor,
                           const std::string& path, int pid) {
  if (major == 3 && minor == 13) {
    uint8_t buf[584];
    if (!mem.read(runtime, buf, sizeof buf))
      return make_error(path + ": cannot read _Py_DebugOffsets of pid " + std::to_string(pid));
    auto l = python_layout_from_debug_offsets(buf, sizeof buf);
    if (!l) return make_error(path + ": " + l.error().message);
    return *l;
  }
  if (auto l = python_layout(major, minor)) return *l;
  return make_error(path + ": Python " + std::to_string(major) + "." + std::to_string(minor) +
                    " has no known frame layout (supported: 3.10-3.13)");
}

// Whether the first thread state points back at its interpreter: true; false while that cannot
// be told yet (no interpreter or thread yet, or a thread still being linked); an Error when it
// points elsewhere (the build's layout is not CPython's) or _PyRuntime cannot be read.
Result<bool> thread_list_verified(const ProcessMemory& mem, uint64_t runtime, const PyLayout& l,
                                  const std::string& path, int pid) {
  auto interp = mem.u64(runtime + l.runtime_interp_head);
  if (!interp) return make_error(path + ": cannot read _PyRuntime of pid " + std::to_string(pid));
  if (!*interp) return false;
  auto ts = mem.u64(*interp + l.interp_threads_head);
  if (!ts || !*ts) return false;
  auto back = mem.u64(*ts + l.tstate_interp);
  // A thread state whose interpreter is not set yet is still being linked (a read racing the
  // interpreter's start): not yet verifiable, and no sign of another layout.
  if (back && *back == 0) return false;
  if (!back || *back != *interp)
    return make_error(path + " (Python " + l.version() +
                      "): the thread list does not lead back to the interpreter; the build's "
                      "layout differs from CPython's (a distro patch?). Python frames are off for "
                      "pid " +
                      std::to_string(pid));
  return true;
}

}  // namespace

Result<std::optional<PythonProcess>> PythonProcess::inspect(int pid,
                                                            const std::vector<MapEntry>& maps,
                                                            const std::string& proc_root) {
  std::string root = proc_root + "/" + std::to_string(pid) + "/root";
  for (const auto& path : python_modules(maps)) {
    auto idx = SymbolIndex::load(root + path);
    if (!idx) idx = SymbolIndex::load(path);
    if (!idx) continue;
    const ElfSymbol* rt = (*idx)->find_object("_PyRuntime");
    if (!rt) continue;
    auto bias = load_bias(maps, path, **idx);
    if (!bias) continue;
    PythonProcess p;
    p.pid_ = pid;
    p.proc_root_ = proc_root;
    p.interpreter_ = path;
    p.runtime_ = rt->value + *bias;
    auto obj = [&](const char* n) -> uint64_t {
      const ElfSymbol* s = (*idx)->find_object(n);
      return s ? s->value + *bias : 0;
    };
    p.code_type_ = obj("PyCode_Type");
    p.unicode_type_ = obj("PyUnicode_Type");
    p.bytes_type_ = obj("PyBytes_Type");
    ProcessMemory mem(pid, proc_root);
    if (!mem.ok()) return make_error("pid " + std::to_string(pid) + ": cannot read process memory");
    auto [major, minor] = python_version(mem, obj("Py_Version"), path);
    auto layout = layout_of(mem, p.runtime_, major, minor, path, pid);
    if (!layout) return layout.error();
    p.layout_ = *layout;
    if (!p.code_type_ || !p.unicode_type_ || !p.bytes_type_)
      return make_error(
          path +
          ": PyCode_Type/PyUnicode_Type/PyBytes_Type are not exported; cannot verify frames");
    auto verified = thread_list_verified(mem, p.runtime_, p.layout_, path, pid);
    if (!verified) return verified.error();
    p.verified_ = *verified;
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

}  // namespace ingero::hal

// CPython frames for mixed stacks: where each interpreter version keeps its threads, frames and
// code objects, how a process's interpreter is found and its layout verified, and how a code
// object plus an instruction position become `file:line in function`.
//
// Layouts: 3.10, 3.11 and 3.12 from a table (docs/stacks.md says where every number comes
// from; tests/unit/python_layout_test.cc recompiles them against the interpreters' own
// headers when present); 3.13 from the interpreter's own _Py_DebugOffsets, read from the
// process. A layout is used only after it checks out against the live process (the thread
// list leads back to the interpreter, code objects have PyCode_Type); otherwise the process is
// reported as unverified and no Python frame is ever produced for it.
//
// Where each part lives: python_layout.cc (the layouts), python_inspect.cc (finding the
// interpreter, choosing and verifying its layout, the BPF config), python_code.cc (code objects
// resolved to frames), python_lines.cc (line tables), python_walk.cc (a thread walked from user
// space), process_memory.cc (ProcessMemory).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hal/result.h"
#include "ingero_records.h"
#include "probe/proc_maps.h"

namespace ingero::hal {

inline constexpr uint32_t kNoOffset = 0xffff;

struct PyLayout {
  int major = 3, minor = 0;
  // Threads and frames (the part BPF walks).
  uint32_t runtime_interp_head = 0, interp_threads_head = 0;
  uint32_t tstate_next = 0, tstate_interp = 0, tstate_thread_id = 0;
  bool thread_id_is_pthread = false;  // 3.10: thread_id (pthread_self) instead of native_thread_id
  uint32_t tstate_frame = 0;          // 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame
  uint32_t cframe_current_frame = kNoOffset;
  uint32_t frame_code = 0, frame_previous = 0, frame_instr = 0;
  bool instr_is_index = false;  // 3.10: f_lasti, an instruction index
  uint32_t frame_owner = kNoOffset, frame_is_entry = kNoOffset;
  uint8_t owner_cstack = 0xff;  // 3.12+: frames owned by the C stack are shims
  // Code objects and strings (the part user space reads).
  uint32_t code_filename = 0, code_name = 0, code_qualname = kNoOffset, code_firstlineno = 0;
  uint32_t code_linetable = 0, code_adaptive = kNoOffset;  // co_code_adaptive (3.11+)
  uint32_t ob_type = 8, var_size = 16, bytes_sval = 32;
  uint32_t unicode_state = 32, unicode_length = 16, ascii_size = 48, compact_size = 72;
  bool location_table = false;  // 3.11+ PEP 657 table; 3.10: (bytecode delta, line delta) pairs

  std::string version() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// The table: 3.10, 3.11, 3.12. nullopt for other versions.
std::optional<PyLayout> python_layout(int major, int minor);
// 3.13 from the bytes of its _Py_DebugOffsets (the start of _PyRuntime). Checks the cookie
// and the version; another layout of the offsets struct is an Error.
Result<PyLayout> python_layout_from_debug_offsets(const uint8_t* data, size_t size);

// A source line from a code object's line table, for a byte offset into its bytecode.
// Returns 0 when the table has no line for it (or is malformed).
int python_line_location_table(const std::string& table, int firstlineno, uint64_t byte_offset);
int python_line_310(const std::string& table, int firstlineno, uint64_t byte_offset);

// Reads another process's memory (/proc/PID/mem).
class ProcessMemory {
 public:
  explicit ProcessMemory(int pid, const std::string& proc_root = "/proc");
  ~ProcessMemory();
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;
  bool ok() const { return fd_ >= 0; }
  bool read(uint64_t addr, void* out, size_t n) const;
  std::optional<uint64_t> u64(uint64_t addr) const;
  std::optional<int32_t> i32(uint64_t addr) const;

 private:
  int fd_ = -1;
};

struct PyFrameInfo {
  std::string file, function;
  int line = 0;
};

// One Python process: its interpreter, where _PyRuntime and the type objects are, and a cache
// of resolved code objects.
class PythonProcess {
 public:
  // Finds the interpreter among `maps` (the python executable or libpythonX.Y.so defining
  // _PyRuntime). nullopt: not a Python process. An Error: a Python process whose layout cannot
  // be used (unknown version, failed verification); its message says why.
  static Result<std::optional<PythonProcess>> inspect(int pid, const std::vector<MapEntry>& maps,
                                                      const std::string& proc_root = "/proc");
  const PyLayout& layout() const { return layout_; }
  const std::string& interpreter() const { return interpreter_; }
  uint64_t runtime() const { return runtime_; }
  // Whether the thread list was walked back to its interpreter (false while the interpreter
  // is still starting: the layout is then checked on the first code object instead).
  bool verified() const { return verified_; }
  ingero_py_config bpf_config() const;
  // A code object as BPF shipped it (strings and line table copied at the call).
  void add_code(const ingero_py_code_rec& rec);
  // Resolves a frame captured by BPF; nullopt if the code object does not check out (then
  // the frame is dropped: never a garbage frame) or the process is gone.
  std::optional<PyFrameInfo> resolve(uint64_t code, uint64_t instr);
  // A thread's Python frames as they are now, read from the process (no BPF): into `out`'s
  // py, py_flags, n_py and py_status, innermost first, as the BPF walk fills them
  // (probe/python_walk.cc). The thread state is `tstate_hint` when it still names thread `tid`
  // (the one BPF cached), else found on the interpreter's thread list by its native thread id
  // (3.11+; 3.10 knows threads by pthread id, so only the hint serves there). False when the
  // process is gone or the thread has no thread state.
  bool walk_thread(uint32_t tid, uint64_t tstate_hint, ingero_stack_rec& out) const;
  uint64_t invalid_frames() const { return invalid_; }
  uint64_t unreadable_frames() const { return unreadable_; }  // the process had exited

 private:
  struct Code {
    std::string file, name, linetable;
    int firstlineno = 0;
    bool ok = false;
    bool table_cut = false;  // shipped line table shorter than the real one
  };
  bool read_code(uint64_t code_addr, Code& c, bool* gone);
  std::optional<std::string> read_str(const ProcessMemory& mem, uint64_t obj) const;
  std::optional<std::string> read_bytes(const ProcessMemory& mem, uint64_t obj) const;

  int pid_ = 0;
  std::string proc_root_;
  PyLayout layout_;
  std::string interpreter_;
  uint64_t runtime_ = 0, code_type_ = 0, unicode_type_ = 0, bytes_type_ = 0;
  bool verified_ = false;
  std::map<uint64_t, Code> codes_;
  uint64_t invalid_ = 0, unreadable_ = 0;
};

}  // namespace ingero::hal

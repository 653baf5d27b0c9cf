// The CPython layouts (probe/python.h): 3.10-3.12 from the table below (docs/stacks.md says
// where every number comes from), 3.13 from the interpreter's own _Py_DebugOffsets.
#include <cstring>
#include <utility>

#include "probe/python.h"

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

}  // namespace ingero::hal

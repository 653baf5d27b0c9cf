// PythonProcess::walk_thread: a thread's Python frames read from the process's memory, the
// walk of bpf/stacks.bpf.c (py_tstate, py_top_frame, py_frame_step) done from user space, for
// a thread that is stuck (in a traced call, or asleep) and so cannot be walked by a probe.
#include "probe/python.h"

namespace ingero::hal {
namespace {

constexpr int kMaxThreads = 256;  // as INGERO_PY_MAX_THREADS in BPF

}  // namespace

bool PythonProcess::walk_thread(uint32_t tid, uint64_t tstate_hint, ingero_stack_rec& out) const {
  out.n_py = 0;
  out.py_status = INGERO_PY_NONE;
  ProcessMemory mem(pid_, proc_root_);
  if (!mem.ok()) return false;
  const PyLayout& l = layout_;
  auto thread_id = [&](uint64_t ts) -> std::optional<uint64_t> {
    if (l.thread_id_is_pthread) return mem.u64(ts + l.tstate_thread_id);
    auto v = mem.i32(ts + l.tstate_thread_id);
    if (!v) return std::nullopt;
    return uint64_t(uint32_t(*v));
  };
  uint64_t ts = 0;
  if (tstate_hint && (l.thread_id_is_pthread || thread_id(tstate_hint) == tid)) ts = tstate_hint;
  if (!ts && !l.thread_id_is_pthread) {
    auto interp = mem.u64(runtime_ + l.runtime_interp_head);
    auto cur = interp && *interp ? mem.u64(*interp + l.interp_threads_head) : std::nullopt;
    for (int i = 0; cur && *cur && i < kMaxThreads; ++i) {
      if (thread_id(*cur) == tid) {
        ts = *cur;
        break;
      }
      cur = mem.u64(*cur + l.tstate_next);
    }
  }
  if (!ts) {
    out.py_status = INGERO_PY_NO_THREAD;
    return false;
  }
  auto frame = mem.u64(ts + l.tstate_frame);
  if (frame && *frame && l.cframe_current_frame != kNoOffset)
    frame = mem.u64(*frame + l.cframe_current_frame);
  uint64_t f = frame.value_or(0);
  uint32_t n = 0;
  bool fault = false;
  while (f && n < INGERO_PY_MAX) {
    auto code = mem.u64(f + l.frame_code);
    if (!code) {
      fault = true;
      break;
    }
    uint8_t flags = 0;
    auto type = *code ? mem.u64(*code + l.ob_type) : std::nullopt;
    if (!type || *type != code_type_) flags |= INGERO_PY_NOT_CODE;
    uint64_t instr = 0;
    if (l.instr_is_index)
      instr = uint64_t(uint32_t(mem.i32(f + l.frame_instr).value_or(0)));
    else
      instr = mem.u64(f + l.frame_instr).value_or(0);
    if (l.frame_owner != kNoOffset) {
      uint8_t owner = 0;
      if (mem.read(f + l.frame_owner, &owner, 1) && owner == l.owner_cstack)
        flags |= INGERO_PY_SHIM;
    }
    if (l.frame_is_entry != kNoOffset) {
      uint8_t entry = 0;
      if (mem.read(f + l.frame_is_entry, &entry, 1) && entry) flags |= INGERO_PY_ENTRY;
    } else if (l.instr_is_index) {
      flags |= INGERO_PY_ENTRY;  // 3.10: every frame object is its own eval loop
    }
    out.py[n].code = *code;
    out.py[n].instr = instr;
    out.py_flags[n] = flags;
    ++n;
    auto prev = mem.u64(f + l.frame_previous);
    if (!prev) {
      fault = true;
      break;
    }
    f = *prev;
  }
  out.n_py = uint8_t(n);
  out.py_status = fault ? INGERO_PY_FAULT : f ? INGERO_PY_TRUNCATED : INGERO_PY_OK;
  return true;
}

}  // namespace ingero::hal

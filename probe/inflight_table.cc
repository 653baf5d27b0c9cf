#include "probe/inflight_table.h"

#include <bpf/bpf.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>

#include "thread_state.h"

namespace ingero::hal {
namespace {

// What ingero_inflight writes for thread `tid` (bpf/calls.bpf.c, kept in step with it): false
// where it writes nothing.
bool inflight_of(uint32_t tid, const ingero_thread& t, int recipes_fd, int offcpu_fd,
                 ingero_inflight_rec& o) {
  if (t.depth == 0) return false;
  const ingero_frame& f = t.frames[0];
  // A frame whose probe was detached while it ran is not a call in flight, nor a launch timed
  // in a window that has closed since.
  ingero_recipe r{};
  uint32_t probe = f.probe_id;
  if (bpf_map_lookup_elem(recipes_fd, &probe, &r) != 0 || r.valid != INGERO_RECIPE_LIVE)
    return false;
  if (f.window && r.window != f.window) return false;
  std::memset(&o, 0, sizeof(o));
  o.tid = tid;
  o.pid = t.tgid;
  o.probe_id = f.probe_id;
  o.frame_flags = f.flags;
  o.entry_len = f.entry_len > INGERO_ENTRY_READ_MAX ? INGERO_ENTRY_READ_MAX : f.entry_len;
  o.start_ns = f.start_ns;
  o.caller = f.caller;
  o.fp = f.fp;
  o.sp = f.sp;
  o.py_tstate = t.py_tstate;
  o.off_cpu_ns = t.off_cpu_total_ns - f.off_cpu_at_entry;
  o.nested = f.nested;
  o.nested_probe = f.nested_probe;
  o.depth = t.depth > 0xffff ? 0xffff : uint16_t(t.depth);
  o.nregs = r.nregs;
  o.nstack = r.stack_words;
  ingero_offcpu_start st{};
  if (offcpu_fd >= 0 && bpf_map_lookup_elem(offcpu_fd, &tid, &st) == 0) {
    o.off_since_ns = st.ts;
    o.off_state = st.prev_state;
    o.flags |= INGERO_INFLIGHT_SCHED;
  }
  static_assert(sizeof(o.regs) == sizeof(f.regs) && sizeof(o.stack) == sizeof(f.stack) &&
                sizeof(o.entry_buf) == sizeof(f.entry_buf));
  std::memcpy(o.regs, f.regs, sizeof(o.regs));
  std::memcpy(o.stack, f.stack, sizeof(o.stack));
  std::memcpy(o.entry_buf, f.entry_buf, sizeof(o.entry_buf));
  return true;
}

}  // namespace

Status read_inflight_from_table(int threads_fd, int recipes_fd, int offcpu_fd,
                                std::vector<ingero_inflight_rec>& out) {
  // A thread's state is a few kilobytes: one buffer for the walk, not one on the stack.
  auto t = std::make_unique<ingero_thread>();
  // A hash map's walk starts over where its last key was deleted meanwhile (a thread exited):
  // each thread once, and a walk bounded by the deletions it meets.
  std::unordered_set<uint32_t> seen;
  uint32_t key = 0, next = 0;
  const uint32_t* at = nullptr;  // the first key
  int err = -1;                  // -1: the bound ran out
  for (size_t steps = 0; steps < 4 * size_t(INGERO_MAX_THREADS); ++steps) {
    if (bpf_map_get_next_key(threads_fd, at, &next) != 0) {
      err = errno;
      break;
    }
    key = next;
    at = &key;
    // A thread that exited between the two calls is gone: not in flight.
    if (!seen.insert(key).second || bpf_map_lookup_elem(threads_fd, &key, t.get()) != 0) continue;
    ingero_inflight_rec o;
    if (inflight_of(key, *t, recipes_fd, offcpu_fd, o)) out.push_back(o);
  }
  if (err == -1)
    return Error{"reading the calls in flight from the thread table: it kept changing", 0};
  if (err != ENOENT) return Error::sys("reading the calls in flight from the thread table", err);
  return {};
}

}  // namespace ingero::hal

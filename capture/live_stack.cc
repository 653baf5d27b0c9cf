// StackCollector::live_stack: the stack of a stuck thread, read from the process while it waits.
// A thread inside a traced call that blocks never reaches the probe's return, where stacks are
// walked; its entry kept where the call was made from (bpf/calls.bpf.c: caller, fp), and the
// frames above that stay as they were until the call returns.
#include <unistd.h>

#include "capture/stack_collector.h"

namespace ingero::capture {
namespace {

constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL, kFnvPrime = 0x100000001b3ULL;
uint64_t fnv(uint64_t h, uint64_t v) { return (h ^ v) * kFnvPrime; }

}  // namespace

uint64_t StackCollector::live_stack(uint32_t pid, uint32_t tid, uint64_t caller, uint64_t fp,
                                    uint64_t py_tstate) {
  Process& p = process(pid);
  ingero_stack_rec rec{};
  rec.type = INGERO_REC_STACK;
  rec.pid = pid;
  rec.tid = tid;
  uint32_t n = 0;
  if (caller) {
    rec.ips[n++] = caller;
    // The frame-pointer chain, as the kernel walks a user stack: [fp] is the next frame's
    // pointer, [fp + 8] the return address into its caller. Frames lie at rising addresses;
    // anything else is code built without frame pointers, and the walk stops.
    hal::ProcessMemory mem(int(pid), proc_root_);
    uint64_t frame = fp;
    while (frame && !(frame & 7) && n < INGERO_STACK_MAX) {
      auto next = mem.u64(frame);
      auto ret = mem.u64(frame + 8);
      if (!next || !ret || !*ret) break;
      rec.ips[n++] = *ret;
      if (*next <= frame) break;
      frame = *next;
    }
  }
  rec.n_ips = uint16_t(n);
  if (p.python) p.python->walk_thread(tid, py_tstate, rec);
  if (rec.n_ips == 0 && rec.n_py == 0) return 0;
  uint64_t h = kFnvBasis ^ pid;
  for (uint32_t i = 0; i < n; ++i) h = fnv(h, rec.ips[i]);
  for (uint32_t i = 0; i < rec.n_py; ++i) h = fnv(fnv(h, rec.py[i].code), rec.py[i].instr);
  h &= (1ULL << 62) - 1;
  rec.hash = h ? h : 1;
  ++counters_.live;
  on_stack(rec);
  auto it = p.ids.find(rec.hash);
  return it == p.ids.end() ? 0 : it->second;
}

}  // namespace ingero::capture

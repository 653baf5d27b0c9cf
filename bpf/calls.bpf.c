// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The call programs: one generic program for every vendor's functions; the attach cookie is
 * the probe id, the recipe map says what to capture.
 *
 *   ingero_call                  a uprobe session (Linux 6.12+): runs at entry, and at return
 *                                only when the entry asked for it (returned 0).
 *   ingero_entry / ingero_return the same as a classic uprobe/uretprobe pair, for kernels
 *                                without sessions.
 *   ingero_thread_exit           flushes calls still in flight when a thread dies.
 *   ingero_follow_fork           with a pid filter, children of traced processes join it.
 *   ingero_exec / ingero_linkmap tell user space to re-scan a process for new libraries.
 *   ingero_selftest              used by `ingero check` to prove uprobes fire.
 *   ingero_inflight              an iterator over the thread table: the calls in flight now.
 *
 * One launch is one record. A traced call made while the same thread is inside another traced
 * call (cudaLaunchKernel -> cuLaunchKernel, ncclBcast -> ncclBroadcast) is counted in its
 * caller's record and emits nothing; with sessions it does not even arm a return probe. The
 * outermost traced call of a thread is frames[0]; the frames above it exist only on kernels
 * without sessions, to pair the nested returns.
 */
/* vmlinux.h must come first. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "shared.bpf.h"
// clang-format on

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* libbpf 1.1's bpf_tracing.h stops at PARM5. */
#if defined(__TARGET_ARCH_x86)
#define INGERO_PARM6(ctx) ((ctx)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define INGERO_PARM6(ctx) (((struct user_pt_regs*)(ctx))->regs[5])
#endif

/* Written by user space between open and load. */
const volatile __u32 filter_pids_enabled = 0;
const volatile __u64 filter_cgroup_id = 0;
const volatile __u32 follow_children = 1;
const volatile __u32 stacks_enabled = 0;
const volatile __u64 stack_slow_ns = 1000000;
/* Entry-only calls (launches): one in this many per thread is timed, through its return (the
 * first of each thread among them); 0: none; 1: every one (no call is entry-only). */
const volatile __u32 launch_timing_every = 32;

struct ingero_threads_map threads SEC(".maps");
struct ingero_stats_map stats SEC(".maps");
struct ingero_watched_map watched_pids SEC(".maps");
/* Written by host.bpf.c's scheduler programs; defined here, in the first file linked, as every
 * shared map is (the linker places an extern map defined in a later file wrongly). */
struct ingero_offcpu_map offcpu SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, INGERO_MAX_PROBES);
  __type(key, __u32);
  __type(value, struct ingero_recipe);
} recipes SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, __u8);
} pid_filter SEC(".maps");

/* Source of zeroed thread state: too large for the 512-byte BPF stack. Never written. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ingero_thread);
} thread_zero SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20); /* resized by user space before load */
} calls_rb SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ingero_inflight_rec);
} inflight_scratch SEC(".maps");

/* A call record is assembled here, then copied to the ring at its real size. */
#define INGERO_CALL_BUF 512
struct call_buf {
  __u8 b[INGERO_CALL_BUF];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct call_buf);
} call_scratch SEC(".maps");

extern bool bpf_session_is_return(void) __ksym __weak;

static __always_inline bool pid_allowed(__u32 tgid) {
  if (filter_pids_enabled && !bpf_map_lookup_elem(&pid_filter, &tgid)) return false;
  if (filter_cgroup_id && bpf_get_current_cgroup_id() != filter_cgroup_id) return false;
  return true;
}

static __always_inline struct ingero_thread* thread_get_or_create(__u32 tid, __u32 tgid) {
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (t) return t;
  __u32 zero = 0;
  struct ingero_thread* z = bpf_map_lookup_elem(&thread_zero, &zero);
  if (!z) return 0;
  long err = bpf_map_update_elem(&threads, &tid, z, BPF_NOEXIST);
  if (err && err != -17 /* EEXIST: raced with ourselves, fine */) {
    stat_inc(INGERO_STAT_THREAD_MAP_FULL);
    return 0;
  }
  t = bpf_map_lookup_elem(&threads, &tid);
  if (t) t->tgid = tgid;
  return t;
}

static __always_inline __u64 arg_word(struct ingero_frame* f, __u8 src, __u32 index) {
  if (index >= INGERO_REG_WORDS) return 0;
  if (src == INGERO_PTR_REG) return f->regs[index];
  if (src == INGERO_PTR_STACK_WORD && index < INGERO_STACK_WORDS) return f->stack[index];
  return 0;
}

/* Fills frames[0] for a top-level call: arguments, entry capture, clocks. */
static __always_inline void begin_frame(struct pt_regs* ctx, struct ingero_thread* t,
                                        struct ingero_frame* f, __u32 probe,
                                        struct ingero_recipe* r, __u64 sp) {
  f->probe_id = probe;
  f->preempts = 0;
  f->switches = 0;
  f->preemptor_pid = 0;
  f->preemptor_tid = 0;
  f->preemptor_off_ns = 0;
  f->preemptor_comm[0] = 0;
  f->flags = 0;
  f->entry_len = 0;
  f->nested = 0;
  f->nested_probe = 0;
  f->is_nested = 0;
  f->sp = sp;
  /* A call that may block keeps its caller's frame pointer too, so that user space can read
   * its stack from the process while it is in flight (the caller's frames above sp stay intact
   * until it returns); a launch does not. */
  f->fp = (r->flags & INGERO_RECIPE_CALLER) ? 0 : PT_REGS_FP(ctx);
  f->off_cpu_at_entry = t->off_cpu_total_ns;
  f->regs[0] = PT_REGS_PARM1(ctx);
  f->regs[1] = PT_REGS_PARM2(ctx);
  f->regs[2] = PT_REGS_PARM3(ctx);
  f->regs[3] = PT_REGS_PARM4(ctx);
  f->regs[4] = PT_REGS_PARM5(ctx);
  f->regs[5] = INGERO_PARM6(ctx);

  /* One read of the user stack: the return address at sp (where the call was made from) and
   * the stack arguments past it (each read costs a fault-safe copy with its checks: ~100 ns). */
  __u64 args = sp + 8;
  __u32 words = r->stack_words;
  if (words > INGERO_STACK_WORDS) words = INGERO_STACK_WORDS;
  if (bpf_probe_read_user(&f->caller, (words + 1) * 8, (void*)sp)) {
    /* Zeroed by the helper. The return address alone, then: it is what names a launch. */
    bpf_probe_read_user(&f->caller, 8, (void*)sp);
    if (words) f->flags |= INGERO_CALL_STACK_READ_FAULT;
  }

  __u8 src = r->entry_read.src;
  if (src != INGERO_PTR_NONE) {
    __u32 len = r->entry_read.len;
    if (len > INGERO_ENTRY_READ_MAX) len = INGERO_ENTRY_READ_MAX;
    __u64 ptr = src == INGERO_PTR_STACK_ADDR ? args : arg_word(f, src, r->entry_read.index);
    ptr += r->entry_read.offset;
    if (len > 0 && ptr && bpf_probe_read_user(f->entry_buf, len, (void*)ptr) == 0)
      f->entry_len = len;
    else if (len > 0)
      f->flags |= INGERO_CALL_ENTRY_READ_FAULT;
  }
  /* Timestamp last so capture work is not billed to the traced function. */
  f->start_ns = bpf_ktime_get_ns();
}

static __always_inline void emit_call(struct ingero_thread* t, struct ingero_frame* f, __u32 tid,
                                      __u64 end_ns, __u64 ret, __u16 flags, struct ingero_recipe* r,
                                      __u64 stack);

static __always_inline void launch_at_entry(struct pt_regs* ctx, struct ingero_thread* t,
                                            struct ingero_recipe* r, __u32 probe, __u32 tid,
                                            __u64 sp);

/* Entry. Returns 0 when the return must be seen, 1 when not (a session then arms no return
 * probe). `session`: nested calls push no frame, since their return never comes. */
static __always_inline int call_entry(struct pt_regs* ctx, bool session) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32, tid = (__u32)id;
  if (!pid_allowed(tgid)) return 1;
  __u32 probe = (__u32)bpf_get_attach_cookie(ctx);
  struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &probe);
  if (!r || r->valid != INGERO_RECIPE_LIVE) return 1;
  struct ingero_thread* t = thread_get_or_create(tid, tgid);
  if (!t) return 1;
  /* Once per thread, not per call: a hash lookup (the entry goes when the process exits, and
   * so do its threads). */
  if (!t->gpu_marked) {
    if (!(watch_flags(tgid) & INGERO_WATCH_GPU)) {
      __u8 gpu = INGERO_WATCH_GPU;
      bpf_map_update_elem(&watched_pids, &tgid, &gpu, BPF_ANY);
    }
    t->gpu_marked = 1;
  }
  __u64 sp = PT_REGS_SP(ctx);
  __u32 d = t->depth;
  /* A call below us whose return never came (longjmp, an unwound exception, a return
   * instance the kernel dropped) left a frame whose stack pointer is below ours. A call
   * nested in it runs deeper (lower sp); a tail call from it (an alias jumping to the API it
   * wraps) runs at the same sp. */
  if (d > 0 && d <= INGERO_MAX_DEPTH && sp > t->frames[0].sp) {
    stat_inc(INGERO_STAT_FRAMES_DISCARDED);
    d = 0;
  }
  if (d > 0 && d <= INGERO_MAX_DEPTH) {
    /* The call below us was entered through a probe user space has since detached (a runtime
     * whose launches all reach the driver loses its launch probes): its return will never
     * come, or, while the detach runs, may not; a launch already holding its driver launch
     * is not entered by another. It goes out now, untimed, instead of swallowing the thread's
     * calls as nested ones. */
    struct ingero_frame* below = &t->frames[0];
    __u32 was = below->probe_id;
    struct ingero_recipe* wr = bpf_map_lookup_elem(&recipes, &was);
    if (!wr || wr->valid == INGERO_RECIPE_GONE ||
        (wr->valid == INGERO_RECIPE_RETIRING && below->nested)) {
      /* A launch that has not reached the driver yet: this launch is the one it makes. */
      bool own = session && wr && (wr->flags & INGERO_RECIPE_ENTRY_ONLY) && !below->nested &&
                 (r->flags & INGERO_RECIPE_ENTRY_ONLY);
      if (own) {
        below->nested = 1;
        below->nested_probe = probe;
        stat_inc(INGERO_STAT_NESTED);
      }
      emit_call(t, below, tid, 0, 0, INGERO_CALL_ENTRY_ONLY, wr, 0);
      stat_inc(INGERO_STAT_RETURNS_DETACHED);
      t->depth = 0;
      if (own) return 1; /* counted in it; no return wanted */
      d = 0;
    }
  }
  if (d > 0) {
    struct ingero_frame* top = &t->frames[0];
    if (!top->nested) top->nested_probe = probe;
    top->nested += 1;
    stat_inc(INGERO_STAT_NESTED);
    if (session) {
      t->depth = d;
      return 1;
    }
    /* Pair fallback: a placeholder frame pairs the nested return. */
    if (d >= INGERO_MAX_DEPTH) {
      if (d < 0xffff) t->depth = d + 1; /* keep counting so returns pop the right frames */
      stat_inc(INGERO_STAT_DEPTH_OVERFLOW);
      return 0;
    }
    struct ingero_frame* f = &t->frames[d & (INGERO_MAX_DEPTH - 1)];
    f->probe_id = probe;
    f->is_nested = 1;
    f->sp = sp;
    t->depth = d + 1;
    return 0;
  }
  /* A launch needs no return probe: its record goes now, but for one in launch_timing_every
   * per thread, whose return times it. Kernels without sessions keep the return (pair). */
  bool untimed = false;
  if (session && (r->flags & INGERO_RECIPE_ENTRY_ONLY) && launch_timing_every != 1) {
    __u32 seq = t->timing_seq++;
    untimed = !launch_timing_every || seq % launch_timing_every != 0;
  }
  if (untimed && r->entry_read.src == INGERO_PTR_NONE) {
    launch_at_entry(ctx, t, r, probe, tid, sp);
    stat_inc(INGERO_STAT_UNTIMED);
    return 1; /* no return probe; the thread's depth stays 0 */
  }
  begin_frame(ctx, t, &t->frames[0], probe, r, sp);
  if (untimed) {
    struct ingero_frame* f = &t->frames[0];
    __u64 stack = 0;
    if (stacks_enabled) stack = ingero_call_stack(ctx, probe, 0, f->caller);
    emit_call(t, f, tid, 0, 0, INGERO_CALL_ENTRY_ONLY, r, stack);
    stat_inc(INGERO_STAT_UNTIMED);
    return 1;
  }
  t->depth = 1;
  return 0;
}

static __always_inline __u32 rounded(__u32 n) { return (n + 7) & ~7u; }

/* Fills a call record's header; returns the flags its stack result adds. */
static __always_inline __u16 put_header(struct ingero_call_rec* h, __u32 probe, __u32 pid,
                                        __u32 tid, __u64 start, __u64 end, __u64 ret, __u64 stack,
                                        __u32 nested, __u32 nested_probe) {
  h->type = INGERO_REC_CALL;
  h->probe_id = probe;
  h->pid = pid;
  h->tid = tid;
  h->start_ns = start;
  h->end_ns = end;
  h->ret = ret;
  h->stack_hash = stack & INGERO_STACK_HASH_MASK;
  h->entry_len = 0;
  h->return_len = 0;
  h->nested = nested;
  h->nested_probe = nested_probe;
  __u16 flags = 0;
  if (stack & INGERO_STACK_RET_SHIPPED) flags |= INGERO_CALL_STACK_SHIPPED;
  if (stack & INGERO_STACK_RET_OF_SITE) flags |= INGERO_CALL_STACK_OF_SITE;
  return flags;
}

/* Appends the register and stack argument words a record ships after its header; returns the
 * end. */
static __always_inline __u32 put_words(struct call_buf* buf, const __u64* regs, __u32 nregs,
                                       const __u64* stack, __u32 nstack) {
  __u32 off = sizeof(struct ingero_call_rec);
#pragma unroll
  for (__u32 i = 0; i < INGERO_REG_WORDS; i++) {
    if (i < nregs) {
      *(__u64*)(buf->b + off) = regs[i];
      off += 8;
    }
  }
#pragma unroll
  for (__u32 i = 0; i < INGERO_STACK_WORDS; i++) {
    if (i < nstack) {
      *(__u64*)(buf->b + off) = stack[i];
      off += 8;
    }
  }
  return off;
}

/* Appends the thread's name and cgroup at `off` when they changed since it last shipped them;
 * returns the new end. */
static __always_inline __u32 put_ident(struct ingero_thread* t, struct call_buf* buf, __u32 off,
                                       __u16* flags) {
  char comm[INGERO_COMM_LEN];
  bpf_get_current_comm(comm, sizeof(comm));
  __u64 cgroup = bpf_get_current_cgroup_id();
  __u64* now_c = (__u64*)comm;
  __u64* was_c = (__u64*)t->ident_comm;
  if (t->ident_comm[0] && now_c[0] == was_c[0] && now_c[1] == was_c[1] && cgroup == t->ident_cgroup)
    return off;
  if (off > INGERO_CALL_BUF - sizeof(struct ingero_call_ident)) return off;
  struct ingero_call_ident* id = (void*)(buf->b + off);
  id->cgroup_id = cgroup;
  __builtin_memcpy(id->comm, comm, sizeof(id->comm));
  __builtin_memcpy(t->ident_comm, comm, sizeof(comm));
  t->ident_cgroup = cgroup;
  *flags |= INGERO_CALL_IDENT;
  return off + sizeof(*id);
}

/* Copies the record assembled in `buf` to the calls ring. */
static __always_inline void submit_call(struct call_buf* buf, __u32 off, __u16 flags) {
  if (off > INGERO_CALL_REC_MAX) return;
  /* A thread's first record (it carries the ident block) wakes the reader at once: a new
   * process's maps must be read while it still runs, or a short program's stacks stay raw. */
  __u64 wake = (flags & INGERO_CALL_IDENT) ? BPF_RB_FORCE_WAKEUP : ingero_wakeup_flags(&calls_rb);
  if (bpf_ringbuf_output(&calls_rb, buf->b, off, wake)) {
    stat_inc(INGERO_STAT_RINGBUF_DROPS);
    return;
  }
  stat_inc(INGERO_STAT_CALLS);
}

/* An untimed launch (no entry read): its record is assembled straight from the registers and
 * one read of the user stack, without the frame a call that returns needs. */
static __always_inline void launch_at_entry(struct pt_regs* ctx, struct ingero_thread* t,
                                            struct ingero_recipe* r, __u32 probe, __u32 tid,
                                            __u64 sp) {
  __u32 zero = 0;
  struct call_buf* buf = bpf_map_lookup_elem(&call_scratch, &zero);
  if (!buf) return;
  __u16 flags = INGERO_CALL_ENTRY_ONLY;
  /* The return address, then the stack arguments past it. */
  __u64 words[1 + INGERO_STACK_WORDS] = {};
  __u32 nstack = r->stack_words;
  if (nstack > INGERO_STACK_WORDS) nstack = INGERO_STACK_WORDS;
  if (bpf_probe_read_user(words, (nstack + 1) * 8, (void*)sp)) {
    bpf_probe_read_user(words, 8, (void*)sp);
    if (nstack) flags |= INGERO_CALL_STACK_READ_FAULT;
  }
  __u64 start = bpf_ktime_get_ns();
  __u64 stack = 0;
  if (stacks_enabled) stack = ingero_call_stack(ctx, probe, 0, words[0]);
  struct ingero_call_rec* h = (void*)buf->b;
  flags |= put_header(h, probe, t->tgid, tid, start, 0, 0, stack, 0, 0);
  __u32 nregs = r->nregs;
  if (nregs > INGERO_REG_WORDS) nregs = INGERO_REG_WORDS;
  h->nregs = nregs;
  h->nstack = nstack;
  __u64 regs[INGERO_REG_WORDS] = {PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
                                  PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx), INGERO_PARM6(ctx)};
  __u32 off = put_words(buf, regs, nregs, words + 1, nstack);
  /* A thread's name and cgroup are read at its first call, at every call that returns, and at
   * one untimed launch in 16 (two helper calls a launch otherwise): a rename or a cgroup move
   * between syncs shows from the next of those. */
  if (!t->ident_comm[0] || (t->timing_seq & 15) == 0) off = put_ident(t, buf, off, &flags);
  if (r->flags & INGERO_RECIPE_CALLER) {
    if (off > INGERO_CALL_BUF - 8) return;
    *(__u64*)(buf->b + off) = words[0];
    off += 8;
    flags |= INGERO_CALL_CALLER;
  }
  h->flags = flags;
  submit_call(buf, off, flags);
}

/* Assembles and submits one call record from frame f. */
static __always_inline void emit_call(struct ingero_thread* t, struct ingero_frame* f, __u32 tid,
                                      __u64 end_ns, __u64 ret, __u16 flags, struct ingero_recipe* r,
                                      __u64 stack) {
  __u32 zero = 0;
  struct call_buf* buf = bpf_map_lookup_elem(&call_scratch, &zero);
  if (!buf) return;
  struct ingero_call_rec* h = (void*)buf->b;
  flags |= put_header(h, f->probe_id, t->tgid, tid, f->start_ns, end_ns, ret, stack, f->nested,
                      f->nested_probe);
  flags |= f->flags;

  __u32 nregs = r ? r->nregs : INGERO_REG_WORDS;
  __u32 nstack = r ? r->stack_words : 0;
  if (nregs > INGERO_REG_WORDS) nregs = INGERO_REG_WORDS;
  if (nstack > INGERO_STACK_WORDS) nstack = INGERO_STACK_WORDS;
  h->nregs = nregs;
  h->nstack = nstack;
  __u32 off = put_words(buf, f->regs, nregs, f->stack, nstack);
  __u64 off_cpu = t->off_cpu_total_ns - f->off_cpu_at_entry;
  if (off_cpu || f->switches) {
    struct ingero_call_offcpu* o = (void*)(buf->b + off);
    o->off_cpu_ns = off_cpu;
    o->preemptor_off_ns = f->preemptor_off_ns;
    o->preempts = f->preempts;
    o->switches = f->switches;
    o->preemptor_pid = f->preemptor_pid;
    o->preemptor_tid = f->preemptor_tid;
    __builtin_memcpy(o->preemptor_comm, f->preemptor_comm, sizeof(o->preemptor_comm));
    off += sizeof(*o);
    flags |= INGERO_CALL_OFFCPU;
  }
  off = put_ident(t, buf, off, &flags);
  if (r && (r->flags & INGERO_RECIPE_CALLER)) {
    *(__u64*)(buf->b + off) = f->caller;
    off += 8;
    flags |= INGERO_CALL_CALLER;
  }
  if (r && r->return_read.src != INGERO_PTR_NONE && !(flags & INGERO_CALL_ENTRY_ONLY)) {
    __u32 len = r->return_read.len;
    if (len > INGERO_RETURN_READ_MAX) len = INGERO_RETURN_READ_MAX;
    __u64 ptr = arg_word(f, r->return_read.src, r->return_read.index);
    if (ptr && len > 0) {
      ptr += r->return_read.offset;
      if (bpf_probe_read_user(buf->b + off, len, (void*)ptr) == 0) {
        h->return_len = len;
        off += rounded(len);
      } else {
        flags |= INGERO_CALL_RETURN_READ_FAULT;
      }
    } else if (len > 0) {
      flags |= INGERO_CALL_RETURN_READ_FAULT;
    }
  }
  __u32 elen = f->entry_len;
  if (elen > INGERO_ENTRY_READ_MAX) elen = INGERO_ENTRY_READ_MAX;
  if (elen) {
    __builtin_memcpy(buf->b + off, f->entry_buf, INGERO_ENTRY_READ_MAX);
    h->entry_len = elen;
    off += rounded(elen);
  }
  h->flags = flags;
  submit_call(buf, off, flags);
}

static __always_inline void call_return(struct pt_regs* ctx) {
  __u64 now = bpf_ktime_get_ns();
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!t || t->depth == 0) {
    stat_inc(INGERO_STAT_UNPAIRED_RETURN);
    return;
  }
  __u32 d = t->depth;
  if (d > INGERO_MAX_DEPTH) { /* an overflowed nested entry (pair fallback): nothing kept */
    t->depth = d - 1;
    return;
  }
  __u32 probe = (__u32)bpf_get_attach_cookie(ctx);
  __u32 top = (d - 1) & (INGERO_MAX_DEPTH - 1);
  if (d > 1 && t->frames[top].is_nested && t->frames[top].probe_id == probe) {
    t->depth = d - 1; /* a nested call returned: it is counted in frames[0] */
    return;
  }
  struct ingero_frame* f = &t->frames[0];
  if (f->probe_id != probe) {
    stat_inc(INGERO_STAT_UNPAIRED_RETURN);
    return;
  }
  __u16 flags = 0;
  if (d > 1) { /* nested calls above it unwound without returning */
    stat_inc(INGERO_STAT_FRAMES_DISCARDED);
    flags |= INGERO_CALL_FRAMES_DISCARDED;
  }
  struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &probe);
  __u64 ret = PT_REGS_RC(ctx);
  __u64 stack = 0;
  if (stacks_enabled) {
    /* Slow and off-CPU calls are what explain examines: always walk them. A failing call
     * walks like a new call site, keyed by its return code: the first few per site. */
    __u32 always = t->off_cpu_total_ns != f->off_cpu_at_entry || now - f->start_ns >= stack_slow_ns;
    stack = ingero_call_stack(ctx, probe, ((__u64)(__u32)ret << 1) | always, 0);
  }
  emit_call(t, f, tid, now, ret, flags, r, stack);
  t->depth = 0;
}

SEC("uprobe")
int ingero_call(struct pt_regs* ctx) {
  if (bpf_session_is_return()) {
    call_return(ctx);
    return 0;
  }
  return call_entry(ctx, true);
}

SEC("uprobe")
int ingero_entry(struct pt_regs* ctx) {
  call_entry(ctx, false);
  return 0;
}

SEC("uretprobe")
int ingero_return(struct pt_regs* ctx) {
  call_return(ctx);
  return 0;
}

/* A thread is exiting: its call in flight will never return. Report it as unfinished rather
 * than losing it, then free the thread's state. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ingero_thread_exit, struct task_struct* p) {
  __u32 tid = BPF_CORE_READ(p, pid);
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!t) return 0;
  if (t->depth > 0) {
    struct ingero_frame* f = &t->frames[0];
    struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &f->probe_id);
    emit_call(t, f, tid, bpf_ktime_get_ns(), 0, INGERO_CALL_UNFINISHED, r, 0);
    stat_inc(INGERO_STAT_UNFINISHED);
  }
  bpf_map_delete_elem(&threads, &tid);
  return 0;
}

/* The calls in flight now: one record per thread inside a traced call, read by user space
 * through a bpf_iter (once a second). Runs in the reader's context; touches nothing the call
 * programs write but what it reads, and a frame it reads while its call returns is only
 * stale (user space keys calls by thread and entry time). */
SEC("iter/bpf_map_elem")
int ingero_inflight(struct bpf_iter__bpf_map_elem* ctx) {
  __u32* key = ctx->key;
  struct ingero_thread* t = ctx->value;
  if (!key || !t) return 0;
  __u32 depth = t->depth;
  if (depth == 0) return 0;
  /* A frame whose probe was detached while it ran is not a call in flight: its return will
   * never be seen, and the thread's next call ships it untimed. */
  __u32 entered = t->frames[0].probe_id;
  struct ingero_recipe* er = bpf_map_lookup_elem(&recipes, &entered);
  if (!er || er->valid != INGERO_RECIPE_LIVE) return 0;
  __u32 zero = 0;
  struct ingero_inflight_rec* o = bpf_map_lookup_elem(&inflight_scratch, &zero);
  if (!o) return 0;
  struct ingero_frame* f = &t->frames[0];
  __u32 tid = *key;
  o->tid = tid;
  o->pid = t->tgid;
  o->probe_id = f->probe_id;
  o->frame_flags = f->flags;
  __u32 elen = f->entry_len;
  if (elen > INGERO_ENTRY_READ_MAX) elen = INGERO_ENTRY_READ_MAX;
  o->entry_len = elen;
  o->start_ns = f->start_ns;
  o->caller = f->caller;
  o->fp = f->fp;
  o->sp = f->sp;
  o->py_tstate = t->py_tstate;
  o->off_cpu_ns = t->off_cpu_total_ns - f->off_cpu_at_entry;
  o->off_since_ns = 0;
  o->off_state = 0;
  o->flags = 0;
  o->nested = f->nested;
  o->nested_probe = f->nested_probe;
  o->depth = depth > 0xffff ? 0xffff : depth;
  o->pad = 0;
  __u32 probe = f->probe_id;
  struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &probe);
  o->nregs = r ? r->nregs : 0;
  o->nstack = r ? r->stack_words : 0;
  struct ingero_offcpu_start* st = bpf_map_lookup_elem(&offcpu, &tid);
  if (st) {
    o->off_since_ns = st->ts;
    o->off_state = st->prev_state;
    o->flags |= INGERO_INFLIGHT_SCHED;
  }
  __builtin_memcpy(o->regs, f->regs, sizeof(o->regs));
  __builtin_memcpy(o->stack, f->stack, sizeof(o->stack));
  __builtin_memcpy(o->entry_buf, f->entry_buf, sizeof(o->entry_buf));
  bpf_seq_write(ctx->meta->seq, o, sizeof(*o));
  return 0;
}

static __always_inline void emit_libwatch(__u32 kind) {
  __u64 id = bpf_get_current_pid_tgid();
  struct ingero_libwatch_rec* e = bpf_ringbuf_reserve(&calls_rb, sizeof(*e), 0);
  if (!e) {
    stat_inc(INGERO_STAT_LIBWATCH_DROPS);
    return;
  }
  e->type = INGERO_REC_LIBWATCH;
  e->kind = kind;
  e->pid = id >> 32;
  e->tid = (__u32)id;
  e->ts_ns = bpf_ktime_get_ns();
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  /* Rare and latency-sensitive: the process may be about to call into a new library. */
  bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* With a pid filter, children of traced processes are traced too (DataLoader workers,
 * launcher -> python). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ingero_follow_fork, struct task_struct* parent, struct task_struct* child) {
  if (!filter_pids_enabled || !follow_children) return 0;
  __u32 ptgid = BPF_CORE_READ(parent, tgid);
  __u32 ctgid = BPF_CORE_READ(child, tgid);
  if (ptgid == ctgid || !bpf_map_lookup_elem(&pid_filter, &ptgid)) return 0;
  __u8 one = 1;
  bpf_map_update_elem(&pid_filter, &ctgid, &one, BPF_ANY);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ingero_exec, struct task_struct* p, pid_t old_pid, struct linux_binprm* bprm) {
  emit_libwatch(INGERO_LIBWATCH_EXEC);
  return 0;
}

/* Attached to the dynamic loader's _dl_debug_state(), which it calls after every change
 * to the link map: initial load, dlopen, dlclose. */
SEC("uprobe")
int ingero_linkmap(struct pt_regs* ctx) {
  emit_libwatch(INGERO_LIBWATCH_LINKMAP);
  return 0;
}

SEC("uprobe")
int ingero_selftest(struct pt_regs* ctx) {
  stat_inc(INGERO_STAT_SELFTEST);
  return 0;
}

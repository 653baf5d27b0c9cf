// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The one BPF object ingero loads. Its programs:
 *   ingero_entry / ingero_return   generic uprobe/uretprobe pair shared by every vendor;
 *                                  the attach cookie is the probe id, the recipe map says
 *                                  what to capture.
 *   ingero_thread_exit             flushes calls still in flight when a thread dies.
 *   ingero_exec / ingero_linkmap   tell user space to re-scan a process for new libraries.
 *   ingero_selftest                used by `ingero check` to prove uprobes fire.
 * Host-context programs (scheduler, memory, block, TCP, OOM) live in host.bpf.h, included
 * below so that they share the thread and ring-buffer maps.
 */
/* vmlinux.h must come first. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ingero_records.h"
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

struct ingero_frame {
  __u32 probe_id;
  __u32 preempts;
  __u32 switches;
  __u32 preemptor_pid;
  __u32 preemptor_tid;
  __u16 entry_len;
  __u16 flags;
  __u64 start_ns;
  __u64 off_cpu_at_entry;
  __u64 preemptor_off_ns;
  __u64 regs[6];
  __u64 stack[INGERO_STACK_WORDS];
  char preemptor_comm[INGERO_COMM_LEN];
  __u8 entry_buf[INGERO_ENTRY_READ_MAX];
};

/* Per-thread state: the stack of traced calls in flight plus off-CPU bookkeeping that the
 * scheduler programs maintain for threads that have made at least one traced call. */
struct ingero_thread {
  __u32 tgid;
  __u32 depth;
  __u64 off_cpu_total_ns;
  __u64 switched_out_ns; /* 0 while on CPU */
  __u32 out_preempted;
  __u32 out_by_pid;
  __u32 out_by_tid;
  __u32 pad;
  char out_by_comm[INGERO_COMM_LEN];
  struct ingero_frame frames[INGERO_MAX_DEPTH];
};

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

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, INGERO_MAX_THREADS);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, __u32);
  __type(value, struct ingero_thread);
} threads SEC(".maps");

/* Source of zeroed thread state: too large for the 512-byte BPF stack. Never written. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ingero_thread);
} thread_zero SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 << 20); /* resized by user space before load */
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, INGERO_STAT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} stats SEC(".maps");

/* Waking the reader for every record costs an irq_work + IPI per call, which dominated the
 * per-call cost in measurement (bench/). The reader polls with a short timeout anyway, so wake
 * it only when enough data is queued to be worth it. */
#define INGERO_WAKEUP_BYTES (256 * 1024)
static __always_inline __u64 wakeup_flags(void) {
  return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= INGERO_WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP
                                                                              : BPF_RB_NO_WAKEUP;
}

static __always_inline void stat_inc(__u32 which) {
  __u64* v = bpf_map_lookup_elem(&stats, &which);
  if (v) *v += 1;
}

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
  if (index >= 6) return 0;
  if (src == INGERO_PTR_REG) return f->regs[index];
  if (src == INGERO_PTR_STACK_WORD && index < INGERO_STACK_WORDS) return f->stack[index];
  return 0;
}

#include "host.bpf.h"
#include "stacks.bpf.h"

SEC("uprobe")
int ingero_entry(struct pt_regs* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32, tid = (__u32)id;
  if (!pid_allowed(tgid)) return 0;
  __u32 probe = (__u32)bpf_get_attach_cookie(ctx);
  struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &probe);
  if (!r || !r->valid) return 0;
  struct ingero_thread* t = thread_get_or_create(tid, tgid);
  if (!t) return 0;
  if (!(watch_flags(tgid) & INGERO_WATCH_GPU)) {
    __u8 gpu = INGERO_WATCH_GPU;
    bpf_map_update_elem(&watched_pids, &tgid, &gpu, BPF_ANY);
  }

  __u32 d = t->depth;
  if (d >= INGERO_MAX_DEPTH) {
    /* Keep counting so the matching returns pop the right frames. */
    if (d < 0xffff) t->depth = d + 1;
    stat_inc(INGERO_STAT_DEPTH_OVERFLOW);
    return 0;
  }
  struct ingero_frame* f = &t->frames[d & (INGERO_MAX_DEPTH - 1)];
  f->probe_id = probe;
  f->preempts = 0;
  f->switches = 0;
  f->preemptor_pid = 0;
  f->preemptor_tid = 0;
  f->preemptor_off_ns = 0;
  f->preemptor_comm[0] = 0;
  f->flags = 0;
  f->entry_len = 0;
  f->off_cpu_at_entry = t->off_cpu_total_ns;
  f->regs[0] = PT_REGS_PARM1(ctx);
  f->regs[1] = PT_REGS_PARM2(ctx);
  f->regs[2] = PT_REGS_PARM3(ctx);
  f->regs[3] = PT_REGS_PARM4(ctx);
  f->regs[4] = PT_REGS_PARM5(ctx);
  f->regs[5] = INGERO_PARM6(ctx);

  __u64 args = PT_REGS_SP(ctx) + 8; /* past the return address */
  __u32 words = r->stack_words;
  if (words > INGERO_STACK_WORDS) words = INGERO_STACK_WORDS;
  if (words) {
    if (bpf_probe_read_user(f->stack, words * 8, (void*)args))
      f->flags |= INGERO_CALL_STACK_READ_FAULT;
  }

  __u8 src = r->entry_read.src;
  if (src != INGERO_PTR_NONE) {
    __u32 len = r->entry_read.len;
    if (len > INGERO_ENTRY_READ_MAX) len = INGERO_ENTRY_READ_MAX;
    __u64 ptr = src == INGERO_PTR_STACK_ADDR ? args : arg_word(f, src, r->entry_read.index);
    ptr += r->entry_read.offset;
    if (len > 0 && ptr) {
      if (bpf_probe_read_user(f->entry_buf, len, (void*)ptr) == 0)
        f->entry_len = len;
      else
        f->flags |= INGERO_CALL_ENTRY_READ_FAULT;
    } else if (len > 0) {
      f->flags |= INGERO_CALL_ENTRY_READ_FAULT;
    }
  }
  /* Timestamp last so capture work is not billed to the traced function. */
  f->start_ns = bpf_ktime_get_ns();
  t->depth = d + 1;
  return 0;
}

/* Fills and submits one call record from frame f. `full` is a compile-time constant at each
 * call site: the verifier needs constant reservation sizes, so the short record (no entry
 * buffer) and the full one are two inlined copies. */
static __always_inline void emit_call_sized(struct ingero_thread* t, struct ingero_frame* f,
                                            __u32 depth, __u32 tid, __u64 end_ns, __u64 ret,
                                            __u16 extra_flags, struct ingero_recipe* r,
                                            __u64 stack_hash, const bool full) {
  struct ingero_call_rec* e =
      bpf_ringbuf_reserve(&events, full ? sizeof(*e) : INGERO_CALL_REC_SHORT, 0);
  if (!e) {
    stat_inc(INGERO_STAT_RINGBUF_DROPS);
    return;
  }
  e->type = INGERO_REC_CALL;
  e->probe_id = f->probe_id;
  e->pid = t->tgid;
  e->tid = tid;
  e->cgroup_id = bpf_get_current_cgroup_id();
  e->start_ns = f->start_ns;
  e->end_ns = end_ns;
  e->ret = ret;
  __builtin_memcpy(e->regs, f->regs, sizeof(e->regs));
  __builtin_memcpy(e->stack, f->stack, sizeof(e->stack));
  e->off_cpu_ns = t->off_cpu_total_ns - f->off_cpu_at_entry;
  e->preemptor_off_ns = f->preemptor_off_ns;
  e->preempts = f->preempts;
  e->switches = f->switches;
  e->preemptor_pid = f->preemptor_pid;
  e->preemptor_tid = f->preemptor_tid;
  e->flags = f->flags | extra_flags;
  e->depth = depth;
  e->entry_len = f->entry_len;
  e->return_len = 0;
  e->stack_hash = stack_hash;
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  __builtin_memcpy(e->preemptor_comm, f->preemptor_comm, sizeof(e->preemptor_comm));
  if (full) __builtin_memcpy(e->entry_buf, f->entry_buf, sizeof(e->entry_buf));

  if (r && r->return_read.src != INGERO_PTR_NONE) {
    __u32 len = r->return_read.len;
    if (len > INGERO_RETURN_READ_MAX) len = INGERO_RETURN_READ_MAX;
    __u64 ptr = arg_word(f, r->return_read.src, r->return_read.index);
    if (ptr && len > 0) {
      ptr += r->return_read.offset;
      if (bpf_probe_read_user(e->return_buf, len, (void*)ptr) == 0)
        e->return_len = len;
      else
        e->flags |= INGERO_CALL_RETURN_READ_FAULT;
    } else if (len > 0) {
      e->flags |= INGERO_CALL_RETURN_READ_FAULT;
    }
  }
  bpf_ringbuf_submit(e, wakeup_flags());
  stat_inc(INGERO_STAT_CALLS);
}

static __always_inline void emit_call(struct ingero_thread* t, struct ingero_frame* f, __u32 depth,
                                      __u32 tid, __u64 end_ns, __u64 ret, __u16 extra_flags,
                                      struct ingero_recipe* r, __u64 stack_hash) {
  if (f->entry_len)
    emit_call_sized(t, f, depth, tid, end_ns, ret, extra_flags, r, stack_hash, true);
  else
    emit_call_sized(t, f, depth, tid, end_ns, ret, extra_flags, r, stack_hash, false);
}

SEC("uretprobe")
int ingero_return(struct pt_regs* ctx) {
  __u64 now = bpf_ktime_get_ns();
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!t || t->depth == 0) {
    stat_inc(INGERO_STAT_UNPAIRED_RETURN);
    return 0;
  }
  __u32 d = t->depth - 1;
  if (d >= INGERO_MAX_DEPTH) { /* an overflowed entry: nothing was captured */
    t->depth = d;
    return 0;
  }
  __u32 probe = (__u32)bpf_get_attach_cookie(ctx);
  __u16 extra = 0;
  /* Normally the top frame matches. If not, an inner call unwound without returning
   * (longjmp, exception through a probed frame): drop frames until ours. */
  if (t->frames[d & (INGERO_MAX_DEPTH - 1)].probe_id != probe) {
    int found = -1;
#pragma unroll
    for (int i = INGERO_MAX_DEPTH - 1; i >= 0; i--) {
      if (found < 0 && (__u32)i < d && t->frames[i].probe_id == probe) found = i;
    }
    if (found < 0) {
      stat_inc(INGERO_STAT_UNPAIRED_RETURN);
      return 0;
    }
    for (__u32 i = 0; i < INGERO_MAX_DEPTH; i++)
      if (i > (__u32)found && i <= d) stat_inc(INGERO_STAT_FRAMES_DISCARDED);
    d = found;
    extra = INGERO_CALL_FRAMES_DISCARDED;
  }
  /* Re-bound the index in a form the verifier tracks (clang folds a plain mask away). */
  asm volatile("" : "+r"(d));
  if (d >= INGERO_MAX_DEPTH) return 0;
  struct ingero_frame* f = &t->frames[d];
  struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &probe);
  __u64 ret = PT_REGS_RC(ctx);
  __u64 stack_hash = 0;
  if (stacks_enabled) {
    bool anomalous = (__u32)ret != 0 || t->off_cpu_total_ns != f->off_cpu_at_entry ||
                     now - f->start_ns >= stack_slow_ns;
    stack_hash = capture_stack(ctx, t->tgid, tid, anomalous, &extra);
  }
  emit_call(t, f, d, tid, now, ret, extra, r, stack_hash);
  t->depth = d;
  return 0;
}

/* A thread is exiting: calls still in flight will never return. Report them as unfinished
 * rather than losing them, then free the thread's state. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ingero_thread_exit, struct task_struct* p) {
  host_exit(p);
  __u32 tid = BPF_CORE_READ(p, pid);
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!t) return 0;
  __u64 now = bpf_ktime_get_ns();
  __u32 depth = t->depth;
#pragma unroll
  for (__u32 i = 0; i < INGERO_MAX_DEPTH; i++) {
    if (i < depth) {
      struct ingero_frame* f = &t->frames[i];
      struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &f->probe_id);
      (void)r;
      emit_call(t, f, i, tid, now, 0, INGERO_CALL_UNFINISHED, 0, 0);
      stat_inc(INGERO_STAT_UNFINISHED);
    }
  }
  bpf_map_delete_elem(&threads, &tid);
  return 0;
}

static __always_inline void emit_libwatch(__u32 kind) {
  __u64 id = bpf_get_current_pid_tgid();
  struct ingero_libwatch_rec* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    stat_inc(INGERO_STAT_HOST_DROPS);
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
const volatile __u32 follow_children = 1;

SEC("tp_btf/sched_process_fork")
int BPF_PROG(ingero_fork, struct task_struct* parent, struct task_struct* child) {
  host_fork(parent, child);
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
  host_exec(p, bprm);
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

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
#define INGERO_LAUNCH_BATCH_SHIP
#include "launch_batch.h"
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
/* Untimed launches wait in their CPU's batch (launch_batch.h): set where the scheduler's switch
 * program ships a CPU's batch and user space ships batches left waiting. */
const volatile __u32 launch_batching = 0;
/* A kernel-name look-up whose key was shipped less than this long ago ships nothing
 * (records_call.h, INGERO_NAME_ONCE): a lost or unreadable first answer is asked for again. */
const volatile __u64 name_repeat_ns = 1000000000;
/* shared.bpf.h: ingero_wakeup_flags. */
volatile __u32 ingero_reader_busy = 0;
/* shared.bpf.h: the scheduler's switch program. */
volatile __u32 ingero_gpu_gen = 0;

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

/* The traced processes where a trace is filtered by pid: those given, and their children as
 * they fork. A process leaves it when its last thread exits (ingero_thread_exit), so the limit is
 * on processes alive at once; a child that finds it full is counted, never left out silently. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, INGERO_MAX_FILTERED_PIDS);
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

/* Kernel-name look-ups shipped (INGERO_NAME_ONCE): when each key last went out. */
struct name_key {
  __u32 tgid;
  __u32 probe;
  __u64 started; /* the process's start, and its image: a pid reused or exec'd asks anew */
  __u64 image;
  __u64 answer; /* 0 where the question alone fixes it (INGERO_NAME_FIXED) */
  __u64 question;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, struct name_key);
  __type(value, __u64);
} names_shipped SEC(".maps");

/* Kernel-name look-ups that named nothing new (held back at their entry or return), by probe:
 * user space rests the look-up probes a library repeats before each launch once they only
 * repeat (capture/lookup_rest.h). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, INGERO_MAX_PROBES);
  __type(key, __u32);
  __type(value, __u64);
} names_held SEC(".maps");

struct ingero_calls_ring_map calls_rb SEC(".maps");
struct ingero_launch_batches_map launch_batches SEC(".maps");

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
  __u32 off;
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct call_buf);
} call_scratch SEC(".maps");

extern bool bpf_session_is_return(void) __ksym __weak;
extern void* bpf_rdonly_cast(const void* obj, __u32 btf_id) __ksym __weak;

/* What ingero_call reads of the kernel's run context of a uprobe_multi program
 * (kernel/trace/bpf_trace.c: struct bpf_uprobe_multi_run_ctx, reached through the current
 * task's bpf_ctx): whether this run is a session's return, and the probe's attach cookie. The
 * kfunc and the helper that return them read the same two fields, but each is a call, and on
 * this kernel's mitigations a call's return costs about as much as its work; these are plain
 * loads, relocated by CO-RE. A kernel without this layout takes the kfunc and the helper. */
struct bpf_session_run_ctx___ingero {
  bool is_return;
} __attribute__((preserve_access_index));
struct bpf_uprobe___ingero {
  __u64 cookie;
} __attribute__((preserve_access_index));
struct bpf_uprobe_multi_run_ctx___ingero {
  struct bpf_session_run_ctx___ingero session_ctx;
  struct bpf_uprobe___ingero* uprobe;
} __attribute__((preserve_access_index));

/* Who runs this session program and through which probe: the ids and the run context read
 * from the current task (one helper call), or by the kfunc and two helpers where the kernel's
 * layout is not known. */
struct call_who {
  __u64 id; /* tgid << 32 | tid, as bpf_get_current_pid_tgid */
  __u32 probe;
  bool is_return;
};
static __always_inline void session_who(struct pt_regs* ctx, struct call_who* w) {
  if (bpf_core_type_exists(struct bpf_uprobe_multi_run_ctx___ingero) && bpf_rdonly_cast) {
    struct task_struct* task = bpf_get_current_task_btf();
    w->id = ((__u64)task->tgid << 32) | (__u32)task->pid;
    struct bpf_uprobe_multi_run_ctx___ingero* rc = bpf_rdonly_cast(
        task->bpf_ctx, bpf_core_type_id_kernel(struct bpf_uprobe_multi_run_ctx___ingero));
    w->is_return = rc->session_ctx.is_return;
    w->probe = (__u32)rc->uprobe->cookie;
    return;
  }
  w->id = bpf_get_current_pid_tgid();
  w->is_return = bpf_session_is_return();
  w->probe = (__u32)bpf_get_attach_cookie(ctx);
}

/* The helpers of the call programs, in order of use: entry capture, record emission, the
 * entry and return paths. */
// clang-format off
#include "call_capture.h"
#include "call_emit.h"
#include "call_paths.h"
// clang-format on

SEC("uprobe")
int ingero_call(struct pt_regs* ctx) {
  struct call_who w;
  session_who(ctx, &w);
  if (w.is_return) {
    call_return(ctx, true, (__u32)w.id, w.probe);
    return 0;
  }
  return call_entry(ctx, true, w.id, w.probe);
}

SEC("uprobe")
int ingero_entry(struct pt_regs* ctx) {
  call_entry(ctx, false, bpf_get_current_pid_tgid(), 0);
  return 0;
}

SEC("uretprobe")
int ingero_return(struct pt_regs* ctx) {
  call_return(ctx, false, 0, 0);
  return 0;
}

/* A thread is exiting: its call in flight will never return. Report it as unfinished rather
 * than losing it, then free the thread's state. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ingero_thread_exit, struct task_struct* p) {
  __u32 tid = BPF_CORE_READ(p, pid);
  /* The process's last thread (do_exit has counted it out of signal->live before this
   * tracepoint): it leaves the pid filter, which would otherwise fill with the dead children of
   * a launcher that keeps forking (4,096 of them once left every later child untraced). A new
   * process given its pid is let in only by a traced parent's fork, as any other. */
  if (filter_pids_enabled && BPF_CORE_READ(p, signal, live.counter) == 0) {
    __u32 tgid = BPF_CORE_READ(p, tgid);
    bpf_map_delete_elem(&pid_filter, &tgid);
  }
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!t) return 0;
  if (t->depth > 0) {
    struct ingero_frame* f = &t->frames[0];
    struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &f->probe_id);
    emit_call(t, f, tid, bpf_ktime_get_ns(), 0, INGERO_CALL_UNFINISHED, r, 0);
    stat_inc(INGERO_STAT_UNFINISHED);
  }
  if (launch_batching) batch_flush(); /* its last launches, if they wait here */
  bpf_map_delete_elem(&threads, &tid);
  return 0;
}

/* Ships this CPU's batch of launches (launch_batch.h). Never attached: user space runs it on
 * a CPU (BPF_PROG_TEST_RUN with BPF_F_TEST_RUN_ON_CPU) whose batch has waited too long, a thread
 * there having launched and then kept the CPU, and on every CPU at the session's end. */
SEC("raw_tp")
int ingero_ship_launches(void* ctx) {
  batch_flush();
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
  /* Nor is a launch timed in a window that has closed since (call_paths.h). */
  if (t->frames[0].window && er->window != t->frames[0].window) return 0;
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

/* Under a pid or cgroup filter, a process outside it is neither traced nor scanned: its execs
 * and loads say nothing to user space, which would otherwise read its maps, stat its files and
 * look for Python in it at every exec on a busy host. A child of a traced process joins the
 * filter at its fork (ingero_follow_fork), before its exec. */
static __always_inline void emit_libwatch(__u32 kind) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!pid_allowed(id >> 32, 0)) return;
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
  if (bpf_map_update_elem(&pid_filter, &ctgid, &one, BPF_ANY) != 0)
    stat_inc(INGERO_STAT_CHILDREN_UNFOLLOWED);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ingero_exec, struct task_struct* p, pid_t old_pid, struct linux_binprm* bprm) {
  emit_libwatch(INGERO_LIBWATCH_EXEC);
  return 0;
}

/* Attached to the dynamic loader's _dl_debug_state(), which it calls around every change to
 * the link map (initial load, dlopen, dlclose): once before it (r_state RT_ADD or RT_DELETE)
 * and once it is done (RT_CONSISTENT). Only the second shows anything new to map; where the
 * cookie locates _r_debug, the first is not reported (a Python start-up dlopens hundreds of
 * extension modules, each a re-scan of a large process's maps). A state that cannot be read
 * is reported. */
SEC("uprobe")
int ingero_linkmap(struct pt_regs* ctx) {
  __u64 cookie = bpf_get_attach_cookie(ctx);
  if (cookie & INGERO_LINKMAP_STATE_KNOWN) {
    __s64 delta = (__s32)(__u32)cookie;
    __s32 state = 0;
    __u64 at = PT_REGS_IP(ctx) + delta + INGERO_R_DEBUG_STATE_OFFSET;
    if (bpf_probe_read_user(&state, sizeof(state), (void*)at) == 0 && state != 0) return 0;
  }
  emit_libwatch(INGERO_LIBWATCH_LINKMAP);
  return 0;
}

SEC("uprobe")
int ingero_selftest(struct pt_regs* ctx) {
  stat_inc(INGERO_STAT_SELFTEST);
  return 0;
}

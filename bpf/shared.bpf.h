/* What the BPF files share once linked into one object (bpftool gen object): the per-thread
 * state of traced calls, the maps more than one file uses (defined in the file named beside
 * each, declared extern here) and small inline helpers. Declarations only: programs live in
 * calls.bpf.c, stacks.bpf.c and host.bpf.c. */
#ifndef INGERO_SHARED_BPF_H
#define INGERO_SHARED_BPF_H

#include "ingero_records.h"

#include "thread_state.h"

/* Maps defined in calls.bpf.c and used by every file (offcpu: written by host.bpf.c). Named types,
 * so the definition and these extern declarations are one type. */
struct ingero_threads_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, INGERO_MAX_THREADS);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, __u32);
  __type(value, struct ingero_thread);
};
extern struct ingero_threads_map threads SEC(".maps");

struct ingero_offcpu_map {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32); /* tid */
  __type(value, struct ingero_offcpu_start);
};
extern struct ingero_offcpu_map offcpu SEC(".maps");

struct ingero_stats_map {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, INGERO_STAT_MAX);
  __type(key, __u32);
  __type(value, __u64);
};
extern struct ingero_stats_map stats SEC(".maps");

struct ingero_watched_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);  /* tgid */
  __type(value, __u8); /* INGERO_WATCH_* */
};
extern struct ingero_watched_map watched_pids SEC(".maps");

/* The calls ring (resized by user space before load) and each CPU's batch of untimed launches
 * (bpf/launch_batch.h): host.bpf.c ships a CPU's batch when the CPU switches tasks. */
struct ingero_calls_ring_map {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20);
};
extern struct ingero_calls_ring_map calls_rb SEC(".maps");

struct ingero_launch_batches_map {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ingero_launch_batch);
};
extern struct ingero_launch_batches_map launch_batches SEC(".maps");

static __always_inline void stat_add(__u32 which, __u64 n) {
  __u64* v = bpf_map_lookup_elem(&stats, &which);
  if (v) *v += n;
}

static __always_inline void stat_inc(__u32 which) { stat_add(which, 1); }

static __always_inline __u8 watch_flags(__u32 tgid) {
  __u8* w = bpf_map_lookup_elem(&watched_pids, &tgid);
  return w ? *w : 0;
}

/* Bumped when a process is first marked a GPU process (call_paths.h). The scheduler's switch
 * program keeps, for a thread going off-CPU, whether its process was one and this generation;
 * the thread back on a CPU looks its process up again only if a process was marked meanwhile.
 * Defined in calls.bpf.c. */
extern volatile __u32 ingero_gpu_gen;

/* Set by the reader while it is not waiting for a wake-up (it is draining the rings or doing
 * its other work), clear while it waits (probe/ring_reader.cc); set by the program that wakes
 * it (ingero_wakeup_flags). Defined in calls.bpf.c. */
extern volatile __u32 ingero_reader_busy;

/* Waking the reader for every record costs an irq_work + IPI per record, which dominated the
 * per-call cost in measurement (bench/). The reader polls with a short timeout anyway, so wake
 * it only when enough data is queued to be worth it, and never while it is busy: it drains every
 * ring before it waits again, and a wake-up then is an IPI for nothing (in a VM, an exit; ~80 ns
 * a launch on bench/launch_cost.sh, whose reader is never idle long). The program that wakes it
 * marks it busy itself: until the reader runs, which on a loaded host takes milliseconds, the
 * other threads' records would each raise a wake-up of their own (16 threads of timed calls:
 * 21,533 self-IPIs for 800,016 calls). A check that reads the flag just before the reader
 * clears it is followed by the next one, at most 16 records of a thread later, long before the
 * ring fills. */
#define INGERO_WAKEUP_BYTES (256 * 1024)
static __always_inline __u64 ingero_wakeup_flags(void* ring) {
  if (ingero_reader_busy) return BPF_RB_NO_WAKEUP;
  if (bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) < INGERO_WAKEUP_BYTES) return BPF_RB_NO_WAKEUP;
  ingero_reader_busy = 1;
  return BPF_RB_FORCE_WAKEUP;
}

/* What a call program asks ingero_call_stack for (one pointer: a global function takes five
 * arguments at most). */
struct ingero_stack_ask {
  __u64 extra;  /* bit 0 = always walk; above it, what keys the site beside its return address: a
                 * failing call's return code, a launch's kernel (INGERO_RECIPE_SITE_ARG) */
  __u64 caller; /* the return address of a call at its entry; 0 at its return */
  __u64 now_ns; /* the caller's clock (bpf_ktime_get_ns), for the sampling interval */
  __u32 probe;
  __u32 tgid; /* the calling thread's process and thread ids */
  __u32 tid;
  __u32 pad;
};

/* stacks.bpf.c: the stack of the call returning in `ctx` (a uprobe session or uretprobe
 * context), or entering it when `ask->caller` (its return address) is given (an entry-only
 * call), made by the thread whose state is `t` (the caller's own lookup in `threads`).
 * Returns its hash (0: none) with INGERO_STACK_RET_* bits on top. Anomalous calls always get
 * a walk; others walk only while their call site is new, or when the thread's sampling clock
 * allows, and otherwise take the site's last stack. */
#define INGERO_STACK_RET_SHIPPED (1ull << 63)
#define INGERO_STACK_RET_OF_SITE (1ull << 62)
#define INGERO_STACK_HASH_MASK ((1ull << 62) - 1)
extern __u64 ingero_call_stack(struct pt_regs* ctx, struct ingero_thread* t,
                               struct ingero_stack_ask* ask);

#endif /* INGERO_SHARED_BPF_H */

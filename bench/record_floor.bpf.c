// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The smallest probes that record a call: what any tracer that keeps every call must do at each
 * one, and nothing of ingero's own. bench/launch_cost.sh and bench/run_benchmarks.sh measure
 * ingero against them beside the bare floors (probes that record nothing): ingero's cost over
 * these is what its design adds, theirs over the bare floors what recording costs on the host.
 * They are uprobe session programs writing into a ring of ingero's default size, read by
 * another thread (bench/min_probe.cc, modes `record`, `record-batch` and `record-call`); no
 * filter, no header fields the call does not use, no wake-up (the reader polls).
 *
 * record_launch, an entry-only launch (it returns 1, so no return probe is armed): the process
 * and thread, the time, the six register arguments, and one read of the user stack for the
 * return address (what names the launch's call site) and three stack arguments
 * (cuLaunchKernel's blockDimZ, sharedMemBytes and hStream). No thread state.
 *
 * record_call, a timed call (a sync, a copy): at entry its arguments, return address and start
 * kept in the thread's slot of a hash map; at return its record: the same, its end and its
 * return value. */
/* vmlinux.h must come first. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* libbpf 1.1's bpf_tracing.h stops at PARM5. */
#if defined(__TARGET_ARCH_x86)
#define RECORD_PARM6(ctx) ((ctx)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define RECORD_PARM6(ctx) (((struct user_pt_regs*)(ctx))->regs[5])
#endif

struct launch_record {
  __u64 id; /* tgid << 32 | tid */
  __u64 ts_ns;
  __u64 regs[6];
  __u64 stack[4]; /* the return address, then three stack arguments */
};

/* A timed call between its entry and its return. */
struct call_entry {
  __u64 start_ns;
  __u64 regs[6];
  __u64 caller;
};

struct call_record {
  __u64 id;
  __u64 start_ns;
  __u64 end_ns;
  __u64 ret;
  __u64 regs[6];
  __u64 caller;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, struct call_entry);
} calls_in_flight SEC(".maps");

extern bool bpf_session_is_return(void) __ksym __weak;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20); /* ingero's calls ring on a host of up to 8 CPUs */
} records SEC(".maps");

/* [0]: launches or calls recorded; [1]: refused by a full ring. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, __u64);
} counts SEC(".maps");

static __always_inline void bump_n(__u32 k, __u64 n) {
  __u64* v = bpf_map_lookup_elem(&counts, &k);
  if (v) *v += n;
}

static __always_inline void bump(__u32 k) { bump_n(k, 1); }

static __always_inline void put_regs(struct pt_regs* ctx, __u64* regs) {
  regs[0] = PT_REGS_PARM1(ctx);
  regs[1] = PT_REGS_PARM2(ctx);
  regs[2] = PT_REGS_PARM3(ctx);
  regs[3] = PT_REGS_PARM4(ctx);
  regs[4] = PT_REGS_PARM5(ctx);
  regs[5] = RECORD_PARM6(ctx);
}

SEC("uprobe")
int record_launch(struct pt_regs* ctx) {
  struct launch_record* r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
  if (!r) {
    bump(1);
    return 1;
  }
  r->id = bpf_get_current_pid_tgid();
  put_regs(ctx, r->regs);
  if (bpf_probe_read_user(r->stack, sizeof(r->stack), (void*)PT_REGS_SP(ctx))) r->stack[0] = 0;
  r->ts_ns = bpf_ktime_get_ns();
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
  bump(0);
  return 1;
}

/* record_batch: record_launch's records gathered in a per-CPU batch, the ring given one record
 * of batch_len launches when the batch fills (ingero's launches in batches, bpf/launch_batch.h,
 * without its guard against a preempted writer or its shipping of a batch left waiting): what
 * recording each launch costs when the ring's reservation is paid once a batch. */
#define RECORD_BATCH 32
struct launch_batch {
  __u32 n;
  __u32 pad;
  struct launch_record r[RECORD_BATCH];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct launch_batch);
} batches SEC(".maps");

const volatile __u32 batch_len = RECORD_BATCH; /* launches a batch, 1..RECORD_BATCH */

SEC("uprobe")
int record_batch(struct pt_regs* ctx) {
  __u32 zero = 0;
  struct launch_batch* b = bpf_map_lookup_elem(&batches, &zero);
  if (!b) return 1;
  __u32 i = b->n;
  if (i >= RECORD_BATCH) i = 0;
  struct launch_record* r = &b->r[i];
  r->id = bpf_get_current_pid_tgid();
  put_regs(ctx, r->regs);
  if (bpf_probe_read_user(r->stack, sizeof(r->stack), (void*)PT_REGS_SP(ctx))) r->stack[0] = 0;
  r->ts_ns = bpf_ktime_get_ns();
  if (++i < batch_len) {
    b->n = i;
    return 1;
  }
  b->n = 0;
  __u64 bytes = (__u64)i * sizeof(struct launch_record);
  if (bytes > sizeof(b->r)) bytes = sizeof(b->r);
  bump_n(bpf_ringbuf_output(&records, b->r, bytes, BPF_RB_NO_WAKEUP) ? 1 : 0, i);
  return 1;
}

static __always_inline int call_enter(struct pt_regs* ctx, __u32 tid) {
  struct call_entry* e = bpf_map_lookup_elem(&calls_in_flight, &tid);
  if (!e) {
    struct call_entry zero = {};
    bpf_map_update_elem(&calls_in_flight, &tid, &zero, BPF_NOEXIST);
    e = bpf_map_lookup_elem(&calls_in_flight, &tid);
    if (!e) return 1;
  }
  put_regs(ctx, e->regs);
  if (bpf_probe_read_user(&e->caller, sizeof(e->caller), (void*)PT_REGS_SP(ctx))) e->caller = 0;
  e->start_ns = bpf_ktime_get_ns();
  return 0; /* its return is wanted */
}

SEC("uprobe")
int record_call(struct pt_regs* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tid = (__u32)id;
  if (!bpf_session_is_return()) return call_enter(ctx, tid);
  __u64 end = bpf_ktime_get_ns();
  struct call_entry* e = bpf_map_lookup_elem(&calls_in_flight, &tid);
  if (!e) return 0;
  struct call_record* r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
  if (!r) {
    bump(1);
    return 0;
  }
  r->id = id;
  r->start_ns = e->start_ns;
  r->end_ns = end;
  r->ret = PT_REGS_RC(ctx);
  __builtin_memcpy(r->regs, e->regs, sizeof(r->regs));
  r->caller = e->caller;
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
  bump(0);
  return 0;
}

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The smallest probe that records a launch: what any tracer that keeps every launch must do at
 * each one, and nothing of ingero's own. bench/launch_cost.sh measures ingero against it beside
 * the bare floor (a probe that records nothing): ingero's cost over this one is what its design
 * adds, this one's over the bare floor what recording a launch costs on the host.
 *
 * One uprobe session program, entry only (it returns 1, so no return probe is armed), writing
 * one record a launch into a ring of ingero's default size, read by another thread
 * (bench/min_probe.cc, mode `record`). The record holds what a launch record must: the
 * process and thread, the time, the six register arguments, and one read of the user stack for
 * the return address (what names the launch's call site) and three stack arguments
 * (cuLaunchKernel's blockDimZ, sharedMemBytes and hStream). No thread state, no filter, no
 * header fields a launch does not use, no wake-up (the reader polls). */
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

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20); /* ingero's calls ring on a host of up to 8 CPUs */
} records SEC(".maps");

/* [0]: records written; [1]: refused by a full ring. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, __u64);
} counts SEC(".maps");

static __always_inline void bump(__u32 k) {
  __u64* v = bpf_map_lookup_elem(&counts, &k);
  if (v) *v += 1;
}

SEC("uprobe")
int record_launch(struct pt_regs* ctx) {
  struct launch_record* r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
  if (!r) {
    bump(1);
    return 1;
  }
  r->id = bpf_get_current_pid_tgid();
  r->regs[0] = PT_REGS_PARM1(ctx);
  r->regs[1] = PT_REGS_PARM2(ctx);
  r->regs[2] = PT_REGS_PARM3(ctx);
  r->regs[3] = PT_REGS_PARM4(ctx);
  r->regs[4] = PT_REGS_PARM5(ctx);
  r->regs[5] = RECORD_PARM6(ctx);
  if (bpf_probe_read_user(r->stack, sizeof(r->stack), (void*)PT_REGS_SP(ctx))) r->stack[0] = 0;
  r->ts_ns = bpf_ktime_get_ns();
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
  bump(0);
  return 1;
}

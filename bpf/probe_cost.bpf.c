// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The smallest useful uprobe pair: count entries and returns. The baseline against which
 * `ingero check --bench` (probe/probe_cost.h) and bench/ measure what ingero's own programs
 * add per call. */
/* vmlinux.h must come first. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
// clang-format on

char LICENSE[] SEC("license") = "Dual BSD/GPL";

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
int min_entry(void* ctx) {
  bump(0);
  return 0;
}

SEC("uretprobe")
int min_return(void* ctx) {
  bump(1);
  return 0;
}

/* The same count as one uprobe session program (Linux 6.12+): it runs at entry and, unless the
 * entry run returned non-zero, again at return. min_session_skip returns 1 at entry, so no
 * return probe is armed: the cost of a probe whose entry decides the return is not needed. */
extern bool bpf_session_is_return(void) __ksym __weak;

SEC("uprobe")
int min_session(void* ctx) {
  bump(bpf_session_is_return() ? 1 : 0);
  return 0;
}

SEC("uprobe")
int min_session_skip(void* ctx) {
  bump(bpf_session_is_return() ? 1 : 0);
  return 1;
}

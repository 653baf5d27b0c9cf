/* Record layouts shared by the BPF programs and user space.
 *
 * One header, two compilers: the BPF side includes it after vmlinux.h, the C++ side after
 * <linux/types.h>. probe/record_layout.h static_asserts every size and offset the decoder uses,
 * so a change here that forgets the other side fails the build instead of corrupting data.
 *
 * Every record starts with a __u32 type tag (enum ingero_rec_type). Three ring buffers carry
 * them, so that what matters most is never crowded out by the rest:
 *   calls  call records and library-watch notifications (records_call.h)
 *   aux    stacks, Python code objects and on-CPU samples (records_stack.h)
 *   host   scheduler, lifecycle, block I/O and TCP records (records_host.h)
 */
#ifndef INGERO_BPF_RECORDS_H
#define INGERO_BPF_RECORDS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define INGERO_COMM_LEN 16

enum ingero_rec_type {
  INGERO_REC_CALL = 1,          /* struct ingero_call_rec (calls ring) */
  INGERO_REC_LIBWATCH = 2,      /* struct ingero_libwatch_rec (calls ring) */
  INGERO_REC_SCHED = 3,         /* struct ingero_sched_rec (host ring) */
  INGERO_REC_PROC = 4,          /* struct ingero_proc_rec (host ring) */
  INGERO_REC_BLOCK = 5,         /* struct ingero_block_rec (host ring) */
  INGERO_REC_TCP = 6,           /* struct ingero_tcp_rec (host ring) */
  INGERO_REC_STACK = 7,         /* struct ingero_stack_rec (aux ring) */
  INGERO_REC_PYCODE = 8,        /* struct ingero_py_code_rec (aux ring) */
  INGERO_REC_CPU_SAMPLE = 9,    /* struct ingero_cpu_sample_rec (aux ring) */
  INGERO_REC_LAUNCH = 10,       /* struct ingero_launch_rec (calls ring) */
  INGERO_REC_LAUNCH_BATCH = 11, /* struct ingero_launch_batch_rec: launch records (calls ring) */
};

#include "records_call.h"
#include "records_host.h"
#include "records_stack.h"

/* Counters kept per CPU in the `stats` map; user space sums them. */
enum ingero_stat {
  INGERO_STAT_CALLS = 0,           /* call records submitted */
  INGERO_STAT_RINGBUF_DROPS,       /* call records lost because the calls ring was full */
  INGERO_STAT_THREAD_MAP_FULL,     /* calls not traced: no room for another thread */
  INGERO_STAT_DEPTH_OVERFLOW,      /* calls nested deeper than INGERO_MAX_DEPTH */
  INGERO_STAT_UNPAIRED_RETURN,     /* a return with no matching entry */
  INGERO_STAT_FRAMES_DISCARDED,    /* entries whose return never came (unwound) */
  INGERO_STAT_UNFINISHED,          /* calls in flight when their thread exited */
  INGERO_STAT_HOST_DROPS,          /* host-context records lost to a full host ring */
  INGERO_STAT_HOST_RECORDS,        /* host-context records submitted */
  INGERO_STAT_SELFTEST,            /* hits of the check self-test uprobe */
  INGERO_STAT_STACKS_SHIPPED,      /* stack records submitted */
  INGERO_STAT_STACKS_SAMPLED,      /* calls whose stack was walked but shipped already: hash only */
  INGERO_STAT_STACK_DROPS,         /* stack and code records lost to a full aux ring */
  INGERO_STAT_PY_WALKS,            /* Python frame walks attempted */
  INGERO_STAT_PY_FAULTS,           /* ... that hit an unreadable address */
  INGERO_STAT_NESTED,              /* calls folded into the traced call they were made in */
  INGERO_STAT_STACKS_OF_SITE,      /* calls that took their call site's stack without a walk */
  INGERO_STAT_STACK_WALKS,         /* calls whose stack was walked (samples: CPU_SAMPLES) */
  INGERO_STAT_CPU_SAMPLES,         /* on-CPU samples of GPU processes submitted */
  INGERO_STAT_SAMPLE_DROPS,        /* on-CPU samples lost to a full aux ring */
  INGERO_STAT_LIBWATCH_DROPS,      /* library-watch notifications lost to a full calls ring */
  INGERO_STAT_UNTIMED,             /* launches emitted at entry, not timed (no return probe) */
  INGERO_STAT_RETURNS_DETACHED,    /* calls whose probe was detached while they ran: untimed */
  INGERO_STAT_LAUNCH_BATCHES,      /* batches of untimed launches submitted (bpf/launch_batch.h) */
  INGERO_STAT_SITE_LOOKUPS,        /* calls whose site was looked up in `sites`: not in the memo */
  INGERO_STAT_NAME_ASKED_AGAIN,    /* name look-ups not entered: their question was just answered */
  INGERO_STAT_NAME_ANSWERED_AGAIN, /* name look-ups not shipped: their answer was just shipped */
  INGERO_STAT_UNTIMED_RETURNS, /* returns that trapped of launches entered untimed (no sessions) */
  INGERO_STAT_CHILDREN_UNFOLLOWED, /* children of traced processes left out: pid filter full */
  INGERO_STAT_MAX,
};

#endif /* INGERO_BPF_RECORDS_H */

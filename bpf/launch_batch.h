/* Untimed launches gathered per CPU, and submitted to the calls ring as one record
 * (struct ingero_launch_batch_rec) when the batch is full, when the CPU switches tasks, before
 * any other record of the calls ring from this CPU, and when user space asks for a batch that
 * waited too long (ingero_ship_launches, run on that CPU). Included by calls.bpf.c and
 * host.bpf.c after shared.bpf.h.
 *
 * Why: a reservation and a commit on the ring cost a launch ~50 ns on this host beyond what
 * writing its bytes costs (docs/performance.md, "Launches in batches"); a batch pays them once
 * for ~30 launches, and is written where the CPU last wrote it.
 *
 * A thread's records stay in order on the ring: its launches wait in the batch of the CPU it
 * runs on, which is shipped before the thread's next other record there and when it leaves
 * the CPU. The one exception is a batch held by a program preempted on that CPU (busy), which
 * cannot be shipped then: a thread that moved to another CPU meanwhile can get a record onto
 * the ring before its launches still waiting there. */
#ifndef INGERO_LAUNCH_BATCH_H
#define INGERO_LAUNCH_BATCH_H

/* What an untimed launch's record takes at most: its short header, every register word, up to
 * INGERO_LAUNCH_STACK_WORDS stack words, its caller, and the ident block where it ships one.
 * Every launch API takes at most three arguments on the stack (cuLaunchKernel: blockDimZ,
 * sharedMemBytes, hStream); a recipe with more takes the general path (call_paths.h). */
#define INGERO_LAUNCH_STACK_WORDS 3
#define INGERO_LAUNCH_REC_SIZE \
  (sizeof(struct ingero_launch_rec) + 8 * (INGERO_REG_WORDS + INGERO_LAUNCH_STACK_WORDS) + 8)
#define INGERO_LAUNCH_IDENT_REC_SIZE (INGERO_LAUNCH_REC_SIZE + sizeof(struct ingero_call_ident))
/* Where a batch stops taking launches: one more of the largest must still fit. */
#define INGERO_LAUNCH_BATCH_ROOM (INGERO_LAUNCH_BATCH_BYTES - INGERO_LAUNCH_IDENT_REC_SIZE)

/* This CPU's batch, taken (busy) for the caller; 0 when a program preempted here holds it. */
static __always_inline struct ingero_launch_batch* batch_take(void) {
  __u32 zero = 0;
  struct ingero_launch_batch* b = bpf_map_lookup_elem(&launch_batches, &zero);
  if (!b || __sync_val_compare_and_swap(&b->busy, 0, 1) != 0) return 0;
  return b;
}

static __always_inline void batch_give(struct ingero_launch_batch* b) {
  /* Only programs on this CPU take it (user space runs its shipping program here): program
   * order is all the release needs. */
  asm volatile("" ::: "memory");
  b->busy = 0;
}

/* Submits the launches of a taken batch as one record and empties it. A full ring refuses
 * them all, counted as lost. A global function, called once a batch: the verifier walks it once,
 * not at every place a batch may ship. Defined in calls.bpf.c (INGERO_LAUNCH_BATCH_SHIP). */
#ifndef INGERO_LAUNCH_BATCH_SHIP
extern int batch_ship(struct ingero_launch_batch* b, __u64 wake);
#else
__noinline int batch_ship(struct ingero_launch_batch* b, __u64 wake) {
  if (!b) return 0;
  __u32 count = b->rec.count;
  if (!count) return 0;
  __u32 bytes = b->rec.bytes;
  if (bytes > INGERO_LAUNCH_BATCH_BYTES) bytes = INGERO_LAUNCH_BATCH_BYTES;
  if (bpf_ringbuf_output(&calls_rb, &b->rec, sizeof(b->rec) + bytes, wake)) {
    stat_add(INGERO_STAT_RINGBUF_DROPS, count);
  } else {
    stat_add(INGERO_STAT_CALLS, count);
    stat_inc(INGERO_STAT_LAUNCH_BATCHES);
  }
  b->rec.count = 0;
  b->rec.bytes = 0;
  return 0;
}
#endif

/* Ships this CPU's batch if it holds launches and no preempted program holds it. */
static __always_inline void batch_flush(void) {
  __u32 zero = 0;
  struct ingero_launch_batch* b = bpf_map_lookup_elem(&launch_batches, &zero);
  if (!b || !b->rec.count || __sync_val_compare_and_swap(&b->busy, 0, 1) != 0) return;
  batch_ship(b, BPF_RB_NO_WAKEUP);
  batch_give(b);
}

#endif /* INGERO_LAUNCH_BATCH_H */

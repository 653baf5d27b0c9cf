/* Per-thread state the BPF programs keep in maps, as plain structs shared with user space:
 * the traced calls of a thread (the `threads` map of calls.bpf.c), whose cached
 * PyThreadState user space reads, and its last switch off a CPU (the `offcpu` map of
 * host.bpf.c), which gives a stuck thread's state (probe/bpf_session.cc). */
#ifndef INGERO_THREAD_STATE_H
#define INGERO_THREAD_STATE_H

#include "ingero_records.h"

/* One traced call in flight. */
struct ingero_frame {
  __u32 probe_id;
  __u32 preempts;
  __u32 switches;
  __u32 preemptor_pid;
  __u32 preemptor_tid;
  __u16 entry_len;
  __u16 flags;
  __u32 nested;       /* traced calls made inside this one */
  __u32 nested_probe; /* the first of them */
  __u32 is_nested;    /* pair fallback only: a call folded into the frame below */
  __u32 window;       /* its recipe's window when pushed (ingero_recipe.window); 0: none */
  __u64 sp;           /* stack pointer at entry: a frame below the current one was unwound */
  __u64 fp;           /* the caller's frame pointer at entry (calls that may block), 0 otherwise */
  __u64 start_ns;
  __u64 off_cpu_at_entry;
  __u64 preemptor_off_ns;
  __u64 regs[INGERO_REG_WORDS];
  /* The return address at sp, then the stack arguments above it: one read of the user stack
   * fills both (caller must stay right before stack). */
  __u64 caller;
  __u64 stack[INGERO_STACK_WORDS];
  char preemptor_comm[INGERO_COMM_LEN];
  __u8 entry_buf[INGERO_ENTRY_READ_MAX];
};

/* A call site whose stack a thread took (stacks.bpf.c: ingero_call_stack): the site's key and
 * the stack's hash, kept per thread in a small direct-mapped table so that the thread's next
 * calls of the site take that stack without the lookup in the shared `sites` map until its
 * next walk is due (and its walk refreshes it). */
#define INGERO_SITE_MEMO_BITS 5
#define INGERO_SITE_MEMO (1 << INGERO_SITE_MEMO_BITS)
struct ingero_site_memo {
  __u64 key; /* the site's key hash; 0: empty */
  __u64 stack_hash;
};

/* Per-thread state of a thread that made a traced call: its calls in flight, its off-CPU
 * clock (kept by sched_switch in host.bpf.c), what it last shipped about itself, where its
 * Python thread state is, its stack-sampling clock and the call sites it took stacks from. */
struct ingero_thread {
  __u32 tgid;
  __u32 depth;
  __u64 off_cpu_total_ns;
  __u64 ident_cgroup;               /* cgroup last shipped in an ident block */
  char ident_comm[INGERO_COMM_LEN]; /* name last shipped; "" = nothing shipped yet */
  __u64 py_tstate;                  /* this thread's PyThreadState, 0 = unknown */
  __u64 next_walk_ns;               /* time-based stack sampling: next walk not before */
  __u64 next_timed_ns; /* without sessions, in a launch timing window: next timed launch not
                        * before (INGERO_WINDOW_TIMING_GAP_NS after the last) */
  __u32 timing_seq;    /* entry-only calls seen: one in launch_timing_every is timed */
  __u32 gpu_marked;    /* its process is in watched_pids as a GPU process */
  __u32 py_absent_gen; /* py_procs_gen + 1 when its process had no py_procs entry
                        * at that generation; 0: not known */
  __u32 ident_seq;     /* records built from a frame: one in 16 reads the name and cgroup again */
  __u32 py_config_gen; /* py_procs_gen + 1 when py_config was copied from its process's entry */
  __u32 nest_sp;       /* with sessions, the low 32 bits of the stack pointer at the entry of its
                        * last launch, if it was an upper layer's sent untimed (else 0): a lower
                        * layer's launch entered below it within INGERO_NEST_SP_RANGE is the
                        * driver launch that one makes */
  /* Its process's py_procs entry as of py_config_gen: a launch's call site key reads the
   * thread's innermost Python frame through it, without the lookup in py_procs. */
  struct ingero_py_config py_config;
  struct ingero_frame frames[INGERO_MAX_DEPTH];
  struct ingero_site_memo site_memo[INGERO_SITE_MEMO];
};

/* When and why each thread last went off-CPU (host.bpf.c keeps it at every switch; ts is 0
 * while the thread runs). The in-flight iterator reads it for the state of a stuck thread.
 * A GPU process's thread that blocked also keeps who woke it (woken_ns 0: nobody yet). */
struct ingero_offcpu_start {
  __u64 ts;
  __u64 by_cgroup;
  __u8 preempted;
  __u8 gpu;      /* its process was a GPU process when the thread went off-CPU */
  __u16 gpu_gen; /* ingero_gpu_gen's low bits then (shared.bpf.h) */
  __u32 prev_state;
  __u32 by_pid;
  __u32 by_tid;
  char by_comm[INGERO_COMM_LEN];
  __u64 woken_ns;
  __u32 waker_pid;
  __u32 waker_tid;
  char waker_comm[INGERO_COMM_LEN];
};
#endif /* INGERO_THREAD_STATE_H */

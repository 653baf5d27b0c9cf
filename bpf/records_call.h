/* Call records: one per top-level traced call, with what its probe's recipe captured. Part of
 * ingero_records.h; shipped on the calls ring, which carries nothing else but library-watch
 * notifications, so stacks and host context can never crowd out a call. */
#ifndef INGERO_RECORDS_CALL_H
#define INGERO_RECORDS_CALL_H

#define INGERO_MAX_PROBES 8192    /* attach-cookie ids index the recipe array */
#define INGERO_MAX_DEPTH 8        /* traced calls in flight per thread */
#define INGERO_STACK_WORDS 6      /* 8-byte stack arguments copied at entry */
#define INGERO_REG_WORDS 6        /* register arguments (System V) */
#define INGERO_ENTRY_READ_MAX 128 /* by-value ncclUniqueId is the largest capture */
#define INGERO_RETURN_READ_MAX 32 /* output pointers: device pointers, handles, event structs */
#define INGERO_MAX_THREADS 65536
#define INGERO_MAX_FILTERED_PIDS 16384 /* processes alive at once in a trace filtered by pid */

/* Where a pointer to read comes from. Stack words and stack addresses are relative to the
 * stack pointer at function entry, past the return address (System V: the 7th integer
 * argument is stack word 0; a by-value struct classified MEMORY lives at stack address 0). */
enum ingero_ptr_src {
  INGERO_PTR_NONE = 0,
  INGERO_PTR_REG = 1,        /* register argument `index` (0..5) holds the pointer */
  INGERO_PTR_STACK_WORD = 2, /* stack word `index` holds the pointer */
  INGERO_PTR_STACK_ADDR = 3, /* read the argument area itself, at sp + 8 + offset */
};

struct ingero_ptr_read {
  __u8 src;     /* enum ingero_ptr_src */
  __u8 index;   /* register or stack word index */
  __u16 len;    /* bytes to copy; clamped to the buffer size */
  __u32 offset; /* added to the pointer before reading */
};

/* What the generic call program captures for one probe id. */
/* ingero_recipe.flags */
#define INGERO_RECIPE_ENTRY_ONLY                                                           \
  0x1                            /* a launch: its record is emitted at entry, and only one \
                                  * call in launch_timing_every per thread is timed */
#define INGERO_RECIPE_CALLER 0x2 /* ship the return address (INGERO_CALL_CALLER) */
/* Walk no stack for it: a kernel-name look-up, once per kernel and each from a call site of its
 * own (21,577 at PyTorch's import, whose walks overflowed the stack ring). */
#define INGERO_RECIPE_NO_STACK 0x4
/* A launch of a library above another's (hal::LibraryMatch::layer > 0: a runtime's, whose
 * launch enters the driver's): its driver launch follows on the thread, deeper in its stack. */
#define INGERO_RECIPE_UPPER_LAYER 0x8
/* A launch whose kernel (the register argument name_question, 0 or 1) is part of its call site's
 * key: an nvcc program built without host optimisation launches every kernel of a file from the one
 * call in its out-of-line __cudaLaunchKernel_helper, one return address for all of them, and
 * each kernel took the stack of whichever was walked last. */
#define INGERO_RECIPE_SITE_ARG 0x10

/* ingero_recipe.name_once: a kernel-name look-up (hal/kernel_names.h) whose repeats are not
 * shipped. A look-up is keyed by its process image, probe, answer (the handle or name pointer it
 * returns) and question (the register argument it asks about); one whose key was shipped less
 * than name_repeat_ns ago ships nothing, its repeat counted (cuDNN looks its kernels up again
 * before each launch: 125-131 look-ups a step of ResNet-18 on an H200). */
#define INGERO_NAME_ONCE 0x1 /* repeats of a shipped answer ship nothing */
#define INGERO_NAME_FIXED                                                           \
  0x2 /* the question alone fixes the answer in a process image (a stub's handle, a \
       * handle's name): a repeat is not entered, no return probe; the key's answer is 0 */
#define INGERO_NAME_ANSWER_RET \
  0x4 /* the answer is the return value, not the word return_read reads */
#define INGERO_NAME_NEEDS_ZERO 0x8 /* only a call returning 0 answered (the output was written) */

/* Without sessions, in a timing window (ingero_recipe.window), a thread times a launch unless
 * it began timing one less than this long ago: a loop of a million launches a second times one
 * in four or five, a training step's launches (tens of microseconds apart) every one. By time,
 * not by count: a runtime launch entered untimed is followed by its driver launch, so a count
 * would land on the driver's launches alone. */
#define INGERO_WINDOW_TIMING_GAP_NS 4000

/* With sessions, a lower layer's launch entered on a thread less than this far below the stack
 * pointer of its last launch, an upper layer's sent untimed, is the driver launch that one makes
 * (a runtime's launch path stays well within it). */
#define INGERO_NEST_SP_RANGE 16384

/* ingero_recipe.valid */
#define INGERO_RECIPE_GONE 0     /* unused, or detached: a return still due never comes */
#define INGERO_RECIPE_LIVE 1     /* calls enter through it */
#define INGERO_RECIPE_RETIRING 2 /* being detached: no call enters, a call in flight returns */

struct ingero_recipe {
  __u8 stack_words;   /* 0..INGERO_STACK_WORDS: copied at entry and shipped */
  __u8 valid;         /* INGERO_RECIPE_LIVE once user space wrote the slot; then RETIRING and
                       * GONE while its probe is detached */
  __u8 nregs;         /* 0..INGERO_REG_WORDS: register arguments user space decodes (shipped) */
  __u8 flags;         /* INGERO_RECIPE_* */
  __u8 name_once;     /* INGERO_NAME_*; 0: every call is shipped */
  __u8 name_question; /* the register argument (0..5) a name look-up asks about, or a launch's
                       * kernel (INGERO_RECIPE_SITE_ARG) */
  /* A launch's timing window, without uprobe sessions (launch_timing_every not 1): odd while
   * user space holds its return probe attached (an entry pushes a frame, timed by its return),
   * even otherwise (an entry ships untimed: one trap). User space counts it up at each opening
   * and each closing (probe/launch_windows.h); a frame keeps the window it was pushed in, and one
   * whose window has closed never gets its return. 0 for every other probe, and in sessions. */
  __u16 window;
  struct ingero_ptr_read entry_read;  /* at entry, into entry_buf */
  struct ingero_ptr_read return_read; /* at return, pointer from entry-time arguments */
};

/* ingero_call_rec.flags */
#define INGERO_CALL_UNFINISHED 0x1        /* the thread exited before the function returned */
#define INGERO_CALL_ENTRY_READ_FAULT 0x2  /* entry pointer read failed (bad/unmapped pointer) */
#define INGERO_CALL_RETURN_READ_FAULT 0x4 /* return pointer read failed */
#define INGERO_CALL_FRAMES_DISCARDED 0x8  /* inner frames unwound without a return were dropped */
#define INGERO_CALL_STACK_READ_FAULT 0x10 /* stack arguments could not be copied */
#define INGERO_CALL_STACK_SHIPPED 0x20    /* the stack record for stack_hash was just shipped */
#define INGERO_CALL_OFFCPU 0x40           /* an ingero_call_offcpu block follows the words */
#define INGERO_CALL_IDENT 0x80            /* an ingero_call_ident block follows */
#define INGERO_CALL_STACK_OF_SITE                                                          \
  0x100                              /* stack_hash is the stack last captured at this call \
                                      * site (return address + innermost Python frame),    \
                                      * not captured for this call */
#define INGERO_CALL_ENTRY_ONLY 0x200 /* emitted at entry, not timed: end_ns and ret are 0 */
#define INGERO_CALL_CALLER 0x400     /* an 8-byte return address follows the ident block */

/* A call record on the wire: this header, then `nregs` register and `nstack` stack argument
 * words, then the optional blocks its flags name, in this order: ingero_call_offcpu
 * (INGERO_CALL_OFFCPU: the thread went off-CPU during the call), ingero_call_ident
 * (INGERO_CALL_IDENT: the thread's name or cgroup differ from what it last shipped, or it is
 * the thread's first call), the caller's return address (INGERO_CALL_CALLER, 8 bytes),
 * return_len bytes, entry_len bytes (each rounded up to 8). A launch not timed
 * (INGERO_CALL_ENTRY_ONLY) is emitted at its entry: its end, return value and off-CPU figures
 * are not known, and a traced call it makes is a record of its own (user space folds it by the
 * caller's address). A call
 * made inside another traced call of the same thread (a runtime call's driver call, an API
 * alias) is not a record: it is counted in its caller's `nested`. */
struct ingero_call_rec {
  __u32 type; /* INGERO_REC_CALL */
  __u32 probe_id;
  __u32 pid;
  __u32 tid;
  __u64 start_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
  __u64 end_ns;
  __u64 ret;        /* rax at return; 0 for unfinished calls */
  __u64 stack_hash; /* 0: no stack; else a stack shipped on the aux ring */
  __u16 flags;
  __u8 nregs;
  __u8 nstack;
  __u16 entry_len;
  __u16 return_len;
  __u32 nested_probe; /* probe id of the first traced call made inside this one */
  __u32 nested;       /* traced calls made inside this one (folded into it) */
};

/* An untimed launch's record (INGERO_CALL_ENTRY_ONLY, written at its entry by launch_at_entry):
 * a call record's header less what such a launch leaves zero (its end, return value, nested
 * counts and read lengths), then the same words and blocks in the same order. 40 bytes instead of
 * 64: with six register words, three stack words and its caller, a launch takes 128 bytes of
 * the ring (its 8-byte ring header included) instead of 152, so the ring holds a fifth more
 * launches while the reader is late (docs/performance.md, "What recording a launch costs").
 * User space unpacks it into the call record's form. */
struct ingero_launch_rec {
  __u32 type; /* INGERO_REC_LAUNCH */
  __u32 probe_id;
  __u32 pid;
  __u32 tid;
  __u64 start_ns;
  __u64 stack_hash;
  __u16 flags;
  __u8 nregs;
  __u8 nstack;
  __u32 size; /* the record's bytes (a batch is walked by it) */
};

/* Untimed launches gathered per CPU and submitted together (bpf/launch_batch.h): the ring's
 * record is this header, then `bytes` bytes of `count` launch records (struct ingero_launch_rec
 * with what follows it), each starting 8-aligned, `size` bytes long. */
#define INGERO_LAUNCH_BATCH_BYTES 4096
struct ingero_launch_batch_rec {
  __u32 type; /* INGERO_REC_LAUNCH_BATCH */
  __u32 count;
  __u32 bytes;
  __u32 pad; /* 0 */
};

/* A CPU's batch as it is filled (a per-CPU array's value): `rec` and `data` are the ring's
 * record as it stands, its count and bytes kept as launches are added, so shipping it is a copy
 * (user space reads the count and the first launch's start to ship a batch left waiting, and at
 * the end). `busy` is taken with a compare and exchange by whichever program writes or ships
 * it: a program preempted on this CPU keeps it, and the others go without the batch meanwhile. */
struct ingero_launch_batch {
  __u64 busy;
  struct ingero_launch_batch_rec rec;
  __u8 data[INGERO_LAUNCH_BATCH_BYTES];
};

struct ingero_call_offcpu {
  __u64 off_cpu_ns;       /* time this thread spent off-CPU between entry and return */
  __u64 preemptor_off_ns; /* the longest single involuntary off-CPU interval during the call */
  __u32 preempts;         /* involuntary switches (thread was runnable) during the call */
  __u32 switches;         /* all switches away during the call */
  __u32 preemptor_pid;    /* who took the CPU for the longest involuntary interval */
  __u32 preemptor_tid;
  char preemptor_comm[INGERO_COMM_LEN];
};

struct ingero_call_ident {
  __u64 cgroup_id;
  char comm[INGERO_COMM_LEN];
};

/* A call record's largest size: every block at once, the caller's address (8 bytes) included. */
#define INGERO_CALL_REC_MAX                                                       \
  (sizeof(struct ingero_call_rec) + 8 * (INGERO_REG_WORDS + INGERO_STACK_WORDS) + \
   sizeof(struct ingero_call_offcpu) + sizeof(struct ingero_call_ident) + 8 +     \
   INGERO_RETURN_READ_MAX + INGERO_ENTRY_READ_MAX)

/* A traced call in flight, as the in-flight iterator (calls.bpf.c: ingero_inflight) reads it
 * from its thread's outermost frame while the call runs; user space reads the iterator once a
 * second (capture/inflight_monitor.h). Not a ring record: it has no type tag. The argument
 * words are those the probe's recipe captured at entry, as a call record would carry them. */
#define INGERO_INFLIGHT_SCHED 0x1 /* off_since_ns and off_state come from the scheduler's data */
struct ingero_inflight_rec {
  __u32 tid;
  __u32 pid;
  __u32 probe_id;
  __u16 frame_flags;  /* INGERO_CALL_* faults of the entry capture */
  __u16 entry_len;    /* bytes of entry_buf captured */
  __u64 start_ns;     /* CLOCK_MONOTONIC, at entry */
  __u64 caller;       /* its return address (0: not kept for this probe) */
  __u64 fp;           /* the caller's frame pointer at entry (0: not kept) */
  __u64 sp;           /* the stack pointer at entry */
  __u64 py_tstate;    /* the thread's PyThreadState, as the stack walks last found it; 0 unknown */
  __u64 off_cpu_ns;   /* off-CPU since entry, up to the thread's last return to a CPU */
  __u64 off_since_ns; /* off a CPU since then (CLOCK_MONOTONIC); 0: running, or unknown */
  __u32 off_state;    /* the task state it left the CPU in (0: preempted, 1: sleeping, 2: D) */
  __u32 flags;        /* INGERO_INFLIGHT_* */
  __u32 nested;       /* traced calls made inside it so far */
  __u32 nested_probe;
  __u8 nregs; /* words of regs[] and stack[] the recipe captures */
  __u8 nstack;
  __u16 depth; /* the thread's frames in flight (1 with uprobe sessions) */
  __u32 pad;
  __u64 regs[INGERO_REG_WORDS];
  __u64 stack[INGERO_STACK_WORDS];
  __u8 entry_buf[INGERO_ENTRY_READ_MAX];
};

/* A process exec'd or its link map changed (dlopen/dlclose, or the initial load): user
 * space re-scans its mappings for libraries to attach. */
enum ingero_libwatch_kind {
  INGERO_LIBWATCH_EXEC = 1,
  INGERO_LIBWATCH_LINKMAP = 2,
};

/* The link-map probe's attach cookie: where the loader's `_r_debug` lies from
 * `_dl_debug_state` (glibc's struct r_debug of a 64-bit process: r_state, an int, at byte 24;
 * 0 is RT_CONSISTENT). Bit 63 set: the low 32 bits are that distance, signed. 0: not known,
 * every call is reported. */
#define INGERO_LINKMAP_STATE_KNOWN (1ull << 63)
#define INGERO_R_DEBUG_STATE_OFFSET 24

struct ingero_libwatch_rec {
  __u32 type; /* INGERO_REC_LIBWATCH */
  __u32 kind;
  __u32 pid;
  __u32 tid;
  __u64 ts_ns;
  char comm[INGERO_COMM_LEN];
};

#endif /* INGERO_RECORDS_CALL_H */

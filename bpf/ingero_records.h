/* Record layouts shared by the BPF programs and user space.
 *
 * One header, two compilers: the BPF side includes it after vmlinux.h, the C++ side after
 * <linux/types.h>. hal/record_layout.h static_asserts every size and offset the decoder uses,
 * so a change here that forgets the other side fails the build instead of corrupting data.
 *
 * Every record starts with a __u32 type tag (enum ingero_rec_type).
 */
#ifndef INGERO_BPF_RECORDS_H
#define INGERO_BPF_RECORDS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define INGERO_MAX_PROBES 8192    /* attach-cookie ids index the recipe array */
#define INGERO_MAX_DEPTH 8        /* nested traced calls per thread (runtime -> driver -> ...) */
#define INGERO_STACK_WORDS 6      /* 8-byte stack arguments copied at entry */
#define INGERO_ENTRY_READ_MAX 128 /* by-value ncclUniqueId is the largest capture */
#define INGERO_RETURN_READ_MAX 32 /* output pointers: device pointers, handles, event structs */
#define INGERO_COMM_LEN 16
#define INGERO_MAX_THREADS 65536
#define INGERO_STACK_MAX 64 /* native user frames kept per stack */
#define INGERO_PY_MAX 32    /* Python frames kept per stack */

enum ingero_rec_type {
  INGERO_REC_CALL = 1,     /* struct ingero_call_rec */
  INGERO_REC_LIBWATCH = 2, /* struct ingero_libwatch_rec */
  INGERO_REC_SCHED = 3,    /* struct ingero_sched_rec */
  INGERO_REC_PROC = 4,     /* struct ingero_proc_rec */
  INGERO_REC_BLOCK = 5,    /* struct ingero_block_rec */
  INGERO_REC_TCP = 6,      /* struct ingero_tcp_rec */
  INGERO_REC_STACK = 7,    /* struct ingero_stack_rec; precedes the call record naming it */
  INGERO_REC_PYCODE = 8,   /* struct ingero_py_code_rec; precedes the first stack using it */
};

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

/* What the generic entry/return pair captures for one probe id. */
struct ingero_recipe {
  __u8 stack_words; /* 0..INGERO_STACK_WORDS */
  __u8 valid;       /* 1 once user space wrote the slot */
  __u16 pad0;
  __u32 pad1;
  struct ingero_ptr_read entry_read;  /* at entry, into entry_buf */
  struct ingero_ptr_read return_read; /* at return, pointer from entry-time arguments */
};

/* ingero_call_rec.flags */
#define INGERO_CALL_UNFINISHED 0x1        /* the thread exited before the function returned */
#define INGERO_CALL_ENTRY_READ_FAULT 0x2  /* entry pointer read failed (bad/unmapped pointer) */
#define INGERO_CALL_RETURN_READ_FAULT 0x4 /* return pointer read failed */
#define INGERO_CALL_FRAMES_DISCARDED 0x8  /* inner frames unwound without a return were dropped */
#define INGERO_CALL_STACK_READ_FAULT 0x10 /* stack arguments could not be copied */
#define INGERO_CALL_STACK_SHIPPED 0x20    /* an INGERO_REC_STACK for stack_hash came just before */

struct ingero_call_rec {
  __u32 type; /* INGERO_REC_CALL */
  __u32 probe_id;
  __u32 pid;
  __u32 tid;
  __u64 cgroup_id;
  __u64 start_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
  __u64 end_ns;
  __u64 ret; /* rax at return; 0 for unfinished calls */
  __u64 regs[6];
  __u64 stack[INGERO_STACK_WORDS];
  __u64 off_cpu_ns;       /* time this thread spent off-CPU between entry and return */
  __u64 preemptor_off_ns; /* the longest single off-CPU interval during the call */
  __u32 preempts;         /* involuntary switches (thread was runnable) during the call */
  __u32 switches;         /* all switches away during the call */
  __u32 preemptor_pid;    /* who took the CPU for the longest involuntary interval */
  __u32 preemptor_tid;
  __u16 flags;
  __u16 depth; /* nesting depth at entry; 0 = outermost traced call */
  __u16 entry_len;
  __u16 return_len;
  __u64 stack_hash; /* 0: no stack; else the call's user stack (INGERO_REC_STACK) */
  char comm[INGERO_COMM_LEN];
  char preemptor_comm[INGERO_COMM_LEN];
  __u8 return_buf[INGERO_RETURN_READ_MAX];
  /* Last, so probes without an entry capture submit a shorter record
   * (INGERO_CALL_REC_SHORT bytes); user space must not read past the record size. */
  __u8 entry_buf[INGERO_ENTRY_READ_MAX];
};
#define INGERO_CALL_REC_SHORT (sizeof(struct ingero_call_rec) - INGERO_ENTRY_READ_MAX)

/* One Python frame as the interpreter had it at the call: the code object and the raw
 * instruction position (3.11/3.12: prev_instr pointer; 3.13: instr_ptr; 3.10: f_lasti).
 * User space turns it into file:line via the code object's line table. */
struct ingero_py_frame {
  __u64 code;
  __u64 instr;
};

/* ingero_py_frame flags */
#define INGERO_PY_ENTRY 0x1 /* the frame an eval loop was entered with (3.10/3.11 boundary) */
#define INGERO_PY_SHIM 0x2  /* a C-stack shim frame (3.12+): the next frame starts a new loop */
#define INGERO_PY_NOT_CODE 0x4 /* the frame's code pointer is not a PyCodeObject: drop it */

/* ingero_stack_rec.py_status */
enum ingero_py_status {
  INGERO_PY_NONE = 0,     /* not a configured Python process */
  INGERO_PY_OK = 1,       /* frames walked to the bottom */
  INGERO_PY_TRUNCATED = 2, /* more than INGERO_PY_MAX frames */
  INGERO_PY_NO_THREAD = 3, /* no thread state for this thread (not a Python thread, or exiting) */
  INGERO_PY_FAULT = 4,     /* a read of interpreter memory failed */
};

/* A call's user stack. Shipped once per (process, stack) up to the sample cap, and always
 * for anomalous calls; later calls with the same stack carry only stack_hash. */
struct ingero_stack_rec {
  __u32 type; /* INGERO_REC_STACK */
  __u32 pid;
  __u32 tid;
  __u16 n_ips;    /* native frames in ips[] */
  __u8 n_py;      /* Python frames in py[] */
  __u8 py_status; /* enum ingero_py_status */
  __u64 hash;     /* of pid, ips and py frames: the call record's stack_hash */
  __u64 ips[INGERO_STACK_MAX];
  struct ingero_py_frame py[INGERO_PY_MAX];
  __u8 py_flags[INGERO_PY_MAX];
};

/* A code object, shipped the first time a process's stack shows it, so its frames resolve
 * to file:line even after the process has exited. Strings are copied when they are compact
 * ASCII (almost always); lengths are the full lengths, so a cut copy is visible. */
#define INGERO_PY_FILE_MAX 128
#define INGERO_PY_NAME_MAX 64
#define INGERO_PY_TABLE_MAX 512
struct ingero_py_code_rec {
  __u32 type; /* INGERO_REC_PYCODE */
  __u32 pid;
  __u64 code;
  __s32 firstlineno;
  __u32 file_len;  /* 0xffffffff: not compact ASCII, not copied */
  __u32 name_len;
  __u32 table_len; /* bytes of the line table */
  char file[INGERO_PY_FILE_MAX];
  char name[INGERO_PY_NAME_MAX];
  __u8 table[INGERO_PY_TABLE_MAX];
};

/* Where the interpreter keeps its threads and frames, per Python process (map py_procs,
 * written by user space from a verified layout). Offsets in bytes; 0xffff = absent. */
struct ingero_py_config {
  __u64 runtime;    /* address of _PyRuntime in the process */
  __u64 code_type;  /* address of PyCode_Type: a frame whose code is not one is dropped */
  __u32 version;    /* (major << 8) | minor */
  __u16 runtime_interp_head;
  __u16 interp_threads_head;
  __u16 tstate_next;
  __u16 tstate_thread_id;   /* native_thread_id (3.11+), or thread_id = pthread_self (3.10) */
  __u16 tstate_frame;       /* 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame */
  __u16 cframe_current_frame;
  __u16 frame_code;
  __u16 frame_previous;
  __u16 frame_instr;
  __u16 frame_owner;
  __u16 frame_is_entry;
  __u8 thread_id_is_pthread; /* compare with the thread's fsbase instead of its tid */
  __u8 instr_is_int;         /* 3.10: f_lasti is an int */
  __u8 owner_cstack;         /* owner value of a C-stack shim frame (3.12+: 3), 0xff = none */
  __u8 pad[7];
  /* Code objects and strings, for shipping code records. */
  __u16 code_filename;
  __u16 code_name; /* co_qualname where it exists, else co_name */
  __u16 code_firstlineno;
  __u16 code_linetable;
  __u16 unicode_state;
  __u16 unicode_length;
  __u16 ascii_data; /* sizeof(PyASCIIObject) */
  __u16 bytes_size; /* ob_size */
  __u16 bytes_data; /* ob_sval */
  __u16 pad2[3];
};

/* A process exec'd or its link map changed (dlopen/dlclose, or the initial load): user
 * space re-scans its mappings for libraries to attach. */
enum ingero_libwatch_kind {
  INGERO_LIBWATCH_EXEC = 1,
  INGERO_LIBWATCH_LINKMAP = 2,
};

struct ingero_libwatch_rec {
  __u32 type; /* INGERO_REC_LIBWATCH */
  __u32 kind;
  __u32 pid;
  __u32 tid;
  __u64 ts_ns;
  char comm[INGERO_COMM_LEN];
};

/* A thread of a GPU-calling process came back on CPU: one off-CPU interval. */
struct ingero_sched_rec {
  __u32 type; /* INGERO_REC_SCHED */
  __u32 pid;
  __u32 tid;
  __u32 cpu;
  __u64 start_ns; /* switched out */
  __u64 end_ns;   /* back on CPU */
  __u64 cgroup_id;
  __u64 by_cgroup_id; /* cgroup of the task that took the CPU */
  __u32 preempted;    /* 1: it was runnable (involuntary); 0: it blocked */
  __u32 prev_state;
  __u32 by_pid; /* the task that ran next on that CPU */
  __u32 by_tid;
  char comm[INGERO_COMM_LEN];
  char by_comm[INGERO_COMM_LEN];
};

enum ingero_proc_kind {
  INGERO_PROC_FORK = 1,   /* pid forked peer_pid (peer_comm = child's comm) */
  INGERO_PROC_EXEC = 2,   /* pid exec'd `detail` */
  INGERO_PROC_EXIT = 3,   /* process pid exited with `code` */
  INGERO_PROC_WAKEUP = 4, /* tid was woken by peer_tid */
  INGERO_PROC_OOM = 5,    /* the OOM killer chose pid; peer = the task that triggered it */
};

struct ingero_proc_rec {
  __u32 type; /* INGERO_REC_PROC */
  __u32 kind;
  __u32 pid;
  __u32 tid;
  __u64 ts_ns;
  __u64 cgroup_id;
  __u32 peer_pid;
  __u32 peer_tid;
  __s32 code;
  __u32 cpu;
  char comm[INGERO_COMM_LEN];
  char peer_comm[INGERO_COMM_LEN];
  char detail[64];
};

/* One block request, issue to completion. */
struct ingero_block_rec {
  __u32 type; /* INGERO_REC_BLOCK */
  __u32 pid;  /* issuer (0 if unknown) */
  __u32 tid;
  __u32 dev; /* major << 20 | minor, as the kernel's dev_t */
  __u64 sector;
  __u64 issue_ns;
  __u64 complete_ns;
  __u32 bytes;
  __u32 op;    /* REQ_OP_*: 0 read, 1 write, 2 flush, 3 discard, ... */
  __s32 error; /* blk_status_t */
  __u32 pad;
  char comm[INGERO_COMM_LEN];
};

struct ingero_tcp_rec {
  __u32 type; /* INGERO_REC_TCP */
  __u32 pid;  /* task in whose context the retransmit ran (often softirq: 0) */
  __u32 tid;
  __u16 family; /* AF_INET / AF_INET6 */
  __u16 state;  /* TCP_ESTABLISHED, ... */
  __u64 ts_ns;
  __u64 cgroup_id;
  __u16 sport; /* host order */
  __u16 dport;
  __u32 pad;
  __u8 saddr[16];
  __u8 daddr[16];
  char comm[INGERO_COMM_LEN];
};

/* Per-process host aggregates, maintained in-kernel for every process (LRU) and read out
 * periodically: the volume policy stores individual events only for GPU processes. */
struct ingero_pid_stats {
  __u64 switches;    /* times a thread of this process went off-CPU */
  __u64 involuntary; /* ... while runnable (preempted) */
  __u64 off_cpu_ns;
  __u64 max_off_cpu_ns;
  __u64 wakeups;
  __u64 page_allocs;
  __u64 page_bytes;
  __u64 forks;
  __u64 block_ios;
  __u64 block_bytes;
  __u64 block_ns;
  __u64 cgroup_id;
  char comm[INGERO_COMM_LEN];
};

/* watched_pids values */
#define INGERO_WATCH_GPU 1   /* the process made a traced vendor call */
#define INGERO_WATCH_CHILD 2 /* forked by a watched process (DataLoader workers) */

/* Counters kept per CPU in the `stats` map; user space sums them. */
enum ingero_stat {
  INGERO_STAT_CALLS = 0,        /* call records submitted */
  INGERO_STAT_RINGBUF_DROPS,    /* records lost because the ring buffer was full */
  INGERO_STAT_THREAD_MAP_FULL,  /* calls not traced: no room for another thread */
  INGERO_STAT_DEPTH_OVERFLOW,   /* calls nested deeper than INGERO_MAX_DEPTH */
  INGERO_STAT_UNPAIRED_RETURN,  /* a return with no matching entry */
  INGERO_STAT_FRAMES_DISCARDED, /* entries whose return never came (unwound) */
  INGERO_STAT_UNFINISHED,       /* calls in flight when their thread exited */
  INGERO_STAT_HOST_DROPS,       /* host-context records lost to a full ring buffer */
  INGERO_STAT_HOST_RECORDS,     /* host-context records submitted */
  INGERO_STAT_SELFTEST,         /* hits of the check self-test uprobe */
  INGERO_STAT_STACKS_SHIPPED,   /* stack records submitted */
  INGERO_STAT_STACKS_SAMPLED,   /* calls whose stack was known already: hash only */
  INGERO_STAT_STACK_DROPS,      /* stack records lost to a full ring buffer */
  INGERO_STAT_PY_WALKS,         /* Python frame walks attempted */
  INGERO_STAT_PY_FAULTS,        /* ... that hit an unreadable address */
  INGERO_STAT_MAX,
};

#endif /* INGERO_BPF_RECORDS_H */

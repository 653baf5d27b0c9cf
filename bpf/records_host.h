/* Host-context records: scheduler, process lifecycle, block I/O, TCP, and the per-process
 * aggregates kept in-kernel. Part of ingero_records.h; shipped on the host ring. */
#ifndef INGERO_RECORDS_HOST_H
#define INGERO_RECORDS_HOST_H

/* A thread of a GPU-calling process came back on CPU: one off-CPU interval, and for one that
 * blocked, who woke it (there is no record of its own for the wakeup). */
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
  __u64 woken_ns; /* when it was woken; 0: not woken (preempted, or a wakeup not seen) */
  __u32 waker_pid;
  __u32 waker_tid;
  char waker_comm[INGERO_COMM_LEN];
};

enum ingero_proc_kind {
  INGERO_PROC_FORK = 1,   /* pid forked peer_pid (peer_comm = child's comm) */
  INGERO_PROC_EXEC = 2,   /* pid exec'd `detail` */
  INGERO_PROC_EXIT = 3,   /* process pid exited with `code` */
  INGERO_PROC_WAKEUP = 4, /* tid was woken by peer_tid (read in older builds' rings only) */
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

#endif /* INGERO_RECORDS_HOST_H */

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Host-context programs: scheduler, process lifecycle, memory, block I/O, TCP, OOM. All BTF
 * tracepoints; kernelside/ attaches them.
 *
 * Volume policy (docs/host-context.md): individual sched/wakeup records only for processes
 * that made traced GPU calls; fork/exec/exit for those and their children; block requests
 * for those, or slower than INGERO_SLOW_BLOCK_NS; TCP retransmits and OOM kills always.
 * Everything else is aggregated per process in `pid_stats` and read out periodically.
 * Records go to the host ring: a burst of them never costs a call record. */
/* vmlinux.h must come first. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "shared.bpf.h"
#include "launch_batch.h"
// clang-format on

#define INGERO_SLOW_BLOCK_NS (1000ull * 1000) /* 1 ms: slow enough to matter to a GPU stall */
#define TASK_RUNNING_STATE 0

const volatile __u32 host_context = 1;

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, struct ingero_pid_stats);
} pid_stats SEC(".maps");

/* Who holds each CPU while a preempted GPU thread waits on it. The task that takes the CPU
 * first is often not the one that keeps it: a kworker woken at every tick preempts the thread,
 * runs 20 us, and hands the CPU to the hog that then runs for milliseconds. The waiter's
 * interval names the task that held the CPU longest in one stretch. One waiter per CPU, the
 * latest preempted; a waiter that comes back on another CPU, or whose slot a later one took,
 * keeps the task that took over from it. */
struct cpu_holder {
  __u64 since;         /* when the waiter went off this CPU */
  __u64 running_since; /* when the task now on the CPU got it */
  __u64 best_ns;       /* the longest stretch so far, by best_* */
  __u64 best_cgroup;
  __u32 waiter_tid; /* 0: no waiter */
  __u32 best_pid;
  __u32 best_tid;
  __u32 pad;
  char best_comm[INGERO_COMM_LEN];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct cpu_holder);
} cpu_holders SEC(".maps");

struct block_start {
  __u64 ts;
  __u32 pid;
  __u32 tid;
  char comm[INGERO_COMM_LEN];
};

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64); /* struct request * */
  __type(value, struct block_start);
} block_inflight SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 2 << 20); /* resized by user space before load */
} host_rb SEC(".maps");

static __always_inline void host_submit_flags(void* e, __u64 flags) {
  bpf_ringbuf_submit(e, flags);
  stat_inc(INGERO_STAT_HOST_RECORDS);
}

static __always_inline void host_submit(void* e) {
  host_submit_flags(e, ingero_wakeup_flags(&host_rb));
}

/* Forks and execs of watched processes wake the reader at once: it reads the new program's
 * maps while the program still runs. They are rare. */
static __always_inline void host_submit_now(void* e) { host_submit_flags(e, BPF_RB_FORCE_WAKEUP); }

static __always_inline void* host_reserve(__u64 size) {
  void* e = bpf_ringbuf_reserve(&host_rb, size, 0);
  if (!e) stat_inc(INGERO_STAT_HOST_DROPS);
  return e;
}

/* The scheduler programs run at every switch and wakeup on the host: they read the tasks'
 * fields directly (BTF pointers, one load each; a faulting load reads 0) where a BPF_CORE_READ
 * is a helper call for each pointer it follows, whose return, on this kernel's mitigations,
 * costs as much as its work. The task's cgroup (v2) id: */
static __always_inline __u64 task_cgroup(struct task_struct* t) {
  return t->cgroups->dfl_cgrp->kn->id;
}

/* The task's name: the kernel keeps it NUL-terminated and padded (strscpy_pad). */
static __always_inline void task_comm(char* dst, struct task_struct* t) {
  __u64* to = (__u64*)dst;
  const __u64* from = (const __u64*)t->comm;
  to[0] = from[0];
  to[1] = from[1];
}

static __always_inline struct ingero_pid_stats* pid_stats_of(__u32 tgid, struct task_struct* t) {
  struct ingero_pid_stats* s = bpf_map_lookup_elem(&pid_stats, &tgid);
  if (s) return s;
  struct ingero_pid_stats zero = {};
  if (t) {
    BPF_CORE_READ_STR_INTO(&zero.comm, t, group_leader, comm);
    zero.cgroup_id = task_cgroup(t);
  }
  bpf_map_update_elem(&pid_stats, &tgid, &zero, BPF_NOEXIST);
  return bpf_map_lookup_elem(&pid_stats, &tgid);
}

/* A waiter on this CPU: prev held the CPU from running_since to now; the longest stretch names
 * the task that kept the waiter off it. */
static __always_inline void note_cpu_holder(struct cpu_holder* h, struct task_struct* prev,
                                            __u32 prev_tid, __u64 now) {
  if (h->waiter_tid && prev_tid && prev_tid != h->waiter_tid) {
    __u64 held = now - h->running_since;
    if (held > h->best_ns) {
      h->best_ns = held;
      h->best_pid = prev->tgid;
      h->best_tid = prev_tid;
      h->best_cgroup = task_cgroup(prev);
      task_comm(h->best_comm, prev);
    }
  }
  h->running_since = now;
}

/* prev goes off-CPU: remember when, why, and who takes over. The idle task (pid 0) is never
 * tracked. A thread keeps its entry, written in place (an LRU insert per switch cost more than
 * the rest of the program); only GPU processes' entries name the task, which is what their
 * records and calls report. */
static __always_inline void note_off_cpu(struct cpu_holder* h, struct task_struct* prev,
                                         __u32 prev_tid, struct task_struct* next,
                                         unsigned int prev_state, __u64 now) {
  struct ingero_offcpu_start* st = bpf_map_lookup_elem(&offcpu, &prev_tid);
  if (!st) {
    struct ingero_offcpu_start fresh = {};
    bpf_map_update_elem(&offcpu, &prev_tid, &fresh, BPF_ANY);
    st = bpf_map_lookup_elem(&offcpu, &prev_tid);
  }
  if (!st) return;
  st->ts = now;
  st->woken_ns = 0;
  st->preempted = prev_state == TASK_RUNNING_STATE;
  st->prev_state = prev_state;
  st->by_pid = next->tgid;
  st->by_tid = next->pid;
  /* The generation before the lookup: a process marked after it is seen by the next one. */
  st->gpu_gen = (__u16)ingero_gpu_gen;
  st->gpu = (watch_flags(prev->tgid) & INGERO_WATCH_GPU) != 0;
  if (st->gpu) {
    st->by_cgroup = task_cgroup(next);
    task_comm(st->by_comm, next);
    if (h && st->preempted) {
      h->waiter_tid = prev_tid;
      h->since = now;
      h->best_ns = 0;
    }
  } else {
    st->by_cgroup = 0; /* in case the process is flagged before the thread is back */
    st->by_comm[0] = 0;
  }
}

/* Per-call attribution for a thread with traced calls in flight: every frame open on it shares
 * the interval. */
static __always_inline void charge_calls_in_flight(__u32 tid, struct ingero_offcpu_start* st,
                                                   __u64 delta) {
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!t) return;
  t->off_cpu_total_ns += delta;
  __u32 depth = t->depth;
#pragma unroll
  for (__u32 i = 0; i < INGERO_MAX_DEPTH; i++) {
    if (i < depth) {
      struct ingero_frame* f = &t->frames[i];
      f->switches += 1;
      if (st->preempted) {
        f->preempts += 1;
        if (delta > f->preemptor_off_ns) {
          f->preemptor_off_ns = delta;
          f->preemptor_pid = st->by_pid;
          f->preemptor_tid = st->by_tid;
          __builtin_memcpy(f->preemptor_comm, st->by_comm, sizeof(f->preemptor_comm));
        }
      }
    }
  }
}

/* One off-CPU interval of a GPU process's thread, and who woke it if it blocked. */
static __always_inline void emit_interval(struct task_struct* next, __u32 tgid, __u32 tid,
                                          struct ingero_offcpu_start* st, __u64 now) {
  struct ingero_sched_rec* e = host_reserve(sizeof(*e));
  if (!e) return;
  e->type = INGERO_REC_SCHED;
  e->pid = tgid;
  e->tid = tid;
  e->cpu = bpf_get_smp_processor_id();
  e->start_ns = st->ts;
  e->end_ns = now;
  e->cgroup_id = task_cgroup(next);
  e->by_cgroup_id = st->by_cgroup;
  e->preempted = st->preempted;
  e->prev_state = st->prev_state;
  e->by_pid = st->by_pid;
  e->by_tid = st->by_tid;
  task_comm(e->comm, next);
  __builtin_memcpy(e->by_comm, st->by_comm, sizeof(e->by_comm));
  e->woken_ns = st->woken_ns;
  e->waker_pid = st->waker_pid;
  e->waker_tid = st->waker_tid;
  __builtin_memcpy(e->waker_comm, st->waker_comm, sizeof(e->waker_comm));
  host_submit(e);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ingero_sched_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  if (!host_context) return 0;
  /* The launches prev made here wait in this CPU's batch: they go before it runs elsewhere. */
  batch_flush();
  __u64 now = bpf_ktime_get_ns();
  __u32 prev_tid = prev->pid;
  __u32 next_tid = next->pid;
  __u32 zero = 0;
  struct cpu_holder* h = bpf_map_lookup_elem(&cpu_holders, &zero);
  if (h) note_cpu_holder(h, prev, prev_tid, now);
  if (prev_tid) note_off_cpu(h, prev, prev_tid, next, prev_state, now);
  if (!next_tid) return 0;

  struct ingero_offcpu_start* st = bpf_map_lookup_elem(&offcpu, &next_tid);
  if (!st || !st->ts) return 0;
  /* The waiter is back on the CPU it left: name the task that held it longest. */
  if (h && h->waiter_tid == next_tid) {
    if (h->since == st->ts && h->best_ns) {
      st->by_pid = h->best_pid;
      st->by_tid = h->best_tid;
      st->by_cgroup = h->best_cgroup;
      __builtin_memcpy(st->by_comm, h->best_comm, sizeof(st->by_comm));
    }
    h->waiter_tid = 0;
  }
  __u64 delta = now > st->ts ? now - st->ts : 0;
  __u32 tgid = next->tgid;
  struct ingero_pid_stats* ps = pid_stats_of(tgid, next);
  if (ps) {
    __sync_fetch_and_add(&ps->switches, 1);
    if (st->preempted) __sync_fetch_and_add(&ps->involuntary, 1);
    __sync_fetch_and_add(&ps->off_cpu_ns, delta);
    if (delta > ps->max_off_cpu_ns) ps->max_off_cpu_ns = delta;
  }
  /* Only a GPU process's threads have calls in flight and intervals of their own; the
   * process is looked up again only if one was marked since this thread went off-CPU. */
  if (st->gpu || (st->gpu_gen != (__u16)ingero_gpu_gen && (watch_flags(tgid) & INGERO_WATCH_GPU))) {
    charge_calls_in_flight(next_tid, st, delta);
    emit_interval(next, tgid, next_tid, st, now);
  }
  st->ts = 0;
  return 0;
}

static __always_inline struct ingero_proc_rec* proc_rec(__u32 kind, __u32 pid, __u32 tid) {
  struct ingero_proc_rec* e = host_reserve(sizeof(*e));
  if (!e) return 0;
  e->type = INGERO_REC_PROC;
  e->kind = kind;
  e->pid = pid;
  e->tid = tid;
  e->ts_ns = bpf_ktime_get_ns();
  e->cgroup_id = bpf_get_current_cgroup_id();
  e->peer_pid = 0;
  e->peer_tid = 0;
  e->code = 0;
  e->cpu = bpf_get_smp_processor_id();
  e->peer_comm[0] = 0;
  e->detail[0] = 0;
  return e;
}

/* A wakeup of a GPU process's thread is not a record of its own: the thread's off-CPU entry keeps
 * who woke it and when, and the interval it ends (emit_interval) carries them. Every wakeup of
 * every process is counted in pid_stats.
 * sched_waking, not sched_wakeup: it fires in the waker's context, at the start of
 * try_to_wake_up. A wakeup queued to the wakee's CPU (an idle one, or one sharing no cache with
 * the waker) reaches sched_wakeup there, from its idle task: the thread was said to have been
 * woken by swapper/N (HostContext.TheIntervalOfABlockedThreadNamesWhoWokeIt, 1 in ~8 runs). */
SEC("tp_btf/sched_waking")
int BPF_PROG(ingero_sched_waking, struct task_struct* p) {
  if (!host_context) return 0;
  __u32 tgid = p->tgid;
  struct ingero_pid_stats* ps = pid_stats_of(tgid, p);
  if (ps) __sync_fetch_and_add(&ps->wakeups, 1);
  if (!(watch_flags(tgid) & INGERO_WATCH_GPU)) return 0;
  __u32 tid = p->pid;
  struct ingero_offcpu_start* st = bpf_map_lookup_elem(&offcpu, &tid);
  if (!st || !st->ts) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  st->woken_ns = bpf_ktime_get_ns();
  st->waker_pid = id >> 32;
  st->waker_tid = (__u32)id;
  bpf_get_current_comm(st->waker_comm, sizeof(st->waker_comm));
  return 0;
}

/* Lifecycle of watched processes (and their children, which join them). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ingero_host_fork, struct task_struct* parent, struct task_struct* child) {
  if (!host_context) return 0;
  __u32 ptgid = BPF_CORE_READ(parent, tgid);
  __u32 ctgid = BPF_CORE_READ(child, tgid);
  if (ptgid == ctgid) return 0; /* a new thread, not a process */
  struct ingero_pid_stats* ps = pid_stats_of(ptgid, parent);
  if (ps) __sync_fetch_and_add(&ps->forks, 1);
  __u8 w = watch_flags(ptgid);
  if (!w) return 0;
  __u8 child_flag = INGERO_WATCH_CHILD;
  bpf_map_update_elem(&watched_pids, &ctgid, &child_flag, BPF_NOEXIST);
  struct ingero_proc_rec* e = proc_rec(INGERO_PROC_FORK, ptgid, BPF_CORE_READ(parent, pid));
  if (!e) return 0;
  e->peer_pid = ctgid;
  e->peer_tid = BPF_CORE_READ(child, pid);
  BPF_CORE_READ_STR_INTO(&e->comm, parent, comm);
  BPF_CORE_READ_STR_INTO(&e->peer_comm, child, comm);
  host_submit_now(e);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ingero_host_exec, struct task_struct* p, pid_t old_pid, struct linux_binprm* bprm) {
  if (!host_context) return 0;
  __u32 tgid = BPF_CORE_READ(p, tgid);
  if (!watch_flags(tgid)) return 0;
  struct ingero_proc_rec* e = proc_rec(INGERO_PROC_EXEC, tgid, BPF_CORE_READ(p, pid));
  if (!e) return 0;
  BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
  const char* fn = BPF_CORE_READ(bprm, filename);
  bpf_probe_read_kernel_str(e->detail, sizeof(e->detail), fn);
  host_submit_now(e);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(ingero_host_exit, struct task_struct* p) {
  __u32 tid = BPF_CORE_READ(p, pid);
  __u32 tgid = BPF_CORE_READ(p, tgid);
  bpf_map_delete_elem(&offcpu, &tid);
  /* Processes, not threads: the exit of the last thread (do_exit has counted it out of
   * signal->live before this tracepoint). Its main thread's was taken for it: a program that
   * ends main with pthread_exit while a worker runs on was "exited" with code 0 at that moment,
   * its kernels' names and stacks forgotten, and the exit its worker gave never recorded. */
  if (!host_context || BPF_CORE_READ(p, signal, live.counter) != 0) return 0;
  __u8 w = watch_flags(tgid);
  if (!w) return 0;
  struct ingero_proc_rec* e = proc_rec(INGERO_PROC_EXIT, tgid, tgid);
  if (e) {
    /* What wait(2) gives the parent: the group's code after exit_group or a fatal signal, else
     * the main thread's own. */
    const unsigned int kSignalGroupExit = 0x00000004; /* SIGNAL_GROUP_EXIT */
    if (BPF_CORE_READ(p, signal, flags) & kSignalGroupExit)
      e->code = BPF_CORE_READ(p, signal, group_exit_code);
    else
      e->code = BPF_CORE_READ(p, group_leader, exit_code);
    BPF_CORE_READ_STR_INTO(&e->comm, p, group_leader, comm);
    host_submit(e);
  }
  bpf_map_delete_elem(&watched_pids, &tgid);
  return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(ingero_oom_victim, struct task_struct* victim) {
  if (!host_context) return 0;
  struct ingero_proc_rec* e =
      proc_rec(INGERO_PROC_OOM, BPF_CORE_READ(victim, tgid), BPF_CORE_READ(victim, pid));
  if (!e) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  e->peer_pid = id >> 32;
  e->peer_tid = (__u32)id;
  e->cgroup_id = task_cgroup(victim);
  BPF_CORE_READ_STR_INTO(&e->comm, victim, comm);
  bpf_get_current_comm(e->peer_comm, sizeof(e->peer_comm));
  host_submit(e);
  return 0;
}

SEC("tp_btf/mm_page_alloc")
int BPF_PROG(ingero_page_alloc, struct page* page, unsigned int order) {
  if (!host_context) return 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!tgid) return 0;
  struct ingero_pid_stats* ps = bpf_map_lookup_elem(&pid_stats, &tgid);
  if (!ps) ps = pid_stats_of(tgid, bpf_get_current_task_btf());
  if (!ps) return 0;
  __sync_fetch_and_add(&ps->page_allocs, 1);
  __sync_fetch_and_add(&ps->page_bytes, 4096ull << (order & 31));
  return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(ingero_block_issue, struct request* rq) {
  if (!host_context) return 0;
  __u64 key = (__u64)rq;
  struct block_start b = {};
  b.ts = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  b.pid = id >> 32;
  b.tid = (__u32)id;
  bpf_get_current_comm(b.comm, sizeof(b.comm));
  bpf_map_update_elem(&block_inflight, &key, &b, BPF_ANY);
  return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(ingero_block_complete, struct request* rq, blk_status_t error, unsigned int nr_bytes) {
  if (!host_context) return 0;
  __u64 key = (__u64)rq;
  struct block_start* b = bpf_map_lookup_elem(&block_inflight, &key);
  if (!b) return 0;
  __u64 now = bpf_ktime_get_ns();
  __u64 lat = now > b->ts ? now - b->ts : 0;
  __u32 pid = b->pid;
  if (pid) {
    struct ingero_pid_stats* ps = bpf_map_lookup_elem(&pid_stats, &pid);
    if (ps) {
      __sync_fetch_and_add(&ps->block_ios, 1);
      __sync_fetch_and_add(&ps->block_bytes, nr_bytes);
      __sync_fetch_and_add(&ps->block_ns, lat);
    }
  }
  if (lat >= INGERO_SLOW_BLOCK_NS || watch_flags(pid)) {
    struct ingero_block_rec* e = host_reserve(sizeof(*e));
    if (e) {
      e->type = INGERO_REC_BLOCK;
      e->pid = pid;
      e->tid = b->tid;
      struct gendisk* disk = BPF_CORE_READ(rq, q, disk);
      __u32 major = BPF_CORE_READ(disk, major), minor = BPF_CORE_READ(disk, first_minor);
      e->dev = (major << 20) | minor;
      e->sector = BPF_CORE_READ(rq, __sector);
      e->issue_ns = b->ts;
      e->complete_ns = now;
      e->bytes = nr_bytes;
      e->op = BPF_CORE_READ(rq, cmd_flags) & 0xff;
      e->error = error;
      e->pad = 0;
      __builtin_memcpy(e->comm, b->comm, sizeof(e->comm));
      host_submit(e);
    }
  }
  bpf_map_delete_elem(&block_inflight, &key);
  return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(ingero_tcp_retransmit, const struct sock* sk) {
  if (!host_context) return 0;
  struct ingero_tcp_rec* e = host_reserve(sizeof(*e));
  if (!e) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  e->type = INGERO_REC_TCP;
  e->pid = id >> 32;
  e->tid = (__u32)id;
  e->ts_ns = bpf_ktime_get_ns();
  e->cgroup_id = bpf_get_current_cgroup_id();
  e->family = BPF_CORE_READ(sk, __sk_common.skc_family);
  e->state = BPF_CORE_READ(sk, __sk_common.skc_state);
  e->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
  e->dport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
  e->pad = 0;
  __builtin_memset(e->saddr, 0, sizeof(e->saddr));
  __builtin_memset(e->daddr, 0, sizeof(e->daddr));
  if (e->family == 2 /* AF_INET */) {
    __u32 s = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
    __u32 d = BPF_CORE_READ(sk, __sk_common.skc_daddr);
    __builtin_memcpy(e->saddr, &s, 4);
    __builtin_memcpy(e->daddr, &d, 4);
  } else {
    BPF_CORE_READ_INTO(&e->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
    BPF_CORE_READ_INTO(&e->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
  }
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  host_submit(e);
  return 0;
}

/* Part of calls.bpf.c (one compilation unit), included after its settings and maps and after
 * call_capture.h: a call record's assembly in call_scratch (header, argument words, off-CPU
 * and ident blocks, caller, return and entry reads) and its copy to calls_rb, from a frame or
 * straight from the registers of an untimed launch. */
#ifndef INGERO_CALL_EMIT_H
#define INGERO_CALL_EMIT_H

static __always_inline __u32 rounded(__u32 n) { return (n + 7) & ~7u; }

/* `off` as the verifier sees it after a round trip through the scratch buffer: any value up to
 * `max` (above any real one). Each optional block before it gives `off` another exact range,
 * and the verifier would walk what follows once per range; from here on, once. */
static __always_inline __u32 settled(struct call_buf* buf, __u32 off, __u32 max) {
  volatile __u32* at = &buf->off;
  *at = off;
  off = *at;
  return off > max ? max : off;
}

/* The flags a stack result (ingero_call_stack) adds to a record. */
static __always_inline __u16 stack_flags(__u64 stack) {
  __u16 flags = 0;
  if (stack & INGERO_STACK_RET_SHIPPED) flags |= INGERO_CALL_STACK_SHIPPED;
  if (stack & INGERO_STACK_RET_OF_SITE) flags |= INGERO_CALL_STACK_OF_SITE;
  return flags;
}

/* Fills a call record's header; returns the flags its stack result adds. */
static __always_inline __u16 put_header(struct ingero_call_rec* h, __u32 probe, __u32 pid,
                                        __u32 tid, __u64 start, __u64 end, __u64 ret, __u64 stack,
                                        __u32 nested, __u32 nested_probe) {
  h->type = INGERO_REC_CALL;
  h->probe_id = probe;
  h->pid = pid;
  h->tid = tid;
  h->start_ns = start;
  h->end_ns = end;
  h->ret = ret;
  h->stack_hash = stack & INGERO_STACK_HASH_MASK;
  h->entry_len = 0;
  h->return_len = 0;
  h->nested = nested;
  h->nested_probe = nested_probe;
  return stack_flags(stack);
}

/* Appends the register and stack argument words a record ships after its header; returns the
 * end. */
static __always_inline __u32 put_words(struct call_buf* buf, const __u64* regs, __u32 nregs,
                                       const __u64* stack, __u32 nstack) {
  /* Every word is copied, the stack words over the register words past nregs: the offsets are
   * arithmetic, not a branch per word, so the verifier walks one path instead of one per
   * (nregs, nstack); words past the record's end are never shipped. */
  __u64* w = (__u64*)(buf->b + sizeof(struct ingero_call_rec));
  __builtin_memcpy(w, regs, 8 * INGERO_REG_WORDS);
  __builtin_memcpy(w + nregs, stack, 8 * INGERO_STACK_WORDS);
  return sizeof(struct ingero_call_rec) + 8 * (nregs + nstack);
}

/* Appends the thread's name and cgroup at `off` of the `cap` bytes at `b` when they changed since
 * it last shipped them; returns the new end. */
static __always_inline __u32 put_ident(struct ingero_thread* t, __u8* b, __u32 cap, __u32 off,
                                       __u16* flags) {
  char comm[INGERO_COMM_LEN];
  bpf_get_current_comm(comm, sizeof(comm));
  __u64 cgroup = bpf_get_current_cgroup_id();
  __u64* now_c = (__u64*)comm;
  __u64* was_c = (__u64*)t->ident_comm;
  if (t->ident_comm[0] && now_c[0] == was_c[0] && now_c[1] == was_c[1] && cgroup == t->ident_cgroup)
    return off;
  if (off > cap - sizeof(struct ingero_call_ident)) return off;
  struct ingero_call_ident* id = (void*)(b + off);
  id->cgroup_id = cgroup;
  __builtin_memcpy(id->comm, comm, sizeof(id->comm));
  __builtin_memcpy(t->ident_comm, comm, sizeof(comm));
  t->ident_cgroup = cgroup;
  *flags |= INGERO_CALL_IDENT;
  return off + sizeof(*id);
}

/* Copies the record assembled in `buf` to the calls ring, after this CPU's launches waiting in
 * its batch: they came first. */
static __always_inline void submit_call(struct call_buf* buf, __u32 off, __u16 flags) {
  if (off > INGERO_CALL_REC_MAX) return;
  if (launch_batching) batch_flush();
  /* A thread's first record (it carries the ident block) wakes the reader at once: a new
   * process's maps must be read while it still runs, or a short program's stacks stay raw. */
  __u64 wake = (flags & INGERO_CALL_IDENT) ? BPF_RB_FORCE_WAKEUP : ingero_wakeup_flags(&calls_rb);
  if (bpf_ringbuf_output(&calls_rb, buf->b, off, wake)) {
    stat_inc(INGERO_STAT_RINGBUF_DROPS);
    return;
  }
  stat_inc(INGERO_STAT_CALLS);
}

/* Where an untimed launch was made: launch_at_entry's arguments past the thread and recipe (a
 * BPF function takes five). */
struct launch_ask {
  __u64 sp;
  /* Taken before the record's writer runs (ingero_launch_alone): its caller, clock and stack. */
  __u64 caller, now, stack;
  __u32 probe;
  __u32 tid;
};

/* A thread's name and cgroup are read at its first call, at one untimed launch in 16 and at one
 * in 16 of its calls that return (two helper calls each time otherwise): a rename or a cgroup
 * move shows from the next of those. */
static __always_inline bool launch_reads_ident(struct ingero_thread* t) {
  return !t->ident_comm[0] || (t->timing_seq & 15) == 0;
}

/* Writes an untimed launch's record (struct ingero_launch_rec) at `b`, which has `cap` bytes
 * (room for the ident block where `ident`), from the registers and one read of the user stack.
 * `taken` (a constant): its caller, clock and stack are `a`'s, taken before. Returns its size; 0
 * if it did not fit (never). */
static __always_inline __u32 put_launch(struct pt_regs* ctx, struct ingero_thread* t,
                                        struct ingero_recipe* r, struct launch_ask* a, __u8* b,
                                        __u32 cap, bool ident, const bool taken) {
  __u32 nregs = r->nregs;
  if (nregs > INGERO_REG_WORDS) nregs = INGERO_REG_WORDS;
  __u32 nstack = r->stack_words;
  if (nstack > INGERO_LAUNCH_STACK_WORDS)
    nstack = INGERO_LAUNCH_STACK_WORDS; /* (never: its caller) */
  __u16 flags = INGERO_CALL_ENTRY_ONLY;
  /* The return address, then the stack arguments past it, read at once into the record: the
   * arguments land where the record ships them, the return address in the word before them
   * (the last register word, or the header's last), taken out before that word is written. */
  __u32 at = sizeof(struct ingero_launch_rec) + 8 * nregs - 8;
  if (bpf_probe_read_user(b + at, (nstack + 1) * 8, (void*)a->sp)) {
    bpf_probe_read_user(b + at, 8, (void*)a->sp);
    if (nstack) flags |= INGERO_CALL_STACK_READ_FAULT;
  }
  __u64 caller = taken ? a->caller : *(__u64*)(b + at);
  __u64 now = taken ? a->now : bpf_ktime_get_ns();
  __u64 stack = taken ? a->stack : 0;
  if (!taken && stacks_enabled) {
    struct ingero_stack_ask ask = {.extra = site_arg(ctx, r) << 1,
                                   .caller = caller,
                                   .now_ns = now,
                                   .probe = a->probe,
                                   .tgid = t->tgid,
                                   .tid = a->tid};
    stack = ingero_call_stack(ctx, t, &ask);
  }
  struct ingero_launch_rec* h = (void*)b;
  h->type = INGERO_REC_LAUNCH;
  h->probe_id = a->probe;
  h->pid = t->tgid;
  h->tid = a->tid;
  h->start_ns = now;
  h->stack_hash = stack & INGERO_STACK_HASH_MASK;
  h->nregs = nregs;
  h->nstack = nstack;
  flags |= stack_flags(stack);
  __u64 regs[INGERO_REG_WORDS] = {PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
                                  PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx), INGERO_PARM6(ctx)};
  __u64* w = (void*)(b + sizeof(*h));
#pragma unroll
  for (__u32 i = 0; i < INGERO_REG_WORDS; i++)
    if (i < nregs) w[i] = regs[i];
  __u32 off = sizeof(*h) + 8 * (nregs + nstack);
  if (ident) off = put_ident(t, b, cap - 8, off, &flags);
  if (r->flags & INGERO_RECIPE_CALLER) {
    if (off > cap - 8) return 0; /* (never) */
    *(__u64*)(b + off) = caller;
    flags |= INGERO_CALL_CALLER;
    off += 8;
  }
  h->flags = flags;
  h->size = off;
  return off;
}

/* An untimed launch reserved on the ring alone: where batches are off, or a program preempted
 * on this CPU holds its batch. It reserves its largest record, with the ident block only where
 * the launch may ship one (the ring holds what is reserved, so most launches, which carry no
 * ident block, reserve without it). A global function: the verifier walks its writer once here,
 * where inline it would walk it again for the ring's memory beside the batch's. */
__noinline int ingero_launch_alone(struct pt_regs* ctx, struct ingero_thread* t,
                                   struct ingero_recipe* r, struct launch_ask* a) {
  if (!t || !r || !a) return 0;
  bool ident = launch_reads_ident(t);
  __u32 cap = ident ? INGERO_LAUNCH_IDENT_REC_SIZE : INGERO_LAUNCH_REC_SIZE;
  __u8* b = ident ? bpf_ringbuf_reserve(&calls_rb, INGERO_LAUNCH_IDENT_REC_SIZE, 0)
                  : bpf_ringbuf_reserve(&calls_rb, INGERO_LAUNCH_REC_SIZE, 0);
  if (!b) {
    stat_inc(INGERO_STAT_RINGBUF_DROPS);
    return 0;
  }
  if (!put_launch(ctx, t, r, a, b, cap, ident, true)) {
    bpf_ringbuf_discard(b, 0);
    return 0;
  }
  /* A thread's first record (it carries the ident block) wakes the reader at once, as
   * submit_call's do. Whether enough is queued to wake it otherwise is asked at one launch in
   * 16 of each thread, not at every one: the ring's fill is a helper call, whose return costs
   * about as much as its work. The reader polls every 100 ms anyway, and a thread's wake-up
   * comes at most 15 of its records past the threshold (INGERO_WAKEUP_BYTES). */
  __u64 wake = BPF_RB_NO_WAKEUP;
  if (((struct ingero_launch_rec*)b)->flags & INGERO_CALL_IDENT)
    wake = BPF_RB_FORCE_WAKEUP;
  else if ((t->timing_seq & 15) == 0)
    wake = ingero_wakeup_flags(&calls_rb);
  bpf_ringbuf_submit(b, wake);
  stat_inc(INGERO_STAT_CALLS);
  return 0;
}

/* An untimed launch (no entry read), without the frame a call that returns needs or a copy
 * through call_scratch: written into this CPU's batch (launch_batch.h), or alone into the ring.
 * The batch goes to the ring at once with a thread's first record (it carries the ident block,
 * and wakes the reader, as submit_call's do), and when it has no room for another launch. */
static __always_inline void launch_at_entry(struct pt_regs* ctx, struct ingero_thread* t,
                                            struct ingero_recipe* r, __u32 probe, __u32 tid,
                                            __u64 sp) {
  struct launch_ask a = {.sp = sp, .probe = probe, .tid = tid};
  struct ingero_launch_batch* lb = launch_batching ? batch_take() : 0;
  if (!lb) {
    /* Its stack is taken here, not in ingero_launch_alone: the verifier sums the frames of a
     * chain of calls, and ingero_call, ingero_launch_alone, ingero_call_stack and
     * ingero_py_walk came to 560 bytes of the 512 a program may have. One more read of the
     * user stack, for the return address, where batches are off. */
    bpf_probe_read_user(&a.caller, 8, (void*)sp);
    a.now = bpf_ktime_get_ns();
    if (stacks_enabled) {
      struct ingero_stack_ask ask = {.extra = site_arg(ctx, r) << 1,
                                     .caller = a.caller,
                                     .now_ns = a.now,
                                     .probe = probe,
                                     .tgid = t->tgid,
                                     .tid = tid};
      a.stack = ingero_call_stack(ctx, t, &ask);
    }
    ingero_launch_alone(ctx, t, r, &a);
    return;
  }
  __u32 used = lb->rec.bytes;
  if (used > INGERO_LAUNCH_BATCH_ROOM) used = INGERO_LAUNCH_BATCH_ROOM; /* (never) */
  bool ident = launch_reads_ident(t);
  __u32 off =
      put_launch(ctx, t, r, &a, lb->data + used, INGERO_LAUNCH_IDENT_REC_SIZE, ident, false);
  if (off) {
    if (!lb->rec.count) lb->rec.type = INGERO_REC_LAUNCH_BATCH; /* the map starts zeroed */
    lb->rec.count += 1;
    lb->rec.bytes = used + off;
    bool first = ((struct ingero_launch_rec*)(lb->data + used))->flags & INGERO_CALL_IDENT;
    if (first || used + off > INGERO_LAUNCH_BATCH_ROOM)
      batch_ship(lb, first ? BPF_RB_FORCE_WAKEUP : ingero_wakeup_flags(&calls_rb));
  }
  batch_give(lb);
}

/* emit_call's arguments past the thread, frame and recipe (a BPF function takes five). */
struct emit_ask {
  __u64 end_ns;
  __u64 ret;
  __u64 stack;
  __u32 tid;
  __u16 flags;
};

/* Assembles and submits one call record from frame f. */
static __always_inline int emit_call_body(struct ingero_thread* t, struct ingero_frame* f,
                                          struct ingero_recipe* r, struct emit_ask* a) {
  __u32 tid = a->tid;
  __u64 end_ns = a->end_ns, ret = a->ret, stack = a->stack;
  __u16 flags = a->flags;
  __u32 zero = 0;
  struct call_buf* buf = bpf_map_lookup_elem(&call_scratch, &zero);
  if (!buf) return 0;
  struct ingero_call_rec* h = (void*)buf->b;
  flags |= put_header(h, f->probe_id, t->tgid, tid, f->start_ns, end_ns, ret, stack, f->nested,
                      f->nested_probe);
  flags |= f->flags;

  __u32 nregs = r ? r->nregs : INGERO_REG_WORDS;
  __u32 nstack = r ? r->stack_words : 0;
  if (nregs > INGERO_REG_WORDS) nregs = INGERO_REG_WORDS;
  if (nstack > INGERO_STACK_WORDS) nstack = INGERO_STACK_WORDS;
  h->nregs = nregs;
  h->nstack = nstack;
  __u32 off = put_words(buf, f->regs, nregs, f->stack, nstack);
  __u64 off_cpu = t->off_cpu_total_ns - f->off_cpu_at_entry;
  if (off_cpu || f->switches) {
    struct ingero_call_offcpu* o = (void*)(buf->b + off);
    o->off_cpu_ns = off_cpu;
    o->preemptor_off_ns = f->preemptor_off_ns;
    o->preempts = f->preempts;
    o->switches = f->switches;
    o->preemptor_pid = f->preemptor_pid;
    o->preemptor_tid = f->preemptor_tid;
    __builtin_memcpy(o->preemptor_comm, f->preemptor_comm, sizeof(o->preemptor_comm));
    off += sizeof(*o);
    flags |= INGERO_CALL_OFFCPU;
  }
  /* The thread's name and cgroup: at its first record and at one in 16 of the records built
   * here (two helper calls each, ~90 ns a timed call otherwise), as an untimed launch does. */
  if (!t->ident_comm[0] || (t->ident_seq++ & 15) == 0)
    off = put_ident(t, buf->b, INGERO_CALL_BUF, off, &flags);
  off = settled(buf, off, INGERO_CALL_BUF - 16 - INGERO_RETURN_READ_MAX - INGERO_ENTRY_READ_MAX);
  if (r && (r->flags & INGERO_RECIPE_CALLER)) {
    *(__u64*)(buf->b + off) = f->caller;
    off += 8;
    flags |= INGERO_CALL_CALLER;
  }
  if (r && r->return_read.src != INGERO_PTR_NONE && !(flags & INGERO_CALL_ENTRY_ONLY)) {
    __u32 len = r->return_read.len;
    if (len > INGERO_RETURN_READ_MAX) len = INGERO_RETURN_READ_MAX;
    __u64 ptr = arg_word(f, r->return_read.src, r->return_read.index);
    if (ptr && len > 0) {
      ptr += r->return_read.offset;
      if (bpf_probe_read_user(buf->b + off, len, (void*)ptr) == 0) {
        h->return_len = len;
        off += rounded(len);
      } else {
        flags |= INGERO_CALL_RETURN_READ_FAULT;
      }
    } else if (len > 0) {
      flags |= INGERO_CALL_RETURN_READ_FAULT;
    }
  }
  off = settled(buf, off, INGERO_CALL_BUF - 8 - INGERO_ENTRY_READ_MAX);
  __u32 elen = f->entry_len;
  if (elen > INGERO_ENTRY_READ_MAX) elen = INGERO_ENTRY_READ_MAX;
  if (elen) {
    __builtin_memcpy(buf->b + off, f->entry_buf, INGERO_ENTRY_READ_MAX);
    h->entry_len = elen;
    off += rounded(elen);
  }
  h->flags = flags;
  submit_call(buf, off, flags);
  return 0;
}

/* The same, as a global function: the verifier checks it once for each program that calls it,
 * where inline it was walked again at each call site and for every path reaching it (three in
 * ingero_call besides the return's; docs/performance.md, the session's fixed cost). The rare
 * sites call it (a call below detached, an untimed launch with an entry read, a thread's exit);
 * a timed call's return keeps its copy inline, since a BPF-to-BPF call and its return cost a
 * timed sync ~45 ns on this kernel's mitigations. */
__noinline int ingero_emit_call(struct ingero_thread* t, struct ingero_frame* f,
                                struct ingero_recipe* r, struct emit_ask* a) {
  if (!t || !f || !a) return 0;
  return emit_call_body(t, f, r, a);
}

/* emit_call inline: a timed call's return. */
static __always_inline void emit_call_inline(struct ingero_thread* t, struct ingero_frame* f,
                                             __u32 tid, __u64 end_ns, __u64 ret, __u16 flags,
                                             struct ingero_recipe* r, __u64 stack) {
  struct emit_ask a = {.end_ns = end_ns, .ret = ret, .stack = stack, .tid = tid, .flags = flags};
  emit_call_body(t, f, r, &a);
}

static __always_inline void emit_call(struct ingero_thread* t, struct ingero_frame* f, __u32 tid,
                                      __u64 end_ns, __u64 ret, __u16 flags, struct ingero_recipe* r,
                                      __u64 stack) {
  struct emit_ask a = {.end_ns = end_ns, .ret = ret, .stack = stack, .tid = tid, .flags = flags};
  ingero_emit_call(t, f, r, &a);
}

#endif /* INGERO_CALL_EMIT_H */

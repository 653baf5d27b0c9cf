/* Part of calls.bpf.c (one compilation unit), included after its settings and maps, after
 * call_capture.h and call_emit.h: the entry and return paths the call programs share. The entry
 * decides, per call, whether it is filtered out, nested in the thread's call in flight, an
 * untimed launch shipped at once, or a call whose return is awaited; the return pairs it with
 * its frame and ships the record. */
#ifndef INGERO_CALL_PATHS_H
#define INGERO_CALL_PATHS_H

/* `known`: the thread's entry in `threads`, or 0. Only a call the filter let in creates one,
 * a thread's entry goes when it exits, and a process leaves the pid filter only when its last
 * thread exits: a thread of the same process found there needs no second hash lookup in
 * pid_filter. */
static __always_inline bool pid_allowed(__u32 tgid, struct ingero_thread* known) {
  if (filter_pids_enabled && !(known && known->tgid == tgid) &&
      !bpf_map_lookup_elem(&pid_filter, &tgid))
    return false;
  if (filter_cgroup_id && bpf_get_current_cgroup_id() != filter_cgroup_id) return false;
  return true;
}

/* `t`: the thread's entry as looked up before; created when there was none. */
static __always_inline struct ingero_thread* thread_get_or_create(struct ingero_thread* t,
                                                                  __u32 tid, __u32 tgid) {
  if (t) return t;
  __u32 zero = 0;
  struct ingero_thread* z = bpf_map_lookup_elem(&thread_zero, &zero);
  if (!z) return 0;
  long err = bpf_map_update_elem(&threads, &tid, z, BPF_NOEXIST);
  if (err && err != -17 /* EEXIST: raced with ourselves, fine */) {
    stat_inc(INGERO_STAT_THREAD_MAP_FULL);
    return 0;
  }
  t = bpf_map_lookup_elem(&threads, &tid);
  if (t) t->tgid = tgid;
  return t;
}

/* A kernel-name look-up's key (INGERO_NAME_ONCE) for its process image. */
static __always_inline void name_key_of(struct name_key* k, __u32 tgid, __u32 probe, __u64 answer,
                                        __u64 question) {
  struct task_struct* task = bpf_get_current_task_btf();
  k->tgid = tgid;
  k->probe = probe;
  k->started = task->group_leader->start_time;
  k->image = task->self_exec_id;
  k->answer = answer;
  k->question = question;
}

/* Whether `k` was shipped less than name_repeat_ns before `now`. */
static __always_inline bool name_shipped_lately(struct name_key* k, __u64 now) {
  __u64* at = bpf_map_lookup_elem(&names_shipped, k);
  return at && now - *at < name_repeat_ns;
}

/* A look-up held back (it named nothing new): counted in `stat` and for its probe. */
static __always_inline void name_held_back(__u32 probe, __u32 stat) {
  stat_inc(stat);
  __u64* n = bpf_map_lookup_elem(&names_held, &probe);
  if (n) __sync_fetch_and_add(n, 1);
}

/* Register argument `i` at entry (a switch on it would become a variable offset into ctx, which
 * the verifier refuses). */
static __always_inline __u64 entry_reg(struct pt_regs* ctx, __u32 i) {
  __u64 regs[8] = {PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
                   PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx), INGERO_PARM6(ctx)};
  return regs[i & 7]; /* 6 and 7: none (0) */
}

/* At entry: 1 when a look-up whose question alone fixes its answer (INGERO_NAME_FIXED) was
 * answered lately. A global function: the verifier walks it once, not along every path of the
 * entry that reaches it (the session's fixed cost is mostly verification). */
__noinline int ingero_name_asked_lately(struct pt_regs* ctx, __u32 tgid, __u32 probe,
                                        __u32 question) {
  if (!ctx) return 0;
  struct name_key k;
  name_key_of(&k, tgid, probe, 0, entry_reg(ctx, question));
  return name_shipped_lately(&k, bpf_ktime_get_ns());
}

/* ingero_name_at_return's arguments past the frame and recipe. */
struct name_ask {
  __u64 ret;
  __u64 now;
  __u32 tgid;
};

/* At a name look-up's return: 2 when its answer went out lately (it ships nothing), 1 when it
 * answered (keyed now, before its record goes: one lost to a full ring is asked again within the
 * window), 0 when it answered nothing. Global, as ingero_name_asked_lately. */
__noinline int ingero_name_at_return(struct ingero_frame* f, struct ingero_recipe* r,
                                     struct name_ask* a) {
  if (!f || !r || !a) return 0;
  __u8 once = r->name_once;
  __u64 answer = 0;
  if (once & INGERO_NAME_ANSWER_RET) {
    answer = a->ret;
  } else {
    __u64 ptr = arg_word(f, r->return_read.src, r->return_read.index);
    if (ptr) bpf_probe_read_user(&answer, sizeof(answer), (void*)(ptr + r->return_read.offset));
  }
  if (!answer || ((once & INGERO_NAME_NEEDS_ZERO) && (__u32)a->ret != 0)) return 0;
  struct name_key k;
  name_key_of(&k, a->tgid, f->probe_id, (once & INGERO_NAME_FIXED) ? 0 : answer,
              arg_word(f, INGERO_PTR_REG, r->name_question));
  if (name_shipped_lately(&k, a->now)) return 2;
  bpf_map_update_elem(&names_shipped, &k, &a->now, BPF_ANY);
  return 1;
}

/* Without sessions: a launch whose entry pushes no frame, its timing window being closed
 * (ingero_recipe.window even). */
static __always_inline bool outside_window(struct ingero_recipe* r) {
  return launch_timing_every != 1 && (r->flags & INGERO_RECIPE_ENTRY_ONLY) && !(r->window & 1);
}

/* Whether the window frame `f` was pushed in has closed since: its return probe may be gone. */
static __always_inline bool window_closed(struct ingero_frame* f) {
  __u32 was = f->probe_id;
  struct ingero_recipe* wr = bpf_map_lookup_elem(&recipes, &was);
  return !wr || wr->window != f->window;
}

/* A return without a frame of its own, of a launch entered untimed while its return probe was
 * attached (in a timing window, of the launches it does not time, or at its edges): expected,
 * not unpaired. */
static __always_inline bool untimed_return(bool session, __u32 probe) {
  if (session || launch_timing_every == 1) return false;
  struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &probe);
  if (!r || !(r->flags & INGERO_RECIPE_ENTRY_ONLY)) return false;
  stat_inc(INGERO_STAT_UNTIMED_RETURNS);
  return true;
}

/* Entry. Returns 0 when the return must be seen, 1 when not (a session then arms no return
 * probe). `session`: nested calls push no frame, since their return never comes. *
 * Kept whole despite its length: splitting it into inline helpers, even the 7-line GPU
 * mark alone, changes clang's register allocation and spills in both programs that inline
 * it (ingero_call, ingero_entry), so the verifier would see new code; the pair fallback's
 * kernels (before 6.12) are not the one the tests run on. */
static __always_inline int call_entry(struct pt_regs* ctx, bool session, __u64 id,
                                      __u32 session_probe) {
  __u32 tgid = id >> 32, tid = (__u32)id;
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!pid_allowed(tgid, t)) return 1;
  __u32 probe = session ? session_probe : (__u32)bpf_get_attach_cookie(ctx);
  struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &probe);
  if (!r || r->valid != INGERO_RECIPE_LIVE) return 1;
  t = thread_get_or_create(t, tid, tgid);
  if (!t) return 1;
  /* Once per thread, not per call: a hash lookup (the entry goes when the process exits, and
   * so do its threads). */
  if (!t->gpu_marked) {
    if (!(watch_flags(tgid) & INGERO_WATCH_GPU)) {
      __u8 gpu = INGERO_WATCH_GPU;
      bpf_map_update_elem(&watched_pids, &tgid, &gpu, BPF_ANY);
      __sync_fetch_and_add(&ingero_gpu_gen, 1);
    }
    t->gpu_marked = 1;
  }
  __u64 sp = PT_REGS_SP(ctx);
  __u32 d = t->depth;
  /* Without sessions: a launch timed in a window that has closed since, and which is no
   * longer on the stack (we run at its depth or above), lost its return with the window's
   * return probe. It goes out untimed below. */
  bool window_over = !session && d > 0 && d <= INGERO_MAX_DEPTH && t->frames[0].window &&
                     sp >= t->frames[0].sp && window_closed(&t->frames[0]);
  /* A call below us whose return never came (longjmp, an unwound exception, a return
   * instance the kernel dropped) left a frame whose stack pointer is below ours. A call
   * nested in it runs deeper (lower sp); a tail call from it (an alias jumping to the API it
   * wraps) runs at the same sp. */
  if (!window_over && d > 0 && d <= INGERO_MAX_DEPTH && sp > t->frames[0].sp) {
    stat_inc(INGERO_STAT_FRAMES_DISCARDED);
    d = 0;
  }
  if (d > 0 && d <= INGERO_MAX_DEPTH) {
    /* The call below us was entered through a probe user space has since detached (a runtime
     * whose launches all reach the driver loses its launch probes): its return will never
     * come, or, while the detach runs, may not; a launch already holding its driver launch
     * is not entered by another. It goes out now, untimed, instead of swallowing the thread's
     * calls as nested ones. */
    struct ingero_frame* below = &t->frames[0];
    __u32 was = below->probe_id;
    struct ingero_recipe* wr = bpf_map_lookup_elem(&recipes, &was);
    if (window_over || !wr || wr->valid == INGERO_RECIPE_GONE ||
        (wr->valid == INGERO_RECIPE_RETIRING && below->nested)) {
      /* A launch that has not reached the driver yet: this launch is the one it makes. */
      bool own = session && wr && (wr->flags & INGERO_RECIPE_ENTRY_ONLY) && !below->nested &&
                 (r->flags & INGERO_RECIPE_ENTRY_ONLY);
      if (own) {
        below->nested = 1;
        below->nested_probe = probe;
        stat_inc(INGERO_STAT_NESTED);
      }
      emit_call(t, below, tid, 0, 0, INGERO_CALL_ENTRY_ONLY, wr, 0);
      stat_inc(INGERO_STAT_RETURNS_DETACHED);
      t->depth = 0;
      if (own) return 1; /* counted in it; no return wanted */
      d = 0;
    }
  }
  if (d > 0) {
    struct ingero_frame* top = &t->frames[0];
    if (!top->nested) top->nested_probe = probe;
    top->nested += 1;
    stat_inc(INGERO_STAT_NESTED);
    if (session) {
      t->depth = d;
      return 1;
    }
    /* A launch outside its timing window has no return probe to pair (or one about to go,
     * whose return call_return lets pass): no placeholder. */
    if (outside_window(r)) return 1;
    /* Pair fallback: a placeholder frame pairs the nested return. */
    if (d >= INGERO_MAX_DEPTH) {
      if (d < 0xffff) t->depth = d + 1; /* keep counting so returns pop the right frames */
      stat_inc(INGERO_STAT_DEPTH_OVERFLOW);
      return 0;
    }
    struct ingero_frame* f = &t->frames[d & (INGERO_MAX_DEPTH - 1)];
    f->probe_id = probe;
    f->is_nested = 1;
    f->window = r->window;
    f->sp = sp;
    t->depth = d + 1;
    return 0;
  }
  /* A name look-up whose question alone fixes its answer, asked again lately: not entered. */
  if (session && (r->name_once & INGERO_NAME_FIXED) &&
      ingero_name_asked_lately(ctx, tgid, probe, r->name_question)) {
    name_held_back(probe, INGERO_STAT_NAME_ASKED_AGAIN);
    return 1;
  }
  /* A launch needs no return probe: its record goes now, but for one in launch_timing_every
   * per thread, whose return times it. Kernels without sessions time the launches made while
   * user space holds their return probe attached: a window of each period. */
  bool untimed = false;
  if (session && (r->flags & INGERO_RECIPE_ENTRY_ONLY) && launch_timing_every != 1) {
    /* Counted as a program makes launches: the driver launch of a runtime launch sent untimed
     * (entered deeper on the thread's stack, close below it) is that launch, untimed too.
     * Counting both layers' entries landed every timed one on a driver launch (with N even),
     * whose timing was lost in the fold into its untimed runtime launch. */
    __u32 below = t->nest_sp - (__u32)sp;
    bool upper = r->flags & INGERO_RECIPE_UPPER_LAYER;
    untimed = true;
    if (!upper && t->nest_sp && below && below < INGERO_NEST_SP_RANGE) {
      t->nest_sp = 0;
    } else {
      __u32 seq = t->timing_seq++;
      untimed = !launch_timing_every || seq % launch_timing_every != 0;
      t->nest_sp = untimed && upper ? (__u32)sp : 0;
    }
  } else if (!session && (r->flags & INGERO_RECIPE_ENTRY_ONLY) && launch_timing_every != 1) {
    /* Outside a window: untimed. In one: timed but within INGERO_WINDOW_TIMING_GAP_NS of the
     * thread's last timed one, so that a loop of a million launches a second does not send a
     * million records of its own to the ring; the others' returns still trap, and pass. */
    t->timing_seq++; /* one untimed launch in 16 reads the thread's name and cgroup */
    untimed = true;
    if (r->window & 1) {
      __u64 now = bpf_ktime_get_ns();
      if (now >= t->next_timed_ns) {
        t->next_timed_ns = now + INGERO_WINDOW_TIMING_GAP_NS;
        untimed = false;
      }
    }
  }
  if (untimed && r->entry_read.src == INGERO_PTR_NONE &&
      r->stack_words <= INGERO_LAUNCH_STACK_WORDS) {
    launch_at_entry(ctx, t, r, probe, tid, sp);
    stat_inc(INGERO_STAT_UNTIMED);
    return 1; /* no return probe; the thread's depth stays 0 */
  }
  begin_frame(ctx, t, &t->frames[0], probe, r, sp);
  if (untimed) {
    struct ingero_frame* f = &t->frames[0];
    __u64 stack = 0;
    if (stacks_enabled) {
      struct ingero_stack_ask ask = {.extra = frame_site_arg(f, r) << 1,
                                     .caller = f->caller,
                                     .now_ns = f->start_ns,
                                     .probe = probe,
                                     .tgid = t->tgid,
                                     .tid = tid};
      stack = ingero_call_stack(ctx, t, &ask);
    }
    emit_call(t, f, tid, 0, 0, INGERO_CALL_ENTRY_ONLY, r, stack);
    stat_inc(INGERO_STAT_UNTIMED);
    return 1;
  }
  t->depth = 1;
  return 0;
}

static __always_inline void call_return(struct pt_regs* ctx, bool session, __u32 session_tid,
                                        __u32 session_probe) {
  __u64 now = bpf_ktime_get_ns();
  __u32 tid = session ? session_tid : (__u32)bpf_get_current_pid_tgid();
  __u32 probe = session ? session_probe : (__u32)bpf_get_attach_cookie(ctx);
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!t || t->depth == 0) {
    if (!untimed_return(session, probe)) stat_inc(INGERO_STAT_UNPAIRED_RETURN);
    return;
  }
  __u32 d = t->depth;
  if (d > INGERO_MAX_DEPTH) { /* an overflowed nested entry (pair fallback): nothing kept */
    t->depth = d - 1;
    return;
  }
  __u32 top = (d - 1) & (INGERO_MAX_DEPTH - 1);
  if (d > 1 && t->frames[top].is_nested && t->frames[top].probe_id == probe) {
    t->depth = d - 1; /* a nested call returned: it is counted in frames[0] */
    return;
  }
  struct ingero_frame* f = &t->frames[0];
  if (f->probe_id != probe) {
    if (!untimed_return(session, probe)) stat_inc(INGERO_STAT_UNPAIRED_RETURN);
    return;
  }
  __u16 flags = 0;
  /* Nested calls above it unwound without returning; not a nested launch whose return went
   * with its timing window. */
  if (d > 1 && !(d == 2 && t->frames[1].window && window_closed(&t->frames[1]))) {
    stat_inc(INGERO_STAT_FRAMES_DISCARDED);
    flags |= INGERO_CALL_FRAMES_DISCARDED;
  }
  struct ingero_recipe* r = bpf_map_lookup_elem(&recipes, &probe);
  __u64 ret = PT_REGS_RC(ctx);
  /* A name look-up whose answer went out lately names nothing new (cuDNN asks before every
   * launch). */
  if (r && r->name_once) {
    struct name_ask na = {.ret = ret, .now = now, .tgid = t->tgid};
    if (ingero_name_at_return(f, r, &na) == 2) {
      name_held_back(probe, INGERO_STAT_NAME_ANSWERED_AGAIN);
      t->depth = 0;
      return;
    }
  }
  __u64 stack = 0;
  if (stacks_enabled && !(r && (r->flags & INGERO_RECIPE_NO_STACK))) {
    /* Slow and off-CPU calls are what explain examines: always walk them. A failing call
     * walks like a new call site, keyed by its return code: the first few per site. */
    __u32 always = t->off_cpu_total_ns != f->off_cpu_at_entry || now - f->start_ns >= stack_slow_ns;
    struct ingero_stack_ask ask = {
        .extra = (((__u64)(__u32)ret ^ frame_site_arg(f, r)) << 1) | always,
        .now_ns = now,
        .probe = probe,
        .tgid = t->tgid,
        .tid = tid};
    stack = ingero_call_stack(ctx, t, &ask);
  }
  emit_call_inline(t, f, tid, now, ret, flags, r, stack);
  t->depth = 0;
}

#endif /* INGERO_CALL_PATHS_H */

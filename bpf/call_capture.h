/* Part of calls.bpf.c (one compilation unit), included after its settings and maps: what a
 * traced call's entry captures into its frame (arguments, the user stack words, the entry read,
 * clocks), and how a recipe names one of those words. Uses INGERO_PARM6 from calls.bpf.c. */
#ifndef INGERO_CALL_CAPTURE_H
#define INGERO_CALL_CAPTURE_H

static __always_inline __u64 arg_word(struct ingero_frame* f, __u8 src, __u32 index) {
  if (index >= INGERO_REG_WORDS) return 0;
  if (src == INGERO_PTR_REG) return f->regs[index];
  if (src == INGERO_PTR_STACK_WORD && index < INGERO_STACK_WORDS) return f->stack[index];
  return 0;
}

/* What keys a call's site beside its return address: a launch's kernel where its recipe names
 * it (INGERO_RECIPE_SITE_ARG), from the entry's registers; 0 for other calls. */
static __always_inline __u64 site_arg(struct pt_regs* ctx, struct ingero_recipe* r) {
  if (!r || !(r->flags & INGERO_RECIPE_SITE_ARG)) return 0;
  /* The first or the second argument (a launch's kernel is one of them: user space sets the flag
   * for no other), each read at its fixed offset and made opaque: a switch on the index became
   * one read at a computed offset into the context, which the verifier refuses; six of them
   * cost the call program ~2,900 more instructions to verify. */
  __u64 a0 = PT_REGS_PARM1(ctx), a1 = PT_REGS_PARM2(ctx);
  barrier_var(a0);
  barrier_var(a1);
  return r->name_question ? a1 : a0;
}

/* The same, at a timed call's return, from the registers its frame kept. */
static __always_inline __u64 frame_site_arg(struct ingero_frame* f, struct ingero_recipe* r) {
  if (!r || !(r->flags & INGERO_RECIPE_SITE_ARG)) return 0;
  return arg_word(f, INGERO_PTR_REG, r->name_question);
}

/* Fills frames[0] for a top-level call: arguments, entry capture, clocks. */
static __always_inline void begin_frame(struct pt_regs* ctx, struct ingero_thread* t,
                                        struct ingero_frame* f, __u32 probe,
                                        struct ingero_recipe* r, __u64 sp) {
  f->probe_id = probe;
  f->preempts = 0;
  f->switches = 0;
  f->preemptor_pid = 0;
  f->preemptor_tid = 0;
  f->preemptor_off_ns = 0;
  f->preemptor_comm[0] = 0;
  f->flags = 0;
  f->entry_len = 0;
  f->nested = 0;
  f->nested_probe = 0;
  f->is_nested = 0;
  f->window = r->window;
  f->sp = sp;
  /* A call that may block keeps its caller's frame pointer too, so that user space can read
   * its stack from the process while it is in flight (the caller's frames above sp stay intact
   * until it returns); a launch does not. */
  f->fp = (r->flags & INGERO_RECIPE_CALLER) ? 0 : PT_REGS_FP(ctx);
  f->off_cpu_at_entry = t->off_cpu_total_ns;
  f->regs[0] = PT_REGS_PARM1(ctx);
  f->regs[1] = PT_REGS_PARM2(ctx);
  f->regs[2] = PT_REGS_PARM3(ctx);
  f->regs[3] = PT_REGS_PARM4(ctx);
  f->regs[4] = PT_REGS_PARM5(ctx);
  f->regs[5] = INGERO_PARM6(ctx);

  /* One read of the user stack: the return address at sp (where the call was made from) and
   * the stack arguments past it (each read costs a fault-safe copy with its checks: ~100 ns). */
  __u64 args = sp + 8;
  __u32 words = r->stack_words;
  if (words > INGERO_STACK_WORDS) words = INGERO_STACK_WORDS;
  if (bpf_probe_read_user(&f->caller, (words + 1) * 8, (void*)sp)) {
    /* Zeroed by the helper. The return address alone, then: it is what names a launch. */
    bpf_probe_read_user(&f->caller, 8, (void*)sp);
    if (words) f->flags |= INGERO_CALL_STACK_READ_FAULT;
  }

  __u8 src = r->entry_read.src;
  if (src != INGERO_PTR_NONE) {
    __u32 len = r->entry_read.len;
    if (len > INGERO_ENTRY_READ_MAX) len = INGERO_ENTRY_READ_MAX;
    __u64 ptr = src == INGERO_PTR_STACK_ADDR ? args : arg_word(f, src, r->entry_read.index);
    ptr += r->entry_read.offset;
    if (len > 0 && ptr && bpf_probe_read_user(f->entry_buf, len, (void*)ptr) == 0)
      f->entry_len = len;
    else if (len > 0)
      f->flags |= INGERO_CALL_ENTRY_READ_FAULT;
  }
  /* Timestamp last so capture work is not billed to the traced function. */
  f->start_ns = bpf_ktime_get_ns();
}

#endif /* INGERO_CALL_CAPTURE_H */

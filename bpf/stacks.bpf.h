/* User stacks of traced calls, captured at return (the caller's frames are intact, the
 * duration and result are known), with the Python frames of CPython processes walked from
 * the interpreter's own thread and frame lists. Included by ingero.bpf.c.
 *
 * Volume control: per (process, stack) the first `stack_samples` calls ship the stack; later
 * ones carry only its hash, which names the stack already shipped. Anomalous calls (an error,
 * time off-CPU, or slower than `stack_slow_ns`) always ship theirs, so a rare slow path is
 * never sampled away.
 *
 * The record is built in a per-CPU scratch slot and copied to the ring buffer only when it
 * ships. The walks run under bpf_loop, so the verifier checks each step once instead of
 * unrolling every path through them.
 */

const volatile __u32 stacks_enabled = 0;
const volatile __u32 stack_samples = 100;
const volatile __u64 stack_slow_ns = 1000000;

/* tgid -> where its interpreter keeps threads and frames (user space, verified layouts). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct ingero_py_config);
} py_procs SEC(".maps");

struct ingero_stack_key {
  __u32 tgid;
  __u32 pad;
  __u64 hash;
};

/* How many calls shipped each (process, stack). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct ingero_stack_key);
  __type(value, __u32);
} stack_counts SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ingero_stack_rec);
} stack_scratch SEC(".maps");

/* (process, code object) pairs whose code record was shipped. */
struct ingero_code_key {
  __u32 tgid;
  __u32 pad;
  __u64 code;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct ingero_code_key);
  __type(value, __u8);
} py_codes_sent SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ingero_py_code_rec);
} code_scratch SEC(".maps");

#define INGERO_PY_MAX_THREADS 256
#define INGERO_FNV_PRIME 0x100000001b3ULL

static __always_inline __u64 read_u64(__u64 addr) {
  __u64 v = 0;
  if (bpf_probe_read_user(&v, sizeof(v), (void*)addr)) return 0;
  return v;
}

static __always_inline struct ingero_stack_rec* scratch(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&stack_scratch, &zero);
}

/* ---- the thread list: find this thread's PyThreadState ---- */

struct py_thread_walk {
  struct ingero_py_config c;
  __u64 ts;
  __u64 want;
  __u64 found;
};

static long py_thread_step(__u32 i, void* arg) {
  struct py_thread_walk* w = arg;
  if (!w->ts) return 1;
  __u64 id = 0;
  if (w->c.thread_id_is_pthread)
    id = read_u64(w->ts + w->c.tstate_thread_id);
  else
    bpf_probe_read_user(&id, 4, (void*)(w->ts + w->c.tstate_thread_id));
  if (id == w->want) {
    w->found = w->ts;
    return 1;
  }
  w->ts = read_u64(w->ts + w->c.tstate_next);
  return 0;
}

/* ---- the frame list ---- */

struct py_frame_walk {
  struct ingero_py_config c;
  __u64 frame;
  __u32 n;
  __u32 fault;
  __u32 tgid;
};

/* Copies a compact ASCII str; returns its length, or 0xffffffff if it is not one. */
static __always_inline __u32 read_ascii(struct ingero_py_config* c, __u64 obj, char* out, __u32 max) {
  __u32 state = 0;
  __u64 len = 0;
  if (!obj || bpf_probe_read_user(&state, 4, (void*)(obj + c->unicode_state))) return 0xffffffff;
  if (!((state >> 5) & 1) || !((state >> 6) & 1)) return 0xffffffff; /* compact, ascii */
  if (bpf_probe_read_user(&len, 8, (void*)(obj + c->unicode_length))) return 0xffffffff;
  __u32 n = len > max ? max : (__u32)len;
  asm volatile("" : "+r"(n));
  if (n > max) n = max;
  if (n && bpf_probe_read_user(out, n, (void*)(obj + c->ascii_data))) return 0xffffffff;
  return len > 0xfffffffe ? 0xfffffffe : (__u32)len;
}

/* Ships a code object's file, name, first line and line table once per process. */
static __always_inline void ship_code(struct py_frame_walk* w, __u64 code) {
  struct ingero_code_key key = {.tgid = w->tgid, .code = code};
  if (bpf_map_lookup_elem(&py_codes_sent, &key)) return;
  __u32 zero = 0;
  struct ingero_py_code_rec* r = bpf_map_lookup_elem(&code_scratch, &zero);
  if (!r) return;
  r->type = INGERO_REC_PYCODE;
  r->pid = w->tgid;
  r->code = code;
  r->firstlineno = 0;
  bpf_probe_read_user(&r->firstlineno, 4, (void*)(code + w->c.code_firstlineno));
  __u64 fn = read_u64(code + w->c.code_filename);
  __u64 nm = read_u64(code + w->c.code_name);
  __u64 lt = read_u64(code + w->c.code_linetable);
  r->file_len = read_ascii(&w->c, fn, r->file, INGERO_PY_FILE_MAX);
  r->name_len = read_ascii(&w->c, nm, r->name, INGERO_PY_NAME_MAX);
  __u64 tlen = lt ? read_u64(lt + w->c.bytes_size) : 0;
  __u32 n = tlen > INGERO_PY_TABLE_MAX ? INGERO_PY_TABLE_MAX : (__u32)tlen;
  asm volatile("" : "+r"(n));
  if (n > INGERO_PY_TABLE_MAX) n = INGERO_PY_TABLE_MAX;
  r->table_len = tlen > 0xffffffff ? 0xffffffff : (__u32)tlen;
  if (n && bpf_probe_read_user(r->table, n, (void*)(lt + w->c.bytes_data))) r->table_len = 0xffffffff;
  if (bpf_ringbuf_output(&events, r, sizeof(*r), BPF_RB_NO_WAKEUP) == 0) {
    __u8 one = 1;
    bpf_map_update_elem(&py_codes_sent, &key, &one, BPF_ANY);
  } else {
    stat_inc(INGERO_STAT_STACK_DROPS);
  }
}

static long py_frame_step(__u32 i, void* arg) {
  struct py_frame_walk* w = arg;
  if (!w->frame) return 1;
  struct ingero_stack_rec* e = scratch();
  if (!e) return 1;
  __u64 code = 0, instr = 0;
  __u8 flags = 0;
  if (bpf_probe_read_user(&code, 8, (void*)(w->frame + w->c.frame_code))) {
    w->fault = 1;
    return 1;
  }
  __u64 type = code ? read_u64(code + 8) : 0; /* ob_type */
  if (type != w->c.code_type)
    flags |= INGERO_PY_NOT_CODE;
  else
    ship_code(w, code);
  if (w->c.instr_is_int)
    bpf_probe_read_user(&instr, 4, (void*)(w->frame + w->c.frame_instr));
  else
    bpf_probe_read_user(&instr, 8, (void*)(w->frame + w->c.frame_instr));
  if (w->c.frame_owner != 0xffff) {
    __u8 owner = 0;
    bpf_probe_read_user(&owner, 1, (void*)(w->frame + w->c.frame_owner));
    if (owner == w->c.owner_cstack) flags |= INGERO_PY_SHIM;
  }
  if (w->c.frame_is_entry != 0xffff) {
    __u8 entry = 0;
    bpf_probe_read_user(&entry, 1, (void*)(w->frame + w->c.frame_is_entry));
    if (entry) flags |= INGERO_PY_ENTRY;
  } else if (w->c.instr_is_int) {
    flags |= INGERO_PY_ENTRY; /* 3.10: every frame object is its own eval loop */
  }
  __u32 k = w->n;
  asm volatile("" : "+r"(k));
  if (k >= INGERO_PY_MAX) return 1;
  w->n = k + 1;
  e->py[k].code = code;
  e->py[k].instr = instr;
  e->py_flags[k] = flags;
  w->frame = read_u64(w->frame + w->c.frame_previous);
  return 0;
}

static __always_inline void py_walk(struct ingero_stack_rec* e, __u32 tgid, __u32 tid) {
  struct ingero_py_config* c = bpf_map_lookup_elem(&py_procs, &tgid);
  if (!c) return;
  stat_inc(INGERO_STAT_PY_WALKS);
  struct py_thread_walk tw = {};
  __builtin_memcpy(&tw.c, c, sizeof(tw.c));
  __u64 interp = read_u64(tw.c.runtime + tw.c.runtime_interp_head);
  tw.ts = interp ? read_u64(interp + tw.c.interp_threads_head) : 0;
  tw.want = tid;
#if defined(__TARGET_ARCH_x86)
  if (tw.c.thread_id_is_pthread) {
    struct task_struct* task = bpf_get_current_task_btf();
    tw.want = BPF_CORE_READ(task, thread.fsbase);
  }
#else
  if (tw.c.thread_id_is_pthread) tw.ts = 0;
#endif
  bpf_loop(INGERO_PY_MAX_THREADS, py_thread_step, &tw, 0);
  if (!tw.found) {
    e->py_status = INGERO_PY_NO_THREAD;
    return;
  }
  struct py_frame_walk fw = {};
  __builtin_memcpy(&fw.c, &tw.c, sizeof(fw.c));
  fw.tgid = tgid;
  fw.frame = read_u64(tw.found + fw.c.tstate_frame);
  if (fw.frame && fw.c.cframe_current_frame != 0xffff)
    fw.frame = read_u64(fw.frame + fw.c.cframe_current_frame);
  bpf_loop(INGERO_PY_MAX, py_frame_step, &fw, 0);
  e->n_py = fw.n > INGERO_PY_MAX ? INGERO_PY_MAX : fw.n;
  if (fw.fault) {
    e->py_status = INGERO_PY_FAULT;
    stat_inc(INGERO_STAT_PY_FAULTS);
  } else {
    e->py_status = fw.frame ? INGERO_PY_TRUNCATED : INGERO_PY_OK;
  }
}

/* ---- the hash: FNV-1a over the pid, native frames and Python frames ---- */

struct stack_hash_walk {
  __u64 h;
  __u32 n_ips;
  __u32 n_py;
};

static long hash_step(__u32 i, void* arg) {
  struct stack_hash_walk* w = arg;
  struct ingero_stack_rec* e = scratch();
  if (!e) return 1;
  if (i < w->n_ips) {
    __u32 idx = i;
    asm volatile("" : "+r"(idx)); /* keep the bound check on the register that indexes */
    if (idx >= INGERO_STACK_MAX) return 1;
    w->h = (w->h ^ e->ips[idx]) * INGERO_FNV_PRIME;
    return 0;
  }
  __u32 k = i - w->n_ips;
  if (k >= w->n_py) return 1;
  asm volatile("" : "+r"(k));
  if (k >= INGERO_PY_MAX) return 1;
  w->h = (w->h ^ e->py[k].code) * INGERO_FNV_PRIME;
  w->h = (w->h ^ e->py[k].instr) * INGERO_FNV_PRIME;
  return 0;
}

/* Captures the calling thread's stack at a uretprobe. Returns the stack hash (0 when the
 * capture found nothing) and sets INGERO_CALL_STACK_SHIPPED in *flags when the stack record
 * was submitted. */
static __always_inline __u64 capture_stack(void* ctx, __u32 tgid, __u32 tid, bool anomalous,
                                           __u16* flags) {
  struct ingero_stack_rec* e = scratch();
  if (!e) return 0;
  e->type = INGERO_REC_STACK;
  e->pid = tgid;
  e->tid = tid;
  e->n_py = 0;
  e->py_status = INGERO_PY_NONE;
  long got = bpf_get_stack(ctx, e->ips, sizeof(e->ips), BPF_F_USER_STACK);
  __u32 n_ips = got > 0 ? (__u32)got / 8 : 0;
  if (n_ips > INGERO_STACK_MAX) n_ips = INGERO_STACK_MAX;
  e->n_ips = n_ips;
  py_walk(e, tgid, tid);

  struct stack_hash_walk hw = {.h = 0xcbf29ce484222325ULL ^ tgid, .n_ips = n_ips, .n_py = e->n_py};
  bpf_loop(INGERO_STACK_MAX + INGERO_PY_MAX, hash_step, &hw, 0);
  __u64 h = hw.h ? hw.h : 1;
  if (n_ips == 0 && e->n_py == 0) return 0;
  e->hash = h;

  struct ingero_stack_key key = {.tgid = tgid, .hash = h};
  __u32* count = bpf_map_lookup_elem(&stack_counts, &key);
  __u32 seen = count ? *count : 0;
  if (!anomalous && seen >= stack_samples) {
    stat_inc(INGERO_STAT_STACKS_SAMPLED);
    return h;
  }
  if (bpf_ringbuf_output(&events, e, sizeof(*e), BPF_RB_NO_WAKEUP)) {
    stat_inc(INGERO_STAT_STACK_DROPS);
    return h; /* the call still names it; user space counts the missing stack */
  }
  if (count)
    __sync_fetch_and_add(count, 1);
  else {
    __u32 one = 1;
    bpf_map_update_elem(&stack_counts, &key, &one, BPF_ANY);
  }
  stat_inc(INGERO_STAT_STACKS_SHIPPED);
  *flags |= INGERO_CALL_STACK_SHIPPED;
  return h;
}

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* User stacks: of traced calls (ingero_call_stack, called by the call programs at return) and
 * of on-CPU samples of GPU processes (ingero_cpu_sample, a perf-event program), with the
 * Python frames of CPython processes walked from the interpreter's own thread and frame
 * lists.
 *
 * Cost control. A full capture (the native stack plus ~25 Python frames in a training loop)
 * costs microseconds, so a call pays for one only when it matters:
 *   - slow and off-CPU calls always get their own stack;
 *   - otherwise the call's site is keyed cheaply: its return address, its innermost Python
 *     frame (code object and instruction, read through the thread state cached per thread)
 *     and, for a failing call, its return code. The first `site_walks` calls of a site walk;
 *   - later calls of a known site walk only when their thread's sampling clock allows (one
 *     walk per `walk_interval_ns` per thread); the rest take the site's last stack without
 *     walking (the call record says so: INGERO_CALL_STACK_OF_SITE).
 * A stack is shipped once per process (user space deduplicates across processes); calls and
 * samples name it by hash. Records go to the aux ring, never crowding out call records.
 *
 * The walks run under bpf_loop, so the verifier checks each step once instead of unrolling
 * every path through them.
 */
/* vmlinux.h must come first. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "shared.bpf.h"
// clang-format on

#define __arg_ctx __attribute__((btf_decl_tag("arg:ctx")))

const volatile __u32 site_walks = 2;
const volatile __u64 walk_interval_ns = 20 * 1000 * 1000;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 2 << 20); /* resized by user space before load */
} aux_rb SEC(".maps");

/* tgid -> where its interpreter keeps threads and frames (user space, verified layouts). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct ingero_py_config);
} py_procs SEC(".maps");

/* Bumped by user space after each change to py_procs (BpfSession::set_python). A thread whose
 * process had no entry at this generation (ingero_thread.py_absent_gen) skips the lookup at
 * its calls' site keys until the generation changes: most traced processes are not Python. */
volatile __u32 py_procs_gen = 0;

struct ingero_stack_key {
  __u32 tgid;
  __u32 pad;
  __u64 hash;
};

/* (process, stack) pairs whose stack record was shipped. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct ingero_stack_key);
  __type(value, __u8);
} stack_shipped SEC(".maps");

/* (process, call site) -> how many calls of the site walked, and the last stack they found. */
struct site_val {
  __u64 stack_hash;
  __u32 walks;
  __u32 pad;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct ingero_stack_key);
  __type(value, struct site_val);
} sites SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ingero_stack_rec);
} stack_scratch SEC(".maps");

/* (process, code object) pairs whose code record was shipped, with the identity of the code
 * object shipped: a code object freed and another made at its address (exec, eval, a notebook
 * cell, generated code) is shipped anew. */
struct ingero_code_key {
  __u32 tgid;
  __u32 pad;
  __u64 code;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct ingero_code_key);
  __type(value, __u32);
} py_codes_sent SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ingero_py_code_rec);
} code_scratch SEC(".maps");

#define INGERO_PY_MAX_THREADS 256
#define INGERO_FNV_BASIS 0xcbf29ce484222325ULL
#define INGERO_FNV_PRIME 0x100000001b3ULL

/* The most bytes site_key reads at once from one object (read_pair). */
#define INGERO_SITE_READ 128

static __always_inline __u64 fnv(__u64 h, __u64 v) { return (h ^ v) * INGERO_FNV_PRIME; }

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

/* The walks' state, on the stack (bpf_loop's context must be): their process's config by
 * pointer (a map value), not a copy, which took 80 bytes of each frame, and a call's chain of
 * frames (the call program's, ingero_call_stack's, ingero_py_walk's, ingero_find_tstate's) must
 * stay within the verifier's 512 bytes. */
struct py_thread_walk {
  struct ingero_py_config* c;
  __u64 ts;
  __u64 want;
  __u64 found;
};

static __always_inline __u64 thread_id_at(struct ingero_py_config* c, __u64 ts) {
  __u64 id = 0;
  if (c->thread_id_is_pthread)
    id = read_u64(ts + c->tstate_thread_id);
  else
    bpf_probe_read_user(&id, 4, (void*)(ts + c->tstate_thread_id));
  return id;
}

static long py_thread_step(__u32 i, void* arg) {
  struct py_thread_walk* w = arg;
  if (!w->ts) return 1;
  if (thread_id_at(w->c, w->ts) == w->want) {
    w->found = w->ts;
    return 1;
  }
  w->ts = read_u64(w->ts + w->c->tstate_next);
  return 0;
}

/* The id the interpreter records for the current thread. */
static __always_inline __u64 current_thread_id(struct ingero_py_config* c, __u32 tid) {
#if defined(__TARGET_ARCH_x86)
  if (c->thread_id_is_pthread) {
    struct task_struct* task = bpf_get_current_task_btf();
    return BPF_CORE_READ(task, thread.fsbase);
  }
#else
  if (c->thread_id_is_pthread) return 0;
#endif
  return tid;
}

/* The PyThreadState on the interpreter's thread list whose thread id is `want`; 0: none.
 * Global, like the other __noinline functions here: the verifier checks a global function once
 * for each program that calls it, on its own, rather than again at every call site and for
 * every path that reaches it; a bpf_loop callback inside it is verified there once too. The
 * run-time price is a call, on paths that walk (not on a call site's stack taken from memory). */
__noinline __u64 ingero_find_tstate(struct ingero_py_config* c, __u64 want) {
  if (!c) return 0;
  struct py_thread_walk tw = {};
  tw.c = c;
  __u64 interp = read_u64(c->runtime + c->runtime_interp_head);
  tw.ts = interp ? read_u64(interp + c->interp_threads_head) : 0;
  tw.want = want;
  bpf_loop(INGERO_PY_MAX_THREADS, py_thread_step, &tw, 0);
  return tw.found;
}

/* This thread's PyThreadState: the one cached in its thread state when it still names this
 * thread (one read), else found on the interpreter's thread list and cached. */
static __always_inline __u64 py_tstate(struct ingero_py_config* c, struct ingero_thread* t,
                                       __u32 tid) {
  __u64 want = current_thread_id(c, tid);
  if (!want) return 0;
  if (t && t->py_tstate && thread_id_at(c, t->py_tstate) == want) return t->py_tstate;
  __u64 found = ingero_find_tstate(c, want);
  if (t) t->py_tstate = found;
  return found;
}

/* The innermost Python frame from what a thread state holds at tstate_frame: the frame itself,
 * or (3.11, 3.12) its C frame, which holds it. */
static __always_inline __u64 frame_of(struct ingero_py_config* c, __u64 at_tstate_frame) {
  if (at_tstate_frame && c->cframe_current_frame != 0xffff)
    return read_u64(at_tstate_frame + c->cframe_current_frame);
  return at_tstate_frame;
}

/* The innermost Python frame of a thread state. */
static __always_inline __u64 py_top_frame(struct ingero_py_config* c, __u64 tstate) {
  return frame_of(c, read_u64(tstate + c->tstate_frame));
}

/* ---- the frame list ---- */

struct py_frame_walk {
  struct ingero_py_config* c;
  __u64 frame;
  __u32 fault;
  __u32 tgid;
};

/* Copies a compact ASCII str; returns its length, or 0xffffffff if it is not one. */
static __always_inline __u32 read_ascii(struct ingero_py_config* c, __u64 obj, char* out,
                                        __u32 max) {
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

/* Ships a code object's file, name, first line and line table once per process and identity
 * (its file and line-table objects and first line: what tells a code object made at the
 * address of a freed one apart). Returns that identity, which the stack's hash takes in (a
 * frame of the new object is another stack). Global: inline in py_frame_step, its branches
 * were verified again on every pass the verifier makes over the callback. */
__noinline int ingero_ship_code(struct ingero_py_config* c, __u32 tgid, __u64 code) {
  if (!c) return 0;
  __s32 first = 0;
  bpf_probe_read_user(&first, 4, (void*)(code + c->code_firstlineno));
  __u64 fn = read_u64(code + c->code_filename);
  __u64 lt = read_u64(code + c->code_linetable);
  __u64 ident = fnv(fnv(fnv(INGERO_FNV_BASIS, fn), lt), (__u32)first);
  __u32 id = (__u32)(ident ^ (ident >> 32));
  struct ingero_code_key key = {.tgid = tgid, .code = code};
  __u32* sent = bpf_map_lookup_elem(&py_codes_sent, &key);
  if (sent && *sent == id) return (int)id;
  __u32 zero = 0;
  struct ingero_py_code_rec* r = bpf_map_lookup_elem(&code_scratch, &zero);
  if (!r) return (int)id;
  r->type = INGERO_REC_PYCODE;
  r->pid = tgid;
  r->code = code;
  r->firstlineno = first;
  __u64 nm = read_u64(code + c->code_name);
  r->file_len = read_ascii(c, fn, r->file, INGERO_PY_FILE_MAX);
  r->name_len = read_ascii(c, nm, r->name, INGERO_PY_NAME_MAX);
  __u64 tlen = lt ? read_u64(lt + c->bytes_size) : 0;
  __u32 n = tlen > INGERO_PY_TABLE_MAX ? INGERO_PY_TABLE_MAX : (__u32)tlen;
  asm volatile("" : "+r"(n));
  if (n > INGERO_PY_TABLE_MAX) n = INGERO_PY_TABLE_MAX;
  r->table_len = tlen > 0xffffffff ? 0xffffffff : (__u32)tlen;
  if (n && bpf_probe_read_user(r->table, n, (void*)(lt + c->bytes_data))) r->table_len = 0xffffffff;
  if (bpf_ringbuf_output(&aux_rb, r, sizeof(*r), BPF_RB_NO_WAKEUP) == 0)
    bpf_map_update_elem(&py_codes_sent, &key, &id, BPF_ANY);
  else
    stat_inc(INGERO_STAT_STACK_DROPS);
  return (int)id;
}

static long py_frame_step(__u32 i, void* arg) {
  struct py_frame_walk* w = arg;
  /* Held here, not read from *w again: a global function given the walk (ingero_ship_code)
   * leaves the verifier nothing known of what *w holds after it. */
  struct ingero_py_config* c = w->c;
  if (!w->frame || !c) return 1;
  struct ingero_stack_rec* e = scratch();
  if (!e) return 1;
  __u64 code = 0, instr = 0;
  __u8 flags = 0;
  if (bpf_probe_read_user(&code, 8, (void*)(w->frame + c->frame_code))) {
    w->fault = 1;
    return 1;
  }
  __u64 type = code ? read_u64(code + 8) : 0; /* ob_type */
  if (type != c->code_type)
    flags |= INGERO_PY_NOT_CODE;
  else /* the code objects' identities, for the stack's hash (e->hash until it is computed) */
    e->hash = fnv(e->hash, (__u32)ingero_ship_code(c, w->tgid, code));
  if (c->instr_is_int)
    bpf_probe_read_user(&instr, 4, (void*)(w->frame + c->frame_instr));
  else
    bpf_probe_read_user(&instr, 8, (void*)(w->frame + c->frame_instr));
  if (c->frame_owner != 0xffff) {
    __u8 owner = 0;
    bpf_probe_read_user(&owner, 1, (void*)(w->frame + c->frame_owner));
    if (owner == c->owner_cstack) flags |= INGERO_PY_SHIM;
  }
  if (c->frame_is_entry != 0xffff) {
    __u8 entry = 0;
    bpf_probe_read_user(&entry, 1, (void*)(w->frame + c->frame_is_entry));
    if (entry) flags |= INGERO_PY_ENTRY;
  } else if (c->instr_is_int) {
    flags |= INGERO_PY_ENTRY; /* 3.10: every frame object is its own eval loop */
  }
  /* The count lives in the scratch record (a map value), not in *w on the caller's stack: a
   * count the verifier can follow would make it verify this callback once per value. */
  __u32 k = e->n_py;
  if (k >= INGERO_PY_MAX) return 1;
  e->n_py = k + 1;
  e->py[k].code = code;
  e->py[k].instr = instr;
  e->py_flags[k] = flags;
  w->frame = read_u64(w->frame + c->frame_previous);
  return 0;
}

/* The Python frames of this thread into `e` (the stack scratch record): n_py, py, py_flags and
 * py_status. */
__noinline int ingero_py_walk(struct ingero_stack_rec* e, struct ingero_py_config* c,
                              struct ingero_thread* t, __u32 tgid, __u32 tid) {
  if (!e || !c) return 0;
  e->n_py = 0;
  stat_inc(INGERO_STAT_PY_WALKS);
  __u64 ts = py_tstate(c, t, tid);
  if (!ts) {
    e->py_status = INGERO_PY_NO_THREAD;
    return 0;
  }
  struct py_frame_walk fw = {};
  fw.c = c;
  fw.tgid = tgid;
  fw.frame = py_top_frame(c, ts);
  bpf_loop(INGERO_PY_MAX, py_frame_step, &fw, 0);
  if (e->n_py > INGERO_PY_MAX) e->n_py = INGERO_PY_MAX;
  if (fw.fault) {
    e->py_status = INGERO_PY_FAULT;
    stat_inc(INGERO_STAT_PY_FAULTS);
  } else {
    e->py_status = fw.frame ? INGERO_PY_TRUNCATED : INGERO_PY_OK;
  }
  return 0;
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
    w->h = fnv(w->h, e->ips[idx]);
    return 0;
  }
  __u32 k = i - w->n_ips;
  if (k >= w->n_py) return 1;
  asm volatile("" : "+r"(k));
  if (k >= INGERO_PY_MAX) return 1;
  w->h = fnv(w->h, e->py[k].code);
  w->h = fnv(w->h, e->py[k].instr);
  return 0;
}

/* A full capture into the scratch record, shipped unless this process shipped it already.
 * Returns the hash (0: no frames) with INGERO_STACK_RET_SHIPPED when shipped now. `ctx` is the
 * program's own context (uprobe or perf event): bpf_get_stack reads its user registers.
 * `caller`: at a function's entry, the return address at its stack pointer (0 elsewhere). There
 * the first address is the function's own (skipped), and the frame-pointer chain starts at the
 * caller's caller: the kernel (6.11+) puts the return address at the stack pointer between
 * them only where the function begins with `push %rbp` or `endbr64` (the real libcudart's
 * launch does, the -O2 code of many libraries does not). Where it did not, the stack is taken
 * again one word further and the caller put first: the call site is the stack's first frame,
 * as at a return. */
static __always_inline __u64 walk_and_ship(void* ctx, struct ingero_thread* t, __u32 tgid,
                                           __u32 tid, __u64 caller) {
  struct ingero_stack_rec* e = scratch();
  if (!e) return 0;
  e->type = INGERO_REC_STACK;
  e->pid = tgid;
  e->tid = tid;
  e->n_py = 0;
  e->py_status = INGERO_PY_NONE;
  e->hash = 0;
  __u64 skip = caller ? 1 : 0;
  long got = bpf_get_stack(ctx, e->ips, sizeof(e->ips), BPF_F_USER_STACK | skip);
  __u32 n_ips = got > 0 ? (__u32)got / 8 : 0;
  if (caller && (n_ips == 0 || e->ips[0] != caller)) {
    got = bpf_get_stack(ctx, &e->ips[1], sizeof(e->ips) - 8, BPF_F_USER_STACK | skip);
    e->ips[0] = caller;
    n_ips = 1 + (got > 0 ? (__u32)got / 8 : 0);
  }
  if (n_ips > INGERO_STACK_MAX) n_ips = INGERO_STACK_MAX;
  e->n_ips = n_ips;
  struct ingero_py_config* c = bpf_map_lookup_elem(&py_procs, &tgid);
  if (c) ingero_py_walk(e, c, t, tgid, tid);
  if (n_ips == 0 && e->n_py == 0) return 0;

  struct stack_hash_walk hw = {
      .h = fnv(INGERO_FNV_BASIS ^ tgid, e->hash), .n_ips = n_ips, .n_py = e->n_py};
  bpf_loop(INGERO_STACK_MAX + INGERO_PY_MAX, hash_step, &hw, 0);
  __u64 h = hw.h & INGERO_STACK_HASH_MASK;
  if (!h) h = 1;
  e->hash = h;
  struct ingero_stack_key key = {.tgid = tgid, .hash = h};
  if (bpf_map_lookup_elem(&stack_shipped, &key)) {
    stat_inc(INGERO_STAT_STACKS_SAMPLED);
    return h;
  }
  if (bpf_ringbuf_output(&aux_rb, e, sizeof(*e), ingero_wakeup_flags(&aux_rb))) {
    stat_inc(INGERO_STAT_STACK_DROPS);
    return h; /* the call still names it; user space counts the missing stack */
  }
  __u8 one = 1;
  bpf_map_update_elem(&stack_shipped, &key, &one, BPF_ANY);
  stat_inc(INGERO_STAT_STACKS_SHIPPED);
  return h | INGERO_STACK_RET_SHIPPED;
}

/* The call site of the call returning in `ctx`: its return address, its innermost Python
 * frame and the extra key (a failing call's return code). */
/* Where read_pair reads its window: a map value, which the verifier lets a bounded variable
 * offset read (a stack buffer it does not). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64[INGERO_SITE_READ / 8]);
} site_window SEC(".maps");

/* Two 8-aligned words of a user object at `off_a` and `off_b`, read at once where they lie
 * within INGERO_SITE_READ bytes of each other (every layout of probe/python_layout.cc): a call
 * site's key costs a launch of a Python process one user read fewer for each pair. False when
 * they do not, or the read failed (the window ran into an unmapped page): the caller reads them
 * one by one. */
static __always_inline bool read_pair(__u32 off_a, __u32 off_b, __u64 obj, __u64* a, __u64* b) {
  __u32 lo = off_a < off_b ? off_a : off_b;
  __u32 da = off_a - lo, db = off_b - lo;
  if (da >= INGERO_SITE_READ || db >= INGERO_SITE_READ || (da & 7) || (db & 7)) return false;
  __u32 zero = 0;
  __u8* w = bpf_map_lookup_elem(&site_window, &zero);
  if (!w || bpf_probe_read_user(w, INGERO_SITE_READ, (void*)(obj + lo))) return false;
  *a = *(__u64*)(w + (da & (INGERO_SITE_READ - 8)));
  *b = *(__u64*)(w + (db & (INGERO_SITE_READ - 8)));
  return true;
}

/* The innermost Python frame of the calling thread, for its call site's key: py_tstate and
 * py_top_frame, with the cached thread state's id and its frame (or C frame) read at once. */
static __always_inline __u64 site_frame(struct ingero_py_config* c, struct ingero_thread* t,
                                        __u32 tid) {
  __u64 want = current_thread_id(c, tid);
  if (!want) return 0;
  __u64 ts = t ? t->py_tstate : 0, id = 0, frame = 0;
  bool known = false;
  if (ts && read_pair(c->tstate_thread_id, c->tstate_frame, ts, &id, &frame)) {
    if (!c->thread_id_is_pthread) id &= 0xffffffffULL;
    known = id == want; /* else another thread's now: found again below */
  }
  if (known) return frame_of(c, frame);
  ts = py_tstate(c, t, tid);
  return ts ? py_top_frame(c, ts) : 0;
}

/* Where the interpreter of the calling thread's process keeps threads and frames: the thread's
 * own copy of its process's entry in py_procs, made again when the map changed (a hash lookup
 * less at each call of a Python process); 0 when the process has none. Always the copy, never
 * the map's entry: the verifier would walk what reads through it once for each. */
static __always_inline struct ingero_py_config* py_config_of(struct ingero_thread* t, __u32 tgid) {
  if (!t) return 0; /* (never: the call programs keep a thread's state before they ask) */
  __u32 gen = py_procs_gen;
  if (t->py_absent_gen == gen + 1) return 0;
  if (t->py_config_gen == gen + 1) return &t->py_config;
  struct ingero_py_config* c = bpf_map_lookup_elem(&py_procs, &tgid);
  if (!c) {
    t->py_absent_gen = gen + 1;
    return 0;
  }
  /* `gen` was read before the entry: an entry changed since is copied again at the next call,
   * after user space bumps the generation (BpfSession::set_python). */
  __builtin_memcpy(&t->py_config, c, sizeof(*c));
  t->py_config_gen = gen + 1;
  return &t->py_config;
}

static __always_inline __u64 site_key(struct pt_regs* ctx, struct ingero_thread* t, __u32 tgid,
                                      __u32 tid, __u32 probe, __u64 extra, __u64 caller) {
  __u64 h = fnv(fnv(fnv(INGERO_FNV_BASIS ^ tgid, probe), caller ? caller : PT_REGS_IP(ctx)), extra);
  struct ingero_py_config* c = py_config_of(t, tgid);
  if (!c) return h;
  __u64 frame = site_frame(c, t, tid);
  if (!frame) return h;
  __u64 code = 0, instr = 0;
  if (!read_pair(c->frame_code, c->frame_instr, frame, &code, &instr)) {
    code = read_u64(frame + c->frame_code);
    if (c->instr_is_int)
      bpf_probe_read_user(&instr, 4, (void*)(frame + c->frame_instr));
    else
      instr = read_u64(frame + c->frame_instr);
  }
  if (c->instr_is_int) instr &= 0xffffffffULL;
  return fnv(fnv(h, code), instr);
}

/* A site key's slot in its thread's memo. Not the key's own low or high bits: FNV carries an
 * input bit only upwards (and 40 bits up), so call sites a power of two apart (aligned
 * functions) agreed in both, shared one slot and evicted each other at every call (a launch
 * loop of four sites took its stack from the memo in 6% of its launches). The key folded, then
 * spread by Fibonacci hashing; even slots, each key having the odd one beside it too. */
static __always_inline __u32 memo_slot(__u64 key) {
  return (__u32)(((key ^ (key >> 32)) * 0x9e3779b97f4a7c15ULL) >> (64 - INGERO_SITE_MEMO_BITS)) &
         ~1u;
}

__noinline __u64 ingero_call_stack(struct pt_regs* ctx __arg_ctx, struct ingero_thread* t,
                                   struct ingero_stack_ask* ask) {
  if (!ask) return 0;
  __u32 tgid = ask->tgid, tid = ask->tid;
  __u64 now = ask->now_ns, extra = ask->extra, caller = ask->caller;
  __u32 probe = ask->probe;
  bool always = extra & 1;
  struct ingero_stack_key sk = {.tgid = tgid};
  struct ingero_site_memo* memo = 0;
  if (!always) {
    sk.hash = site_key(ctx, t, tgid, tid, probe, extra >> 1, caller);
    bool due = t && now >= t->next_walk_ns;
    if (t) {
      /* Two slots a key: its own and its neighbour. The key where either holds it; else the
       * first where empty, else the second (evicted): two sites that share a slot both stay. */
      __u32 slot = memo_slot(sk.hash);
      memo = &t->site_memo[slot];
      if (memo->key != sk.hash && memo->key) memo = &t->site_memo[slot ^ 1];
      /* A site this thread already took a stack from, and no walk due: its stack without the
       * lookup in `sites` (a hash of the 16-byte key and its chain, the largest part of this
       * path). */
      if (!due && sk.hash && memo->key == sk.hash) {
        stat_inc(INGERO_STAT_STACKS_OF_SITE);
        return memo->stack_hash ? memo->stack_hash | INGERO_STACK_RET_OF_SITE : 0;
      }
    }
    stat_inc(INGERO_STAT_SITE_LOOKUPS);
    struct site_val* sv = bpf_map_lookup_elem(&sites, &sk);
    if (sv && sv->walks >= site_walks && !due) {
      __u64 sh = sv->stack_hash;
      if (memo) {
        memo->key = sk.hash;
        memo->stack_hash = sh;
      }
      stat_inc(INGERO_STAT_STACKS_OF_SITE);
      return sh ? sh | INGERO_STACK_RET_OF_SITE : 0;
    }
  }
  /* At entry (`caller` given) the innermost frame is the traced function itself: skipped, so
   * the stack is the one its return would see. */
  __u64 r = walk_and_ship(ctx, t, tgid, tid, caller);
  stat_inc(INGERO_STAT_STACK_WALKS);
  if (t) t->next_walk_ns = now + walk_interval_ns;
  if (!always) {
    struct site_val* sv = bpf_map_lookup_elem(&sites, &sk);
    __u32 walks = 1;
    if (sv) {
      walks = sv->walks + 1;
      sv->walks = walks;
      sv->stack_hash = r & INGERO_STACK_HASH_MASK;
    } else {
      struct site_val nv = {.stack_hash = r & INGERO_STACK_HASH_MASK, .walks = 1};
      bpf_map_update_elem(&sites, &sk, &nv, BPF_ANY);
    }
    /* The thread's own walk refreshes what it takes for the site until its next walk. */
    if (memo && walks >= site_walks) {
      memo->key = sk.hash;
      memo->stack_hash = r & INGERO_STACK_HASH_MASK;
    }
  }
  return r;
}

/* On-CPU sampling of GPU processes and the processes they forked (DataLoader workers): a
 * perf-event CPU-clock program on every CPU (user space opens the events, ~49 Hz). A sample
 * walks the full stack (the rate is low) and names it by hash. */
SEC("perf_event")
int ingero_cpu_sample(struct bpf_perf_event_data* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32, tid = (__u32)id;
  if (!tgid || !watch_flags(tgid)) return 0;
  struct ingero_thread* t = bpf_map_lookup_elem(&threads, &tid);
  __u64 h = walk_and_ship(ctx, t, tgid, tid, 0) & INGERO_STACK_HASH_MASK;
  struct ingero_cpu_sample_rec* s = bpf_ringbuf_reserve(&aux_rb, sizeof(*s), 0);
  if (!s) {
    stat_inc(INGERO_STAT_SAMPLE_DROPS);
    return 0;
  }
  s->type = INGERO_REC_CPU_SAMPLE;
  s->pid = tgid;
  s->tid = tid;
  s->cpu = bpf_get_smp_processor_id();
  s->ts_ns = bpf_ktime_get_ns();
  s->stack_hash = h;
  bpf_ringbuf_submit(s, ingero_wakeup_flags(&aux_rb));
  stat_inc(INGERO_STAT_CPU_SAMPLES);
  return 0;
}

/* Stack records: a call's (or an on-CPU sample's) user stack with its CPython frames, the
 * code objects those frames name, and where each Python process keeps its frames. Part of
 * ingero_records.h; shipped on the aux ring. */
#ifndef INGERO_RECORDS_STACK_H
#define INGERO_RECORDS_STACK_H

#define INGERO_STACK_MAX 64 /* native user frames kept per stack */
#define INGERO_PY_MAX 32    /* Python frames kept per stack */

/* One Python frame as the interpreter had it at the call: the code object and the raw
 * instruction position (3.11/3.12: prev_instr pointer; 3.13: instr_ptr; 3.10: f_lasti).
 * User space turns it into file:line via the code object's line table. */
struct ingero_py_frame {
  __u64 code;
  __u64 instr;
};

/* ingero_py_frame flags */
#define INGERO_PY_ENTRY 0x1    /* the frame an eval loop was entered with (3.10/3.11 boundary) */
#define INGERO_PY_SHIM 0x2     /* a C-stack shim frame (3.12+): the next frame starts a new loop */
#define INGERO_PY_NOT_CODE 0x4 /* the frame's code pointer is not a PyCodeObject: drop it */

/* ingero_stack_rec.py_status */
enum ingero_py_status {
  INGERO_PY_NONE = 0,      /* not a configured Python process */
  INGERO_PY_OK = 1,        /* frames walked to the bottom */
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
#define INGERO_PY_TABLE_MAX 4096
struct ingero_py_code_rec {
  __u32 type; /* INGERO_REC_PYCODE */
  __u32 pid;
  __u64 code;
  __s32 firstlineno;
  __u32 file_len; /* 0xffffffff: not compact ASCII, not copied */
  __u32 name_len;
  __u32 table_len; /* bytes of the line table */
  char file[INGERO_PY_FILE_MAX];
  char name[INGERO_PY_NAME_MAX];
  __u8 table[INGERO_PY_TABLE_MAX];
};

/* Where the interpreter keeps its threads and frames, per Python process (map py_procs,
 * written by user space from a verified layout). Offsets in bytes; 0xffff = absent. */
struct ingero_py_config {
  __u64 runtime;   /* address of _PyRuntime in the process */
  __u64 code_type; /* address of PyCode_Type: a frame whose code is not one is dropped */
  __u32 version;   /* (major << 8) | minor */
  __u16 runtime_interp_head;
  __u16 interp_threads_head;
  __u16 tstate_next;
  __u16 tstate_thread_id; /* native_thread_id (3.11+), or thread_id = pthread_self (3.10) */
  __u16 tstate_frame;     /* 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame */
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

/* An on-CPU sample of a thread of a GPU process (perf-event CPU clock): where it was running.
 * Its stack record, when new, precedes it on the aux ring. */
struct ingero_cpu_sample_rec {
  __u32 type; /* INGERO_REC_CPU_SAMPLE */
  __u32 pid;
  __u32 tid;
  __u32 cpu;
  __u64 ts_ns;
  __u64 stack_hash; /* 0: no stack */
};

#endif /* INGERO_RECORDS_STACK_H */

// The C++ side's view of bpf/ingero_records.h: every offset the decoder relies on is
// checked here, so the two compilers can never silently disagree.
#pragma once

#include <cstddef>

#include "ingero_records.h"
#include "thread_state.h"

static_assert(sizeof(ingero_call_rec) == 64, "ingero_call_rec layout changed");
static_assert(offsetof(ingero_call_rec, probe_id) == 4);
static_assert(offsetof(ingero_call_rec, pid) == 8);
static_assert(offsetof(ingero_call_rec, start_ns) == 16);
static_assert(offsetof(ingero_call_rec, ret) == 32);
static_assert(offsetof(ingero_call_rec, stack_hash) == 40);
static_assert(offsetof(ingero_call_rec, flags) == 48);
static_assert(offsetof(ingero_call_rec, nested_probe) == 56);
static_assert(sizeof(ingero_launch_rec) == 40, "ingero_launch_rec layout changed");
static_assert(offsetof(ingero_launch_rec, start_ns) == 16);
static_assert(offsetof(ingero_launch_rec, stack_hash) == 24);
static_assert(offsetof(ingero_launch_rec, flags) == 32);
static_assert(sizeof(ingero_call_offcpu) == 48);
static_assert(sizeof(ingero_call_ident) == 24);
static_assert(INGERO_CALL_REC_MAX == 400);
static_assert(sizeof(ingero_cpu_sample_rec) == 32);
static_assert(sizeof(ingero_stack_rec) == 1080, "ingero_stack_rec layout changed");
static_assert(offsetof(ingero_stack_rec, hash) == 16);
static_assert(offsetof(ingero_stack_rec, ips) == 24);
static_assert(offsetof(ingero_stack_rec, py) == 24 + 8 * INGERO_STACK_MAX);
static_assert(sizeof(ingero_py_config) == 80, "ingero_py_config layout changed");
static_assert(sizeof(ingero_py_code_rec) ==
              32 + INGERO_PY_FILE_MAX + INGERO_PY_NAME_MAX + INGERO_PY_TABLE_MAX);
static_assert(sizeof(ingero_recipe) == 24, "ingero_recipe layout changed");
static_assert(offsetof(ingero_recipe, nregs) == 2);
static_assert(offsetof(ingero_recipe, entry_read) == 8);
static_assert(offsetof(ingero_recipe, return_read) == 16);
static_assert(sizeof(ingero_ptr_read) == 8);
static_assert(sizeof(ingero_libwatch_rec) == 40);
static_assert(sizeof(ingero_inflight_rec) == 320, "ingero_inflight_rec layout changed");
static_assert(offsetof(ingero_inflight_rec, start_ns) == 16);
static_assert(offsetof(ingero_inflight_rec, off_state) == 72);
static_assert(offsetof(ingero_inflight_rec, nregs) == 88);
static_assert(offsetof(ingero_inflight_rec, regs) == 96);
static_assert(offsetof(ingero_inflight_rec, entry_buf) == 192);
static_assert(offsetof(ingero_thread, py_tstate) == 40);
static_assert(sizeof(ingero_offcpu_start) == 80);
static_assert(offsetof(ingero_offcpu_start, woken_ns) == 48);
static_assert(sizeof(ingero_sched_rec) == 128);

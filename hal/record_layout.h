// The C++ side's view of bpf/ingero_records.h: every offset the decoder relies on is
// checked here, so the two compilers can never silently disagree.
#pragma once

#include <cstddef>

#include "ingero_records.h"

static_assert(sizeof(ingero_call_rec) == 376, "ingero_call_rec layout changed");
static_assert(offsetof(ingero_call_rec, probe_id) == 4);
static_assert(offsetof(ingero_call_rec, pid) == 8);
static_assert(offsetof(ingero_call_rec, cgroup_id) == 16);
static_assert(offsetof(ingero_call_rec, start_ns) == 24);
static_assert(offsetof(ingero_call_rec, ret) == 40);
static_assert(offsetof(ingero_call_rec, regs) == 48);
static_assert(offsetof(ingero_call_rec, stack) == 96);
static_assert(offsetof(ingero_call_rec, off_cpu_ns) == 144);
static_assert(offsetof(ingero_call_rec, flags) == 176);
static_assert(offsetof(ingero_call_rec, comm) == 184);
static_assert(offsetof(ingero_call_rec, return_buf) == 216);
static_assert(offsetof(ingero_call_rec, entry_buf) == 248);
static_assert(INGERO_CALL_REC_SHORT == 248);
static_assert(sizeof(ingero_recipe) == 24, "ingero_recipe layout changed");
static_assert(offsetof(ingero_recipe, entry_read) == 8);
static_assert(offsetof(ingero_recipe, return_read) == 16);
static_assert(sizeof(ingero_ptr_read) == 8);
static_assert(sizeof(ingero_libwatch_rec) == 40);

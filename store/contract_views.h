// The views a trace file is read through.
//
// The contract views (calls, host_events, tcp_events, stacks) are the store's own. The
// backends add theirs (cuda_events, hip_events, nccl_events, rdma_counters, ...; each declares
// them through hal::VendorBackend::views(), and the app hands the registry's list in).
//
// Every view is defined twice: in the file, for external tools, and as a TEMP view installed
// by the reader, which shadows the file's and so always matches this build — for our files of
// any version and for the original Go implementation's files alike (store/legacy_views.h).
#pragma once

#include <functional>
#include <span>
#include <string>

#include "hal/result.h"
#include "hal/side_channel.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Contract views; `temp` creates them as TEMP VIEWs shadowing the file's own.
// `stack_table`: the file has stack_frames (schema 4+); `legacy_stack_table`: it has the
// original implementation's stack_traces (its own files, or merged ones). Neither: the stacks
// view is empty.
// `has_column` (default: all) says which events columns exist: older files opened read-only
// lack the newer optional ones, which the views then read as NULL.
// `call_store`: the file keeps calls in its call store (schema 10, store/call_store.h).
// `kernel_table`: the file has kernel_names (store/kernel_names.h), which names the launches of
// `calls` (its `kernel` column; NULL without it).
std::string contract_views_sql(bool temp, bool stack_table = true, bool legacy_stack_table = false,
                               const std::function<bool(const std::string&)>& has_column = {},
                               bool call_store = false, bool kernel_table = true);
// The `stacks` view: one row per frame, innermost first, joinable as
// stacks.stack_id = calls.stack_hash. Over stack_frames and/or stack_traces, or empty with the
// same columns.
std::string stacks_view_sql(const char* create, bool stack_table, bool legacy_table);

// Creates the backends' views in main or (`temp`) as TEMP views, each replacing an older view
// of its name. A view named like a table of the file is left out (the file's own table wins:
// rdma_counters in files of schema 3-5), and so is one that cannot be read over this file (it
// names a table the file lacks: device_counters in the original implementation's files).
ingero::Status install_vendor_views(Db& db, bool temp, std::span<const hal::SqlView> views);

// Files of schema 3-5 hold their RDMA counters in an rdma_counters table. Read-only, they get
// a TEMP device_counters view over it; migrated, its rows move into device_counters. A no-op
// for files that have device_counters or no rdma_counters table.
inline constexpr const char* kRdmaCountersAsDeviceCounters =
    "SELECT id, node, session_id, timestamp, 'rdma' AS backend, device, port, counter, value,\n"
    "       base_value, unit, is_error,\n"
    "       json_object('transport', transport, 'state', state, 'rate', rate) AS attributes\n"
    "  FROM main.rdma_counters";
ingero::Status install_device_counters_compat(Db& db);

}  // namespace ingero::store

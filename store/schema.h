// The trace file format: tables, contract views, versioning and format detection.
//
// Our files carry PRAGMA application_id = 'INGR' and PRAGMA user_version = schema version,
// mirrored in the schema_version table. Opening a file whose version is newer than this
// build knows is refused with a message naming both versions. Migrations are idempotent
// and run in one transaction.
//
// The contract views (calls, cuda_events, hip_events, nccl_events, host_events, tcp_events)
// are defined twice: in the file, for external tools, and as TEMP views installed by the
// reader, which shadow the file's and so always match this build — for our files of any
// version and for the original Go implementation's files alike (store/legacy_views.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

inline constexpr int kSchemaVersion = 5;
inline constexpr int32_t kApplicationId = 0x494E4752;  // "INGR"

enum class TraceFormat {
  kIngero,    // ours
  kLegacyGo,  // original implementation, schema 0.8 / 0.9
  kEmpty,     // a new or empty SQLite file
};

struct TraceFileInfo {
  TraceFormat format = TraceFormat::kEmpty;
  int schema_version = 0;        // ours
  std::string legacy_version;    // "0.8", "0.9"
  bool legacy_has_node = false;  // 0.9 added events.node
};

// Classifies an open database. A file that is neither ours nor theirs, is not SQLite, or
// is newer than this build is an Error that says which.
ingero::Result<TraceFileInfo> inspect(Db& db);

// Creates or migrates our schema (read-write connection). Refuses legacy and foreign files.
ingero::Status migrate(Db& db);

// Contract views; `temp` creates them as TEMP VIEWs shadowing the file's own.
// `stack_table`: the file has stack_frames (schema 4+); `legacy_stack_table`: it has the
// original implementation's stack_traces (its own files, or merged ones). Neither: the stacks
// view is empty.
// `has_column` (default: all) says which events columns exist: older files opened read-only
// lack the newer optional ones, which the views then read as NULL.
std::string contract_views_sql(bool temp, bool stack_table = true, bool legacy_stack_table = false,
                               const std::function<bool(const std::string&)>& has_column = {});
// The `stacks` view: one row per frame, innermost first, joinable as
// stacks.stack_id = calls.stack_hash. Over stack_frames and/or stack_traces, or empty with the
// same columns.
std::string stacks_view_sql(const char* create, bool stack_table, bool legacy_table);

// Columns of the events table that hold decoded Fields, in Field order.
const std::vector<std::string>& field_columns();

// Well-known source ids, shared with the original implementation's files.
enum SourceId : int {
  kSourceCudaRuntime = 1,
  kSourceNvidiaKernel = 2,
  kSourceHost = 3,
  kSourceCudaDriver = 4,
  kSourceIo = 5,
  kSourceTcp = 6,
  kSourceNet = 7,
  kFirstDynamicSource = 8,
};

}  // namespace ingero::store

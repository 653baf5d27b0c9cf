// The trace file format: tables, contract views, versioning and format detection.
//
// Our files carry PRAGMA application_id = 'INGR' and PRAGMA user_version = schema version,
// mirrored in the schema_version table. Opening a file whose version is newer than this
// build knows is refused with a message naming both versions. Migrations are idempotent
// and run in one transaction.
//
// The views over the tables: store/contract_views.h.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "hal/result.h"
#include "hal/side_channel.h"
#include "store/sqlite_db.h"

namespace ingero::store {

inline constexpr int kSchemaVersion = 11;
// The first schema that keeps calls in blocks (store/call_store.h) rather than rows of `events`.
inline constexpr int kFirstCallStoreSchema = 10;
// The first that keeps host events in blocks (store/host_store.h) rather than rows of a table
// `host_rows`; a writer converts a schema 10 file in place (migrate()).
inline constexpr int kFirstHostStoreSchema = 11;
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

// A file of this build's schema lacking a table every such file has (dropped by hand, a copy
// cut short): an Error naming it. Readers would otherwise read such a file as an empty one
// (`status`: "nothing was stuck"; `compact`: done). Other formats: nothing to say.
ingero::Status check_tables(Db& db, const TraceFileInfo& info);
// A write interrupted in rollback-journal mode (a killed compact; a tracer killed while it
// created the file) leaves PATH-journal "hot": a read-only connection refuses the file until a
// read-write one rolls it back. Writers call this first: it rolls the journal back (the file is
// as it was before that write; nothing committed is lost), and does nothing to a file without
// one.
ingero::Status roll_back_interrupted_write(const std::string& path);
// Refuses writing into a file of ours older than schema 10 (calls as rows), naming the way out
// (`ingero compact PATH` converts it); checked before a read-write connection touches it.
ingero::Status check_schema_writable(const std::string& path, const TraceFileInfo& info);

// Creates or migrates our schema (read-write connection), then the contract views and the
// backends' `views` (store/contract_views.h). Refuses legacy and foreign files.
ingero::Status migrate(Db& db, std::span<const hal::SqlView> views = {});

// The CREATE TABLE of `events` (schema <= 9: calls and host events) under `table` (schema 10
// kept host events in a table `host_rows` of the same columns). `untimed_calls`: its duration
// may be NULL (a call seen at entry only: `export --format sqlite`).
std::string events_ddl(const std::string& table, bool untimed_calls = false);

// Columns of the events table that hold decoded Fields, in Field order.
const std::vector<std::string>& field_columns();

// The events table's generated columns (the original implementation's names), with their
// expressions: the table declares them, and the view over archived calls computes them.
struct GeneratedColumn {
  const char* name;
  const char* expr;
};
inline constexpr GeneratedColumn kEventGeneratedColumns[] = {
    {"gpu_id", "coalesce(device, 0)"},
    {"arg0", "coalesce(bytes, func, count, 0)"},
    {"arg1", "coalesce(direction, 0)"},
};

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

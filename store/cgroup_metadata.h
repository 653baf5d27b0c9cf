// cgroup_metadata: each cgroup a session saw, its path and who it belongs to (docs/schema.md).
// The name columns after schema 9's table (container_name, pod_uid, qos_class, runtime,
// names_from) are added where missing, without a new schema version: a file written before
// them gains them, NULL in its rows, and readers of older files (ours or the original
// implementation's) see them as unknown.
#pragma once

#include <cstdint>
#include <map>

#include "engine/trace_source.h"
#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// The columns cgroup_metadata gained after schema 9, each TEXT, NULL when unknown.
inline constexpr const char* kCgroupNameColumns[] = {"container_name", "pod_uid", "qos_class",
                                                     "runtime", "names_from"};

// Adds the columns the file's cgroup_metadata lacks (inside migrate()'s transaction).
ingero::Status add_cgroup_name_columns(Db& db);

// Every row, as the engine reads them; a column the file lacks reads as unknown ("").
ingero::Result<std::map<uint64_t, engine::CgroupInfo>> read_cgroups(Db& db);

}  // namespace ingero::store

// The names of the kernels launches ran, stored once: kernel_names holds one row per (node,
// pid, func), the function a launch carries in calls.func (a host stub's address or a driver
// handle) and its name, demangled and as the binary spells it, with where the tracer found it
// (hal/kernel_names.h). The calls view joins it as calls.kernel; the rows of calls themselves
// carry no name. The sessions row counts what could not be named (docs/schema.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/trace_source.h"
#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Creates kernel_names and the sessions columns that count naming, where missing (migrate()).
ingero::Status migrate_kernel_names(Db& db);

// Every name of the file, or of one node's processes; empty for files without the table.
ingero::Result<std::vector<engine::KernelNameInfo>> read_kernel_names(
    Db& db, const std::optional<std::string>& node = std::nullopt);
// The sessions' naming counters summed (of one node's sessions); nullopt for files written
// before them.
ingero::Result<std::optional<engine::KernelNaming>> read_kernel_naming(
    Db& db, const std::optional<std::string>& node = std::nullopt);

}  // namespace ingero::store

// Rows of one table carried from one trace file to another as they are (merge, and the
// conversion of an older file): per-process aggregates, device counters, stored chains, cgroup
// names. Whatever the source's layout, by the columns both sides have.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Copies the rows of `table` as `from` reads it (its table, or a view giving an older layout
// the table's columns) into the table of that name in `to`, by the columns both have. An
// integer `id` key is given anew; `session_id`, where both have it, becomes `session`; only the
// rows of `node` are copied where the source has a node column and `node` is given, and their
// node is `as_node` where that is given (a node renamed by merge). A row whose
// key `to` already holds is left as it is there (INSERT OR IGNORE), but for a causal chain given
// a `session`, kept as ID@SESSION. A table `from` or `to` lacks copies nothing. Returns the rows
// copied.
ingero::Result<uint64_t> copy_rows(Db& from, Db& to, const std::string& table,
                                   const std::optional<std::string>& node,
                                   std::optional<int64_t> session, const std::string& as_node = "");

}  // namespace ingero::store

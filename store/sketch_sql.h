// SQL functions over quantile sketch blobs (engine/quantile_sketch.h), so a query can merge
// per-second sketches and read quantiles without leaving SQLite. Db::open registers them on
// every connection it opens.
//
//   sketch_quantile(blob, q)  scalar    the q-quantile estimate, INTEGER. NULL when blob or q
//                                       is NULL. Error "damaged sketch" when blob is not a
//                                       sketch serialize() wrote (a non-BLOB value included),
//                                       an error when q is not a number in [0, 1], and an
//                                       error when the estimate is above INT64_MAX.
//   sketch_merge(blob)        aggregate the sketch of all the rows' values, as a blob. NULL
//                                       rows are skipped; NULL when no row has a sketch. Error
//                                       "damaged sketch" for any damaged row, and an error
//                                       when the merged count would pass kMaxCount.
//   sketch_count(blob)        scalar    how many values the sketch holds, INTEGER. NULL for
//                                       NULL; error "damaged sketch" as above.
//
// All three are SQLITE_DETERMINISTIC (usable in indexes and generated columns) and
// SQLITE_INNOCUOUS (usable from the schema under PRAGMA trusted_schema = OFF): they read
// only their arguments. Error messages start with the function's name.
#pragma once

#include <sqlite3.h>

#include <optional>

#include "engine/quantile_sketch.h"

namespace ingero::store {

// Registers the functions above on `db`. Registration fails only when SQLite is out of
// memory; the functions are then missing, and a query that uses them fails with "no such
// function".
void register_sketch_functions(sqlite3* db);

// The sketch in column `col` of the current row of `st`; nullopt when it is not a valid one.
std::optional<engine::QuantileSketch> sketch_column(sqlite3_stmt* st, int col);

}  // namespace ingero::store

// The trace's op dictionary: every (source, op) pair a call or host event row carries, and what
// it names (vendor, API, op name, kind), read by joining `sources` and `ops`. Each reader of
// rows keeps it in the form it needs; this reads it once for each.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct OpEntry {
  int64_t source = 0, op = 0;
  std::string_view vendor, api, name, kind;  // valid during the visit only
};

// Visits every entry whose source `vendors` picks: kAll, kCalls (every vendor but host) or
// kHost. An Error when SQLite fails.
enum class OpVendors { kAll, kCalls, kHost };
ingero::Status for_each_op(Db& db, OpVendors vendors,
                           const std::function<void(const OpEntry&)>& fn);

}  // namespace ingero::store

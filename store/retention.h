// Retention for a long-running trace (schema 11): the oldest time-series rows (system
// snapshots, process stats, device counters, call summaries) are deleted in bounded batches,
// and calls and host events by whole blocks once every event of a block is past the policy, by
// age (--retain) and while the file and its WAL outgrow a size (--max-db-size). Sessions,
// dictionaries and stacks stay. The freed pages go back to the file system (files are created
// with incremental auto-vacuum), and the WAL is truncated where no reader holds it.
//
// What went is recorded in `retention_state` (calls, host events, the time range), which every
// reader reports (engine::TraceLosses).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct RetentionPolicy {
  int64_t retain_ns = 0;   // keep rows newer than this (0: by age, keep everything)
  uint64_t max_bytes = 0;  // keep the used pages under this (0: no limit)
  // Tables a shipper copies elsewhere, each with the id up to which it has: the policy holds
  // all the same, and the rows deleted above it are counted (RetentionPass::unshipped).
  std::map<std::string, int64_t> shipped_through;
  bool active() const { return retain_ns > 0 || max_bytes > 0; }
};

struct RetentionPass {
  uint64_t deleted = 0;      // rows and calls deleted by this pass, every table
  uint64_t calls = 0;        // of them, calls
  uint64_t host_events = 0;  // of them, host events
  int64_t first_ts = 0;      // the start of the oldest call deleted (0: none)
  uint64_t unshipped = 0;    // of them, rows of a shipped table above its shipped_through
  uint64_t used_bytes = 0;   // used pages after it
  bool more = false;         // the budget ran out: rows past the policy remain for the next pass
};

// One bounded pass on the writer's connection, outside a transaction: at most `budget` rows
// per table, then up to the freed pages are handed back. `now_ns` is wall time (epoch ns).
ingero::Result<RetentionPass> apply_retention(Db& db, const RetentionPolicy& p, int64_t now_ns,
                                              uint64_t budget = 20000);

// Used bytes of the database: (page_count - freelist_count) * page_size.
ingero::Result<uint64_t> used_bytes(Db& db);
// The size of the file's WAL (0 when it has none).
uint64_t wal_bytes(const std::string& path);

}  // namespace ingero::store

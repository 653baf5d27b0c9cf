// Named reads of a trace file besides its events (store/event_rows.h): what merge, the MCP
// tools and the report read. SQL about the file's tables stays in store/; every loop checks
// SQLite's final code, so a damaged file is an Error, never a short answer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/trace_source.h"
#include "hal/result.h"
#include "hal/stack_frame.h"
#include "store/trace_writer.h"

namespace ingero::store {

class Db;

using NodeFilter = std::optional<std::string>;  // nullopt: every node

// Distinct node names of the events (files without a node column: none).
ingero::Result<std::vector<std::string>> read_nodes(Db& db);
// The first event's timestamp (Unix ns), if any.
ingero::Result<std::optional<int64_t>> first_event_ns(Db& db);

struct ProcessNameRow {
  uint32_t pid = 0;
  std::string name, cmdline;
};
ingero::Result<std::vector<ProcessNameRow>> read_process_names(Db& db, const NodeFilter& node);
ingero::Result<std::vector<SnapshotRow>> read_snapshots(Db& db, const NodeFilter& node);
// What the sessions of `node` lost, each counter summed as stored (0 where the file has no
// such column). `by_kind`: the file has per-kind drop counters (schema >= 5); before, only
// ringbuf_drops, drops of every kind.
// (late_libraries is left empty: read_late_libraries reads them.)
struct LossSums : engine::TraceLosses {
  uint64_t unfinished_calls = 0;
};
ingero::Result<LossSums> read_loss_sums(Db& db, const NodeFilter& node);
// The same as a session's counters: drops of unknown kind count as call drops, as explain
// counts them.
ingero::Result<SessionCounters> read_losses(Db& db, const NodeFilter& node);
// When `node`'s sessions stopped (the latest), else its last event's start; 0 when neither.
ingero::Result<int64_t> read_stopped_at(Db& db, const NodeFilter& node);
// The libraries of `node`'s sessions attached while a process had them mapped (late_pid <> 0).
ingero::Result<std::vector<LibraryRow>> read_late_libraries(Db& db, const NodeFilter& node);

// The identities of `node`'s sessions (all sessions when the file has no node column; their
// node is then ""), in id order. A session of a merged file stands for the source sessions
// it holds (merged_sessions); files without a host column give host "". Empty when the file has
// no sessions table.
ingero::Result<std::vector<SessionIdentity>> read_session_identities(Db& db,
                                                                     const NodeFilter& node);

// Our stacks (stack_frames), each with its frames innermost first, in id order.
ingero::Status for_each_stack(
    Db& db, const std::function<ingero::Status(uint64_t, const std::vector<hal::StackFrame>&)>& fn);
// The original implementation's stack_traces rows (hash, ips, frames as stored).
struct LegacyStackRow {
  int64_t hash = 0;
  std::string ips, frames;
};
ingero::Status for_each_legacy_stack(
    Db& db, const std::function<ingero::Status(const LegacyStackRow&)>& fn);

}  // namespace ingero::store

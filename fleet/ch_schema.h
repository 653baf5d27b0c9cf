// The ClickHouse side of a trace: one table per kind of row the agent stores, how each column
// is read from the trace file (the spool), and the DDL, valid on ClickHouse 18.16 and current
// versions: MergeTree, PARTITION BY the UTC day of the row's time, ORDER BY (node, pid, ts)
// where rows have a process and a time. Times are Unix ns in UInt64 (18.16 has no DateTime64);
// strings are plain String (no LowCardinality). docs/fleet.md shows the DDL.
//
// The columns are the store's (store/table_defs.h: each column once, with its ClickHouse type):
// a column added to a table of the trace file is shipped, created and added to existing
// databases (ensure_schema) without a change here. ch_schema.cc says only what the store cannot
// (a fleet row's head, the names joined into events, ship mode, order and partition).
//
// Every row carries `node`. Rows shipped by trace-file row id also carry `file_start` (the
// start, Unix ns, of the file's first session: with the node it names the file for good, even
// when a file of the same name is re-created) and `src_id` (the row's id in that file): the
// shipper resumes from max(src_id) per (node, file_start, table). Rows of a session carry
// `session_start` (the session's start, Unix ns): (node, session_start) names a session
// across the fleet.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ingero::fleet {

inline constexpr uint64_t kNsPerDay = 86'400'000'000'000ULL;

// events.nested_op in ClickHouse: the name of the first call folded into a call (the file keeps
// its source and op ids), '' for none; the SQL that reads it from a file's row.
inline constexpr const char* kNestedOpName =
    "coalesce((SELECT name FROM ops no WHERE no.source_id = e.nested_source AND "
    "no.op_id = e.nested_op), '')";

// How the shipper finds the rows of a table that ClickHouse does not have yet.
enum class ShipMode : uint8_t {
  kRowid,      // rows with a trace-file id above the high-water mark, in id order
  kSessions,   // one row per session, shipped when it starts and again when it stops
  kChains,     // a stopped session's causal chains, all in one insert
  kStacks,     // stacks not shipped for this node yet (content-addressed by stack_id)
  kProcesses,  // (node, pid) whose seen_at is newer than the newest shipped
  kCgroups,    // cgroup ids not shipped for this node, or whose path changed
};

struct ColumnSpec {
  std::string name;    // ClickHouse column
  std::string type;    // ClickHouse type
  std::string source;  // SQLite expression over the table's FROM clause
};

struct TableSpec {
  std::string name;
  ShipMode mode = ShipMode::kRowid;
  std::vector<ColumnSpec> columns;
  std::string engine = "MergeTree";
  std::string partition;            // PARTITION BY expression; "" = one partition
  std::string order_by;             // ORDER BY tuple
  std::string day_column;           // the column whose UTC day is the partition; "" = none
  std::string source_from;          // SQLite FROM clause (aliases used by `source`)
  std::string source_id;            // SQLite expression of the row id (kRowid)
  std::string column_list() const;  // "node, ts_ns, ..."
  int column_index(std::string_view column) const;  // -1 when absent
};

// Every table, in shipping order (sessions first: readers need a session's clock offset).
const std::vector<TableSpec>& fleet_tables();
const TableSpec* find_table(std::string_view name);

// CREATE DATABASE and CREATE TABLE IF NOT EXISTS for the tables the shipper writes, then the
// contract views (calls, host_events).
std::vector<std::string> local_ddl(const std::string& db);
// Tables of engine Distributed in `db` with the same names and columns, over `shard_db` on
// every shard of `cluster` (sharding key cityHash64(node): one node's rows stay on one shard
// if they are inserted through it), then the views over them.
std::vector<std::string> distributed_ddl(const std::string& db, const std::string& cluster,
                                         const std::string& shard_db);
// The contract views of a trace file, over `db`.events: calls, host_events (and rdma_counters
// over device_counters), in the order of view_names().
std::vector<std::string> views_ddl(const std::string& db);
const std::vector<std::string>& view_names();
// A view of that name the database has, with these columns (name -> ClickHouse type, as
// system.columns lists them), was made by a build whose definition differs from this build's:
// ensure_schema() makes it anew (a view holds no rows).
bool view_outdated(const std::string& view, const std::map<std::string, std::string>& columns);

// The views' columns are those of the trace file's views (store/contract_views.h) that a
// fleet row has; the store's mapping of a view row to an event (store/event_columns.h) reads
// them by name.
enum class View { kCalls, kHostEvents };
std::vector<std::string> view_column_names(View v);
// The view's SELECT over `db`.events, with `condition` (SQL over the events columns) added to
// its WHERE: what the views hold, as this build defines them (a database's views were created
// by the build that set it up), with the filter where ClickHouse can prune partitions by it.
std::string view_select(const std::string& db, View v, const std::string& condition = "");

}  // namespace ingero::fleet

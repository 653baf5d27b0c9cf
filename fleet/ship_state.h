// What ClickHouse already holds of one trace file: the shipper's resume point. It is never
// stored locally: it is read back from ClickHouse when the shipper starts and after any failed
// insert, so an insert whose answer was lost (it may or may not have been stored) is neither
// repeated nor skipped. An INSERT of one block into one partition is atomic in ClickHouse, so
// "max(src_id) of this file" is exactly where the stored rows end.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fleet/clickhouse_client.h"
#include "fleet/spool.h"
#include "hal/result.h"

namespace ingero::fleet {

struct ShipState {
  bool valid = false;
  std::map<std::string, int64_t> high_water;  // kRowid table -> max src_id stored
  // (node, started_at) -> the largest stopped_at stored (0: stored while running).
  std::map<std::pair<std::string, uint64_t>, uint64_t> sessions;
  // (node, started_at) -> the host and flags of a session stored under that name: another
  // trace's, where they differ from the file's (two files of one node and start).
  std::map<std::pair<std::string, uint64_t>, std::pair<std::string, std::string>> identity;
  // (node, started_at) of the file's sessions that ClickHouse holds under another file's name
  // -> that file's start: this file is a copy or a merge of a file shipped before.
  std::map<std::pair<std::string, uint64_t>, uint64_t> elsewhere;
  // node -> the hosts of every session stored under the file's node names: two hosts traced
  // under one --node are read by a fleet as one machine (Shipper::warn_shared_node).
  std::map<std::string, std::set<std::string>> hosts;
  std::set<std::pair<std::string, uint64_t>> chains;  // sessions whose chains are stored
  std::set<int64_t> stacks;                           // stack ids stored for the origin node
  std::map<std::pair<std::string, uint32_t>, uint64_t> processes;  // (node, pid) -> seen_at
  // (node, id, cgroup_content): a cgroup ships again when its path or a name changed.
  std::set<std::tuple<std::string, int64_t, std::string>> cgroups;
};

// A cgroup_metadata row's columns after node and cgroup_id (path, ids, names), NULL as "",
// joined by \x1f: from the spool, and the same as a ClickHouse expression.
std::string cgroup_content(const SpoolRow& r);
std::string cgroup_content_sql();

// Creates the database and tables if absent (DDL from ch_schema.h), and adds the columns a
// table created by an earlier version lacks (ALTER TABLE ADD COLUMN: ClickHouse 18.16 has no
// IF NOT EXISTS there, so system.columns says which). Errors name the URL and ClickHouse's
// message.
// It makes the views last, after the columns they read, dropping first those an earlier build
// made differently (as drop_outdated_views, from the same read of system.columns).
ingero::Status ensure_schema(ClickHouseClient& client);
// Drops each view of the database (calls, host_events, rdma_counters) whose columns say an
// earlier build defined it differently (ch_schema.h: view_outdated), for its DDL to make it
// anew: CREATE VIEW IF NOT EXISTS kept a database's first definition for ever. Only views: a
// database of an older version may hold a table of a view's name.
ingero::Status drop_outdated_views(ClickHouseClient& client);
ingero::Result<ShipState> read_ship_state(ClickHouseClient& client, const Spool& spool);

// What the inserts of a file's rows are named in ClickHouse (their query_id begins so): the
// shipper of `file_start` (Spool::file_start) tags them this prefix, its pid and a number.
std::string ship_query_prefix(uint64_t file_start);
// Waits until no query whose id begins with `prefix` is running on the server, up to
// `wait_ms` (or the client's deadline), then has ClickHouse kill any still running (KILL
// QUERY ... SYNC). An insert cut off
// by a timeout, a stalled server or a killed shipper may still be running there, and land
// after the resume point is read: its rows were stored twice (a SIGSTOPped server, resumed as
// `ingero ship` ran again). So the resume point is read only once no earlier insert of the
// file runs. An error where the server does not say.
ingero::Status await_inserts_in_flight(ClickHouseClient& client, const std::string& prefix,
                                       int wait_ms);

// SQL list literal of strings: ('a', 'b').
std::string sql_string_list(const std::vector<std::string>& values);

}  // namespace ingero::fleet

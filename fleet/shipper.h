// Ships a trace file to ClickHouse, in the background while `ingero trace` writes it, or once
// (`ingero ship`). The trace file is the spool: nothing is queued in memory, so a slow or
// absent ClickHouse never holds up the BPF consumer (the tracer only writes SQLite), and
// nothing is lost while ClickHouse is down: rows wait in the file.
//
// Exactly once: rows are shipped in batches from a resume point read back from ClickHouse
// (ship_state.h) when the shipper starts and after any failure, and a batch never spans two
// partitions (an INSERT of one block into one partition is atomic). A batch counts as shipped
// only once ClickHouse confirms it holds it (ship_confirm.h): an INSERT answered 200 by
// something that stored nothing is a failure, said, retried, and nothing is folded past what
// ClickHouse holds. Failures are retried with exponential backoff. One shipper per file at a
// time: a lock file FILE.ship.lock says so.
//
// Bodies are RowBinary (row_binary.h), gzip-compressed; the `events` of a file of schema 10
// are read straight from its call blocks (block_rows.h).
//
// Threads: start() runs the loop on its own thread; stop() ends it (interrupting a backoff
// wait) and closes the read connection, which the tracer needs before it checkpoints the file.
// drain() runs in the caller's thread, only while the loop is stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "fleet/block_rows.h"
#include "fleet/clickhouse_client.h"
#include "fleet/row_batch.h"
#include "fleet/ship_confirm.h"
#include "fleet/ship_state.h"
#include "fleet/spool.h"

namespace ingero::fleet {

struct ShipperOptions {
  int interval_ms = 1000;          // between passes once caught up
  size_t batch_rows = 100000;      // rows per INSERT, at most
  size_t batch_bytes = 32u << 20;  // RowBinary bytes per INSERT, at most (before compression)
  int backoff_min_ms = 500, backoff_max_ms = 10000;
  ClientOptions client;
  // Messages for people (a failure, recovery); nullptr = none.
  std::function<void(const std::string&)> log;
};

struct ShipTotals {
  uint64_t rows = 0, batches = 0, failures = 0, resyncs = 0;  // rows, batches: confirmed
  uint64_t unconfirmed = 0;  // INSERTs answered with success that ClickHouse did not confirm
  // Of them, those whose read-back got no answer (a timeout, a reset): maybe stored, maybe not.
  uint64_t unread = 0;
  // How the confirmed batches were confirmed: X-ClickHouse-Summary, or a read-back.
  uint64_t confirmed_by_summary = 0, read_back = 0;
  uint64_t bytes_sent = 0, bytes_raw = 0;  // request bodies after / before gzip
  std::string last_error;                  // of the latest failure; "" after a success
};

struct DrainReport {
  bool caught_up = false;  // everything in the file is in ClickHouse
  uint64_t unshipped = 0;  // rows of the file not (known to be) in ClickHouse
  std::string last_error;  // why not, when not caught up
  bool logged = false;     // last_error went to ShipperOptions::log already
};

class Shipper {
 public:
  // The file must exist. `client` may be a test double; nullptr = a real client.
  static ingero::Result<std::unique_ptr<Shipper>> create(
      const std::string& db_path, const Endpoint& endpoint, ShipperOptions options = {},
      std::unique_ptr<ClickHouseClient> client = nullptr);
  ~Shipper();

  void start();
  void stop();
  // No ClickHouse request of this shipper runs past `deadline`, one in flight included (the
  // tracer's exit: stop() then drain() within one bound). Any thread.
  void set_deadline(std::chrono::steady_clock::time_point deadline) {
    client_->set_deadline(deadline);
  }
  // Ships until caught up or `budget` has passed (retrying with backoff; every request ends
  // within it), or until ClickHouse refuses for good (ClickHouseClient::refused_for_good),
  // then counts what is left. An error only when the file itself cannot be read.
  // `unreachable_tries` > 0 also ends it once that many passes in a row found ClickHouse
  // unreachable (nothing left this host: refused, unresolved): the tracer's exit waited out
  // its whole --clickhouse-exit-timeout for a server that was not there.
  DrainReport drain(std::chrono::milliseconds budget, int unreachable_tries = 0);
  ShipTotals totals() const;
  // The file's `events` rows up to this id are in ClickHouse (0 until ClickHouse answered).
  // The tracer folds no row above it (store/tiers.h): every call reaches ClickHouse as its own
  // row before it can be folded into a run, however long ClickHouse was away.
  int64_t events_shipped_through() const { return shipped_through("events"); }
  // The same for each table shipped by id (events, libraries, system_snapshots, process_stats,
  // device_counters); 0 for the others. Retention counts the rows it deletes above it.
  int64_t shipped_through(const std::string& table) const;
  std::map<std::string, int64_t> shipped_through_all() const;
  const Endpoint& endpoint() const { return client_->endpoint(); }

 private:
  Shipper(std::string path, ShipperOptions o, std::unique_ptr<ClickHouseClient> c, int lock_fd);
  using Deadline = std::chrono::steady_clock::time_point;
  void loop();
  // One pass: true when caught up, false when the deadline cut it short.
  ingero::Result<bool> pass(Deadline deadline);
  ingero::Status ship_sessions();
  ingero::Status ship_rowid(const TableSpec& t, Deadline deadline, bool& done);
  // The next batch of `t` above `after`: from call blocks where it can, else through SQL.
  ingero::Status next_rowid_batch(const TableSpec& t, int64_t after, RowBatch& out);
  ingero::Status ship_stacks(Deadline deadline, bool& done);
  ingero::Status ship_processes();
  ingero::Status ship_cgroups();
  ingero::Status ship_chains();
  // Sends `body` (RowBinary rows of `t`), then reads it back: OK once ClickHouse holds it.
  ingero::Status insert(const TableSpec& t, std::string_view body, const BatchKey& key);
  const std::vector<ChType>& types(const TableSpec& t);
  void reset_spool();
  ingero::Result<uint64_t> pending();
  // `retried`: whether the caller tries again (said in the log).
  void note_failure(const std::string& message, bool retried);
  void note_success();
  void warn_folded_unshipped();
  // Says, once per file, which hosts other than the file's ClickHouse holds sessions of under
  // the file's node names: a fleet reads them as one node (pids, clocks and stacks mixed).
  void warn_shared_node();
  // An Error where ClickHouse holds, under one of the file's sessions' names (node, start),
  // another trace's session (another host or flags): its rows would be taken for the file's.
  ingero::Status same_trace() const;
  uint64_t shared_node_warned_for_ = 0;  // the file_start warn_shared_node spoke for

  std::string path_;
  ShipperOptions opts_;
  std::unique_ptr<ClickHouseClient> client_;
  int lock_fd_ = -1;
  std::unique_ptr<Spool> spool_;
  // The events of spool_'s call blocks (null: read through SQL; tried once per spool).
  std::unique_ptr<BlockRows> block_rows_;
  bool block_rows_tried_ = false;
  RowBatch batch_;  // reused: its storage stays between batches
  std::map<std::string, std::vector<ChType>> types_;
  ShipState state_;
  uint64_t state_file_ = 0;          // file_start the state belongs to
  std::string logged_error_;         // the failure note_failure() last logged
  int64_t stacks_seen_frames_ = -1;  // frame count when stacks were last caught up
  uint64_t state_reads_ = 0;         // resume points read: a part of the inserts' query_id
  bool failing_ = false;
  uint64_t folding_warned_for_ = 0;  // file_start of the file last warned about
  // Per table shipped by id: the high water, readable from other threads (the map's keys are
  // fixed at construction).
  std::map<std::string, std::atomic<int64_t>> through_;

  mutable std::mutex mu_;
  ShipTotals totals_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ingero::fleet

// The trace file as the shipper's spool: a read-only connection to the SQLite file that
// `ingero trace` writes (WAL mode lets it read while the tracer writes, without blocking it),
// and the encoding of its rows as ClickHouse TabSeparated rows of the tables in ch_schema.h.
//
// The file is named for good by (origin node, file_start): the node and start of its first
// session. Rows are never modified here; the file is never written.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fleet/ch_schema.h"
#include "fleet/row_binary.h"
#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::fleet {

struct SpoolSession {
  int64_t id = 0;
  std::string node;
  uint64_t started_at = 0, stopped_at = 0;
  std::string host, flags;  // which trace it is, beside its name (node, started_at)
};

// One row of a spool query, as the shipper filters it.
class SpoolRow {
 public:
  explicit SpoolRow(sqlite3_stmt* s, const TableSpec& t) : s_(s), t_(t) {}
  int64_t int64(int col) const { return sqlite3_column_int64(s_, col); }
  std::string text(int col) const;
  bool is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  // Appends the row in RowBinary (row_binary.h); `types` are the table's column types.
  void append_row_binary(std::string& out, const std::vector<ChType>& types) const;

 private:
  sqlite3_stmt* s_;
  const TableSpec& t_;
};

class Spool {
 public:
  // Read-only. Refuses files that are not ours (the original implementation's files, foreign
  // SQLite files), naming the path.
  static ingero::Result<std::unique_ptr<Spool>> open(const std::string& path);

  // Re-reads the session list. A file with no session yet has nothing to ship.
  ingero::Status refresh();
  const std::vector<SpoolSession>& sessions() const { return sessions_; }
  uint64_t file_start() const { return sessions_.empty() ? 0 : sessions_.front().started_at; }
  const std::string& origin_node() const;
  // The nodes the file's rows carry, sorted: its sessions', and as of the last
  // refresh_nodes(), those of rows whose node no session has (an older file's snapshots and
  // process names under the host's own name). What was shipped is read back by these: rows of
  // the others were shipped again on every run, and said not to have been stored.
  std::vector<std::string> nodes() const;
  // Reads the nodes of every table but `events` (small tables; once per resync).
  ingero::Status refresh_nodes();
  // Whether the path now names another file than the one open (deleted and re-created).
  bool replaced() const;
  bool has_table(const TableSpec& t) const;

  // Runs SELECT <t's columns> FROM <t's source> <tail> with the named parameters bound
  // (":file_start" and ":node" are bound here) and calls `fn` per row until it returns false.
  // `main_from`, where given, replaces the source's main table ("events e" -> "main.host_rows
  // e": the same columns from one of the tables under a view).
  using RowFn = std::function<bool(const SpoolRow&)>;
  ingero::Status select(const TableSpec& t, const std::string& tail,
                        const std::map<std::string, int64_t>& params, const RowFn& fn,
                        const std::string& main_from = "");
  // The file's SQLite connection (read-only), for readers of its call blocks (call_rows.h).
  store::Db& db() { return *db_; }
  // Rows of a kRowid table with id > after.
  ingero::Result<uint64_t> count_after(const TableSpec& t, int64_t after);
  // Distinct stack ids in the file, and the number of frames (cheap change detection).
  ingero::Result<std::vector<int64_t>> stack_ids();
  ingero::Result<int64_t> frame_count();
  // What tiered retention folded (store/tiers.h): calls taken out of `events` into runs, and
  // the last event row it looked at; zeros when it folded nothing.
  struct Folding {
    uint64_t calls = 0;
    int64_t through_id = 0;
  };
  ingero::Result<Folding> folding();
  const std::string& path() const { return path_; }

 private:
  Spool(std::unique_ptr<store::Db> db, std::string path, dev_t dev, ino_t ino)
      : db_(std::move(db)), path_(std::move(path)), dev_(dev), ino_(ino) {}
  std::string select_sql(const TableSpec& t, const std::string& main_from) const;
  ingero::Status follow_archive();  // install the archive view once blocks exist
  std::unique_ptr<store::Db> db_;
  std::string path_;
  dev_t dev_;
  ino_t ino_;
  std::vector<SpoolSession> sessions_;
  std::set<std::string> row_nodes_;  // refresh_nodes()
  std::map<std::string, std::string> select_cache_;
};

}  // namespace ingero::fleet

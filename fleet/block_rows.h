// The `events` rows of a trace file of schema 10, read for shipping straight from its call
// blocks (store/call_store.h): each block is decoded once (store::ArchiveScan, which checks it
// against its entry) and its calls are written as RowBinary rows of the ClickHouse `events`
// table, with no SQLite row, view or join per call. Host events come through SQL (the view
// host_rows: rows of schema 10, blocks of host_store since schema 11, read by the table
// ingero_host with the id bound pushed down); the two are merged in id order (one id space).
//
// The rows are the ones the file's `events` view gives (the SQL path, Spool::select), byte for
// byte: the calls of a block while it has all of them (`full`), else the calls folding kept.
// Each ClickHouse column is produced from its source expression in ch_schema.h; a column whose
// source this reader does not know makes create() fail, and the shipper then reads `events`
// through SQL (slower, never wrong).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fleet/ch_schema.h"
#include "fleet/row_batch.h"
#include "fleet/row_binary.h"
#include "fleet/spool.h"
#include "hal/result.h"
#include "store/archive_scan.h"

namespace ingero::fleet {

class BlockRows {
 public:
  // For `events` of the file open in `spool`. An Error when the file keeps no call blocks, or
  // when a column of `t` cannot be read from them (it says which).
  static ingero::Result<std::unique_ptr<BlockRows>> create(Spool& spool, const TableSpec& t);

  // Puts in `out` (cleared first) the rows with id > after, in id order, within `limits` and
  // one UTC day: true. False when the blocks' ids are not ascending (a file this reader does
  // not understand: read it through SQL). An Error when the file cannot be read (a damaged
  // block is named).
  ingero::Result<bool> next_batch(int64_t after, const BatchLimits& limits, RowBatch& out);

 private:
  enum class From : uint8_t {
    kBlock,         // a column of the call block
    kNull,          // none: NULL (detail, saddr, daddr of a call)
    kFileStart,     // the file's start
    kVendor,        // of the call's source
    kApi,           //
    kKind,          // of the call's op
    kOp,            //
    kSessionStart,  // of the call's session (0 without one)
    kNestedOp,      // the name of the first call folded into it ('' for none)
  };
  struct Column {
    From from = From::kNull;
    size_t wanted = 0;  // kBlock: its index among the columns the scan reads
    ChType type;
  };
  BlockRows(Spool& spool, const TableSpec& t) : spool_(spool), t_(t) {}
  ingero::Status load_names();  // sources, ops, sessions: small tables, read per batch
  ingero::Status host_rows(int64_t after, size_t limit);
  // The names of a source or an op the file's dictionary lacks: empty.
  static inline const std::pair<std::string, std::string> kNoName;
  // The source and op names of the call written last, kept while the next call shares them.
  struct NameCache {
    int64_t source_id = -1, op_id = -1;
    const std::pair<std::string, std::string>* source = &kNoName;
    const std::pair<std::string, std::string>* op = &kNoName;
  };
  // Writes the scan's current call as a row of the table, each column from its source.
  void put_call(const store::ArchiveScan& scan, RowBinary& rb, NameCache& names) const;
  Spool& spool_;
  const TableSpec& t_;
  std::vector<ChType> types_;
  std::vector<Column> plan_;
  std::vector<std::string> wanted_;  // block columns the scan reads
  size_t w_id_ = 0, w_ts_ = 0, w_source_ = 0, w_op_ = 0, w_session_ = 0;
  size_t w_nested_source_ = 0, w_nested_op_ = 0;
  int day_col_ = -1, id_col_ = -1;                                  // ClickHouse columns
  std::map<int64_t, std::pair<std::string, std::string>> sources_;  // id -> vendor, api
  std::map<std::pair<int64_t, int64_t>, std::pair<std::string, std::string>> ops_;  // kind, name
  std::map<int64_t, int64_t> sessions_;  // id -> started_at
  // The host rows of the batch being built, encoded: their ids, times and bytes in host_.
  struct HostRow {
    int64_t id, time;
    size_t begin, end;
  };
  std::vector<HostRow> host_index_;
  std::string host_;
};

}  // namespace ingero::fleet

// Host events as the trace writer keeps them (schema 11): a block of up to kHostBlockRows
// events of one node and session, in the columns of a host row (store/column_block.h).
//
// A host event goes from its decoded hal::Event into the block's columns once, as a call does
// (store/call_block.h). The block is written to `host_store` at each commit while it fills, and
// for good once full (store/host_store.h); readers read it back through the eponymous table
// `ingero_host` and the view `host_rows` over it. Host events are never folded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hal/event.h"
#include "store/call_block.h"
#include "store/column_block.h"

namespace ingero::store {

inline constexpr size_t kHostBlockRows = 4096;

// The columns of a host row, in block order: a call row's (store/call_block.h: CallColumn,
// the decoded fields included), then these three, which only host events have.
enum HostColumn : size_t {
  kHostDetail = kCallFirstField + hal::kFieldCount,
  kHostSaddr,
  kHostDaddr,
};
const std::vector<std::string>& host_column_names();

class HostBlock {
 public:
  HostBlock() : cols_(host_column_names()) {}

  // Appends a host event: its id, wall-clock start, the event, and its source and op ids.
  void add(int64_t id, int64_t ts_ns, const hal::Event& ev, int source, int op,
           std::string_view node, int64_t session);

  // Appends a row value by value (a schema 10 file's host rows, converted): set its columns
  // on open_row()'s block, then close_row() with its id, start and end.
  ColumnBlock& open_row() { return cols_; }
  void close_row(int64_t id, int64_t ts, int64_t end) {
    cols_.end_row();
    note(id, ts, end, cols_.rows() == 1);
  }

  size_t size() const { return cols_.rows(); }
  bool empty() const { return cols_.rows() == 0; }
  const ColumnBlock& columns() const { return cols_; }
  int64_t first_id() const { return first_id_; }
  int64_t last_id() const { return last_id_; }
  int64_t first_ts() const { return first_ts_; }
  int64_t last_ts() const { return last_ts_; }  // the greatest start
  int64_t end_ts() const { return end_ts_; }    // the greatest start + duration

  void clear();
  // Keeps the first `rows` events (a batch that failed to commit takes its events back).
  void truncate(size_t rows);

 private:
  void note(int64_t id, int64_t ts, int64_t end, bool first);
  ColumnBlock cols_;
  int64_t first_id_ = 0, last_id_ = 0, first_ts_ = 0, last_ts_ = 0, end_ts_ = 0;
};

}  // namespace ingero::store

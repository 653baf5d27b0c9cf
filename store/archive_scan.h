// The rows of archive blocks (call_blocks or run_blocks, store/call_archive.h) in bounds of
// time and id, block after block: in (timestamp, id) order, merging the blocks whose times
// overlap, or in the blocks' id order. Both readers of the archive use it: the virtual tables
// temp.archived_calls and temp.archived_runs (store/archive_table.h), and EventCursor, which
// reads the calls of a window straight from it (no SQLite row machinery between the decoded
// block and the event).
//
// Each block is checked against its entry (row count, id and time range); a damaged one stops
// the scan with SQLITE_CORRUPT and a message naming the file and the block.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/read_snapshot.h"
#include "store/row_block.h"

namespace ingero::store {

// The integer a field column holds in `row` of `rows` (its block column `col`, -1 where the
// block lacks it), converted as SQLite would; nullopt for NULL.
// (Inline: a read of archived calls asks it of ~20 columns a call.)
std::optional<uint64_t> archived_non_int(const RowBlock& rows, size_t row, int col);
inline std::optional<uint64_t> archived_int(const RowBlock& rows, size_t row, int col) {
  if (col < 0) return std::nullopt;
  int type = rows.type(row, size_t(col));
  if (type == SQLITE_INTEGER) return uint64_t(rows.int64(row, size_t(col)));
  if (type == SQLITE_NULL) return std::nullopt;
  return archived_non_int(rows, row, col);
}

// Which blocks a scan reads, and which of their values: the archive of schema 8-9
// (call_blocks.data, run_blocks.data) or a form of schema 10's call_store (every call, the calls
// folding kept, the runs; store/call_block.h).
struct BlockForm {
  std::string table;   // "main.call_blocks"
  std::string data;    // the blob, an expression over the table's columns: "data"
  std::string rows;    // its row count: "rows"
  std::string filter;  // which blocks hold this form ("" all): "run_data IS NOT NULL"
  // The rows span the entry's id and time range exactly (else they lie within it: a subset of
  // the block's calls).
  bool exact = true;
  std::string label;  // how errors name a block: "archive block"
};

class ArchiveScan {
 public:
  static constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Bounds {  // inclusive
    int64_t lo_ts = kMin, hi_ts = kMax, lo_id = kMin, hi_id = kMax;
    // No block's last timestamp is more than this after its first (where known): a scan in
    // time order lists only the blocks that begin at most this long before lo_ts.
    int64_t max_span = kMax;
  };
  // Over `blocks` ("main.call_blocks" or "main.run_blocks") of `db`, whose file is `path`;
  // errors name a block "<label> <id>". `cols` are the columns wanted, by name; the
  // timestamp and id columns are named `ts_col` and `id_col` among them.
  ArchiveScan(sqlite3* db, std::string blocks, std::string label, std::string path,
              std::vector<std::string> cols, size_t ts_col, size_t id_col);
  // The same over any form of blocks.
  ArchiveScan(sqlite3* db, BlockForm form, std::string path, std::vector<std::string> cols,
              size_t ts_col, size_t id_col);
  ~ArchiveScan();
  ArchiveScan(const ArchiveScan&) = delete;
  ArchiveScan& operator=(const ArchiveScan&) = delete;

  // Lists the blocks that may hold rows in `b` and makes the first such row current.
  // SQLITE_OK, or an SQLite error code (SQLITE_CORRUPT: a damaged block); error() says how.
  int start(const Bounds& b, bool by_ts);
  // The next row; the same codes.
  int next();
  bool eof() const { return cur_ == nullptr; }
  // "<path>: <what is wrong>" after an error.
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

  // The current row (not at eof): its block, its index there, and where the block keeps
  // wanted column `col` (-1: the block lacks it; read it as NULL).
  const RowBlock& rows() const { return cur_->rows; }
  size_t row() const { return cur_->order[cur_->at]; }
  int column(size_t col) const { return cur_->map[col]; }
  // The wanted columns that the current block holds a value of (not wholly
  // NULL there), in order: a reader of many sparse columns looks at these only.
  const std::vector<uint32_t>& live_columns() const { return cur_->live; }
  int64_t ts() const { return cur_->key_ts(); }
  // The current row's wanted columns read as a statement's are: int64(), is_null(),
  // text_view(), by index into the columns wanted; value() as archived_int(). Each reads the
  // column's storage straight (RowBlock::ColumnView), as the block was opened.
  struct Row {
    const ArchiveScan& s;
    const RowBlock::ColumnView* v;  // the wanted columns' (a missing one's: all NULL)
    size_t r;
    std::optional<uint64_t> value(int col) const {
      const RowBlock::ColumnView& c = v[col];
      int type = c.type(r);
      if (type == SQLITE_INTEGER) return uint64_t(c.values[r]);
      if (type == SQLITE_NULL) return std::nullopt;
      return archived_non_int(s.rows(), r, s.column(size_t(col)));
    }
    int64_t int64(int col) const { return int64_t(value(col).value_or(0)); }
    bool is_null(int col) const { return v[col].type(r) == SQLITE_NULL; }
    std::string_view text_view(int col) const {
      const RowBlock::ColumnView& c = v[col];
      int type = c.type(r);
      return type == SQLITE_TEXT || type == SQLITE_BLOB
                 ? std::string_view(c.strings[size_t(c.values[r])])
                 : std::string_view();
    }
  };
  Row current() const { return Row{*this, cur_->views.data(), row()}; }
  int64_t id() const { return cur_->key_id(); }

 private:
  struct Meta {  // a block's entry
    int64_t id, first_ts, rows, last_ts, first_id, last_id;
  };
  // A decoded block being read: its rows in the bounds, in the order given.
  struct Open {
    RowBlock rows;
    std::vector<int> map;                     // wanted column -> block column
    std::vector<RowBlock::ColumnView> views;  // wanted column -> its storage
    std::vector<uint32_t> live;
    int ts = -1, id = -1;  // block columns
    std::vector<uint32_t> order;
    size_t at = 0;
    int64_t key_ts() const { return rows.int64(order[at], size_t(ts)); }
    int64_t key_id() const { return rows.int64(order[at], size_t(id)); }
  };
  static bool later(const std::unique_ptr<Open>& a, const std::unique_ptr<Open>& b);
  // Decoded blocks' storage that this thread's scans left, for its next scans: a read cut in
  // slices opens a scan a slice, and fresh storage for each was faulted in again (~0.4 s of
  // explain at 10 M calls). At most kPooled are kept.
  static constexpr size_t kPooled = 4;
  static std::vector<std::unique_ptr<Open>>& pool();
  int fail(const std::string& why);
  // An SQLite error `rc` while `what`: error() gets SQLite's message.
  int sql_fail(int rc, const std::string& what);
  // Puts an open block's rows in (timestamp, id) order.
  static void sort_rows(Open& o);
  // Decodes block `m`; `out` holds its rows in the bounds, null when none are.
  int open_block(const Meta& m, std::unique_ptr<Open>& out);
  // Makes the next row current: opens every block that could hold a row before the least
  // one open (by id: the next block once the open one is done).
  int advance();

  sqlite3* db_;
  // The listing and every block's load as of one commit, from the first start() to the end of
  // the scan: a live file's filling block is rewritten whole at each commit, and a block
  // listed before a commit and loaded after it held more rows than its entry said and read as
  // damaged. Nothing inside a statement or transaction (a virtual table's scan, the writer's).
  std::optional<ReadSnapshot> snapshot_;
  BlockForm form_;
  std::string path_;
  std::vector<std::string> cols_;
  size_t ts_col_, id_col_;
  sqlite3_stmt* load_ = nullptr;  // a block's data, by id
  std::vector<Meta> metas_;
  size_t next_block_ = 0;
  bool by_ts_ = false;
  Bounds b_;
  std::vector<std::unique_ptr<Open>> heap_;  // by (timestamp, id), least on top
  std::unique_ptr<Open> cur_;                // the row given: cur_->order[cur_->at]
  // Blocks read to the end, kept for the next to decode into: their storage is reused, so a
  // scan of thousands of blocks allocates (and faults in) a few blocks' worth, not each one.
  std::vector<std::unique_ptr<Open>> spare_;
  std::string error_;
};

}  // namespace ingero::store

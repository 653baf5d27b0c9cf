// A table's rows and its archived rows (store/call_archive.h) read as one, in (timestamp, id)
// order: how EventCursor reads calls and RunCursor reads runs. The rows come from a statement
// whose first column is the timestamp and whose last is the id, ordered by them; the archived
// ones straight from their blocks (store/archive_scan.h), started on the bounds given.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "hal/result.h"
#include "store/archive_scan.h"
#include "store/sqlite_db.h"

namespace ingero::store {

class MergedRows {
 public:
  MergedRows() = default;
  // `scan` may be null: `rows` alone.
  MergedRows(std::unique_ptr<Stmt> rows, std::unique_ptr<ArchiveScan> scan,
             const ArchiveScan::Bounds& bounds = {})
      : rows_(std::move(rows)), scan_(std::move(scan)), bounds_(bounds) {}
  explicit operator bool() const { return rows_ != nullptr; }
  bool has_scan() const { return scan_ != nullptr; }

  // The next row of either: true, and archived() says which (row() or scan() is on it, until
  // the next call); false at the end; an Error from SQLite or a damaged block.
  ingero::Result<bool> next() {
    if (side_ != Side::kScan && side_ != Side::kEnd) {  // the rows' side (both at the start)
      auto r = rows_->step();
      if (!r) return r.error();
      row_ready_ = *r;
    }
    if (scan_) {
      int rc = side_ == Side::kNone   ? scan_->start(bounds_, /*by_ts=*/true)
               : side_ == Side::kScan ? scan_->next()
                                      : SQLITE_OK;
      if (rc != SQLITE_OK) return scan_error(rc);
    }
    bool archived = scan_ && !scan_->eof();
    if (!row_ready_ && !archived) {
      side_ = Side::kEnd;
      return false;
    }
    if (row_ready_ && archived) {
      int last = sqlite3_column_count(rows_->get()) - 1;
      archived =
          std::pair(scan_->ts(), scan_->id()) < std::pair(rows_->int64(0), rows_->int64(last));
    }
    side_ = archived ? Side::kScan : Side::kRows;
    return true;
  }
  bool archived() const { return side_ == Side::kScan; }
  const Stmt& row() const { return *rows_; }
  const ArchiveScan& scan() const { return *scan_; }

 private:
  ingero::Error scan_error(int rc) const {
    if (!scan_->error().empty()) return ingero::make_error(scan_->error());
    return ingero::make_error(scan_->path() + ": reading archived rows: " + sqlite3_errstr(rc));
  }
  std::unique_ptr<Stmt> rows_;
  std::unique_ptr<ArchiveScan> scan_;
  ArchiveScan::Bounds bounds_;
  enum class Side { kNone, kRows, kScan, kEnd } side_ = Side::kNone;
  bool row_ready_ = false;
};

}  // namespace ingero::store

// One INSERT's worth of rows of a table shipped by file row id, and how they are read: from
// SQLite rows (any table, any schema), or, for the `events` of a file of schema 10, straight
// from its call blocks (block_rows.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "fleet/ch_schema.h"

namespace ingero::fleet {

// Limits of one batch: rows, bytes of body (before compression).
struct BatchLimits {
  size_t rows = 100000;
  size_t bytes = 32u << 20;
};

struct RowBatch {
  std::string body;  // RowBinary (row_binary.h)
  size_t rows = 0;
  int64_t first_id = 0, last_id = 0;  // the file ids of its first and last row (ascending)
  // The range of the table's day column (ch_schema.h), where it has one.
  int64_t min_time = INT64_MAX, max_time = INT64_MIN;
  bool more = false;  // rows are left after it (a limit, or the next UTC day)

  // Whether a row whose day column holds `time` (`timed`: the table has one) may join the
  // batch. A batch stays within its limits and one UTC day: an INSERT of one block into one
  // partition is atomic. False (and `more` set) when the batch ends before the row.
  bool admit(const BatchLimits& l, bool timed, int64_t time) {
    if (rows >= l.rows || body.size() >= l.bytes ||
        (timed && rows && time / int64_t(kNsPerDay) != day_)) {
      more = true;
      return false;
    }
    return true;
  }
  // The row appended to `body` was file row `id`.
  void added(int64_t id, bool timed, int64_t time) {
    if (!rows) first_id = id;
    last_id = id;
    ++rows;
    if (timed) {
      day_ = time / int64_t(kNsPerDay);
      min_time = std::min(min_time, time);
      max_time = std::max(max_time, time);
    }
  }
  void clear() {
    body.clear();
    rows = 0;
    first_id = last_id = 0;
    min_time = INT64_MAX;
    max_time = INT64_MIN;
    more = false;
    day_ = 0;
  }

 private:
  int64_t day_ = 0;
};

}  // namespace ingero::fleet

// Rows of two statements read as one, in order: how a file's rows and its archived rows
// (store/call_archive.h) are read together. Both statements give rows ordered by (their first
// column, their last column): (timestamp, id).
#pragma once

#include <memory>
#include <utility>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

class MergedRows {
 public:
  MergedRows() = default;
  // `second` may be null: `first`'s rows alone.
  MergedRows(std::unique_ptr<Stmt> first, std::unique_ptr<Stmt> second)
      : a_(std::move(first)), b_(std::move(second)) {}
  explicit operator bool() const { return a_ != nullptr; }

  // The next row: true, and current() is the statement it is on (valid until the next call);
  // false at the end; an Error from SQLite.
  ingero::Result<bool> next() {
    if (!started_) {
      started_ = true;
      if (auto s = step(a_.get()); !s) return s.error();
      if (b_)
        if (auto s = step(b_.get()); !s) return s.error();
    } else if (cur_) {
      if (auto s = step(cur_); !s) return s.error();
    }
    if (!a_row_ && !b_row_) {
      cur_ = nullptr;
      return false;
    }
    if (!b_row_) {
      cur_ = a_.get();
    } else if (!a_row_) {
      cur_ = b_.get();
    } else {
      int last = sqlite3_column_count(a_->get()) - 1;
      auto key = [&](const Stmt& x) { return std::pair(x.int64(0), x.int64(last)); };
      cur_ = key(*b_) < key(*a_) ? b_.get() : a_.get();
    }
    return true;
  }
  const Stmt& current() const { return cur_ ? *cur_ : *a_; }

 private:
  ingero::Status step(Stmt* st) {
    auto r = st->step();
    if (!r) return r.error();
    (st == a_.get() ? a_row_ : b_row_) = *r;
    return {};
  }
  std::unique_ptr<Stmt> a_, b_;
  bool started_ = false, a_row_ = false, b_row_ = false;
  Stmt* cur_ = nullptr;
};

}  // namespace ingero::store

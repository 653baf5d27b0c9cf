// The blocks a trace writer fills (calls: store/call_block.h; host events:
// store/host_block.h): the one filling, written while it fills (the tail), the ones that filled
// since they were last written, and how much of the filling one the file holds, so that a batch
// that failed to commit takes back exactly what the file lacks. The writer writes them at the
// commits it says (`blocks`), all together: the file then holds every event up to the newest,
// with no gap in their ids (a shipper reads past the last id it shipped). Blocks emptied are
// kept for reuse: a writer filling block after block allocates, and faults in, nothing after
// the first few.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "hal/result.h"

namespace ingero::store {

template <class Block>
class BlockQueue {
 public:
  Block& filling() { return *filling_; }
  const Block& filling() const { return *filling_; }
  // Nothing in memory (the file may hold blocks).
  bool empty() const { return filling_->empty() && full_.empty(); }
  // Something in memory that the file lacks.
  bool unwritten() const { return filling_->size() != committed_ || !full_.empty(); }
  // The earliest start among the blocks that hold events the file lacks (INT64_MAX: none).
  int64_t oldest_unwritten_ts() const {
    int64_t t = filling_->size() != committed_ ? filling_->first_ts() : INT64_MAX;
    for (const auto& f : full_) t = std::min(t, f.block->first_ts());
    return t;
  }
  // Events in the blocks that filled since the last commit.
  size_t full_rows() const { return full_rows_; }
  // Where nothing is held: the id of the next block (the file's greatest + 1).
  void start_at(int64_t id) {
    if (empty()) id_ = id;
  }

  // The block filling is full (or spans long enough): the commit writes it for good, and the
  // next events go into another.
  void close() {
    full_rows_ += filling_->size();
    full_.push_back({id_++, std::move(filling_), committed_});
    filling_ = take_spare();
    committed_ = 0;
  }

  // Writes each block that filled, `write(block, id, true)`, then the one filling where the file
  // lacks some of it or `final`: `write(block, id, final)`.
  template <class Write>
  ingero::Status write(bool final, Write&& write) const {
    for (const auto& f : full_)
      if (auto st = write(*f.block, f.id, true); !st) return st;
    if (filling_->empty() || (filling_->size() == committed_ && !final)) return {};
    return write(*filling_, id_, final);
  }

  // The commit succeeded, and wrote the blocks (write() above): the file holds everything.
  // `final`: the block filling is done (a session's end), and the next events go into a block
  // of their own.
  void committed(bool final) {
    for (auto& f : full_) recycle(std::move(f.block));
    full_.clear();
    full_rows_ = 0;
    committed_ = filling_->size();
    if (final && !filling_->empty()) {
      filling_->clear();
      ++id_;
      committed_ = 0;
    }
  }

  // Frees the emptied blocks kept for reuse (a writer done with filling blocks: the session's
  // end, before its analysis).
  void drop_spares() { spare_.clear(); }

  // The batch failed: back to what the file holds (what the last commit wrote): the block
  // then filling, with as many of its events as the file has.
  void restore() {
    full_rows_ = 0;
    if (!full_.empty()) {
      for (size_t i = 1; i < full_.size(); ++i) recycle(std::move(full_[i].block));
      recycle(std::move(filling_));
      filling_ = std::move(full_.front().block);
      id_ = full_.front().id;
      committed_ = full_.front().committed;
      full_.clear();
    }
    filling_->truncate(committed_);
  }

 private:
  struct Full {
    int64_t id = 0;
    std::unique_ptr<Block> block;
    size_t committed = 0;  // its events the file held when it filled (the tail then)
  };
  void recycle(std::unique_ptr<Block> b) {
    b->clear();
    spare_.push_back(std::move(b));
  }
  std::unique_ptr<Block> take_spare() {
    if (spare_.empty()) return std::make_unique<Block>();
    auto b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }

  std::unique_ptr<Block> filling_ = std::make_unique<Block>();
  int64_t id_ = 0;
  size_t committed_ = 0;
  std::vector<Full> full_;
  size_t full_rows_ = 0;
  std::vector<std::unique_ptr<Block>> spare_;
};

}  // namespace ingero::store

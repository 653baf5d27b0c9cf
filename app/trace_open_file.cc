// Trace::open_file (app/trace_session.h): the trace file, its folder and its lock, the
// sessions a killed tracer left, and how the writer lays out and writes its blocks.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "app/trace_repair.h"
#include "app/trace_session.h"
#include "store/file_access.h"
#include "store/trace_writer.h"
#include "store/wal_limit.h"

namespace ingero::app::trace_detail {

int Trace::open_file() {
  // A folder it creates (~/.ingero) is private (0700), as is the file (0600): a trace holds
  // every traced process's command line.
  if (auto st = store::make_private_dirs(std::filesystem::path(db_).parent_path().string()); !st) {
    std::cerr << "ingero trace: " << st.error().message << "\n";
    return kExitFailure;
  }
  // One writer at a time: a compact (or another tracer) of this file is refused while this
  // one writes it, and this one is refused while another writes it, before any change.
  auto lock = [&] {
    auto l = store::TraceLock::acquire(db_);
    if (!l) std::cerr << "ingero trace: " << l.error().message << "\n";
    if (l) lock_ = std::move(*l);
    return l.ok();
  };
  if (std::filesystem::exists(db_) && !lock()) return kExitFailure;
  auto writer = store::TraceWriter::open(db_, registry_.views());
  if (!writer) {
    std::cerr << "ingero trace: cannot open trace file: " << writer.error().message << "\n";
    return kExitFailure;
  }
  writer_ = std::move(*writer);
  if (!lock_.held() && !lock()) return kExitFailure;  // a file it created
  if (!repair_left_sessions(writer_->db(), db_, opts_.quiet, std::cerr)) return kExitFailure;
  writer_->set_folding(!opts_.keep_all);
  // Blocks span at most an eighth of the full-row window and of --retain (1 s to 60 s): their
  // calls lose their rows within that of --full-rows, and go within that of --retain, at any
  // call rate (retention deletes whole blocks).
  double window_s = opts_.full_rows_s;
  if (opts_.retain_s > 0) window_s = std::min(window_s, opts_.retain_s);
  writer_->set_block_span(
      std::clamp(int64_t(window_s * 1e9 / 8), int64_t(1'000'000'000), int64_t(60'000'000'000)));
  // Blocks go into the file once a second (or as soon as enough wait), not at every commit: each
  // write rewrites the blocks still filling whole. Not under --max-db-size, whose passes follow
  // what each commit wrote.
  if (!opts_.max_db_bytes) writer_->set_block_interval(store::TraceWriter::kBlockIntervalNs);
  // --max-db-size limits the disk the trace takes: its write-ahead log is held to an eighth.
  if (opts_.max_db_bytes)
    if (auto st = store::limit_wal(writer_->db(), opts_.max_db_bytes / 8); !st) {
      std::cerr << "ingero trace: " << db_ << ": " << st.error().message << "\n";
      return kExitFailure;
    }
  return kExitOk;
}

}  // namespace ingero::app::trace_detail

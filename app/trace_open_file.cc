// Trace::open_file (app/trace_session.h): the trace file, its folder and its lock, the
// sessions a killed tracer left, and how the writer lays out and writes its blocks.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "app/trace_repair.h"
#include "app/trace_session.h"
#include "store/file_access.h"
#include "store/schema.h"
#include "store/sqlite_db.h"
#include "store/trace_writer.h"
#include "store/wal_limit.h"

namespace ingero::app::trace_detail {

namespace {

// A trace of a schema before blocks (1 to 9: an earlier ingero's, which kept calls as rows)
// renamed beside itself, whole, for a new file to take its path: any interrupted write rolled
// back and its write-ahead log folded in first, so the file alone holds it. Through a symbolic
// link, the file it names is moved (SQLite keeps the log beside that file), and the link then
// names the new one. The new name, or an Error; "" when `given` is not such a file (the writer
// then says what it is).
Result<std::string> move_older_aside(const std::string& given) {
  std::error_code ec;
  const std::string path = std::filesystem::canonical(given, ec).string();
  if (ec) return std::string();
  // A hot journal makes a read-only connection fail: rolled back first, as any writer would.
  if (auto st = store::roll_back_interrupted_write(path); !st) return st.error();
  int schema = 0;
  {
    auto db = store::Db::open(path, store::Db::Mode::kReadOnly);
    if (!db) return std::string();
    auto info = store::inspect(**db);
    if (!info || info->format != store::TraceFormat::kIngero || info->schema_version < 1 ||
        info->schema_version >= store::kFirstCallStoreSchema)
      return std::string();
    schema = info->schema_version;
  }
  {
    auto rw = store::Db::open(path, store::Db::Mode::kReadWrite);
    if (!rw) return rw.error();
    if (auto st = (*rw)->exec("PRAGMA wal_checkpoint(TRUNCATE)"); !st) return st.error();
  }
  // The last connection's close removes the log and its index; one left means another program
  // still has the file open, and a new file under this name would share them with it.
  for (const char* side : {"-wal", "-shm", "-journal"})
    if (std::filesystem::exists(path + side, ec))
      return ingero::make_error(path + " is open in another program (its " + side +
                                " is still there): close it, or move the file aside by hand");
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  std::string aside = path + ".schema" + std::to_string(schema) + "-" + stamp;
  if (std::filesystem::exists(aside, ec))
    return ingero::make_error(aside + " exists: move " + path + " aside by hand");
  std::filesystem::rename(path, aside, ec);
  if (ec) return ingero::make_error("renaming " + path + " to " + aside + ": " + ec.message());
  return aside;
}

}  // namespace

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
  // A file it creates is locked from the moment it has its name (TraceLock::create): before,
  // another tracer or a compact could take it while its tables were made, or take the new file
  // of a move-aside.
  bool created = false;
  auto create = [&] {
    // A planted reserve is refused before the trace is created (security.md).
    if (auto st = store::check_owned_file(db_ + "-reserve"); !st) {
      std::cerr << "ingero trace: cannot open trace file: " << st.error().message << "\n";
      return false;
    }
    auto l = store::TraceLock::create(db_);
    if (!l && l.error().sys_errno == EEXIST) return lock();  // another made it meanwhile
    if (!l) std::cerr << "ingero trace: cannot open trace file: " << l.error().message << "\n";
    if (l) lock_ = std::move(*l);
    return created = l.ok();
  };
  // Never the throwing overload: a link loop or a name past 255 bytes aborted the tracer
  // (exit 134) where every reader said why (exit 1).
  std::error_code ec;
  bool there = std::filesystem::exists(db_, ec);
  if (ec) {
    std::cerr << "ingero trace: cannot open trace file: " << db_ << ": " << ec.message() << "\n";
    return kExitFailure;
  }
  if (there ? !lock() : !create()) return kExitFailure;
  if (lock_.held() && opts_.older_schema == "move-aside") {
    auto aside = move_older_aside(db_);
    if (!aside) {
      std::cerr << "ingero trace: " << aside.error().message << "\n";
      return kExitFailure;
    }
    if (!aside->empty()) {
      // Through a link, the new file is made where the link points (a trace file is never
      // created through a link: it could be one planted to make root write elsewhere).
      std::string given = db_;
      db_ = aside->substr(0, aside->rfind(".schema"));  // the file's own path, links resolved
      std::cerr << "ingero trace: " << given
                << " was written by an earlier ingero (calls as rows); moved aside to " << *aside
                << " (every command reads it; `ingero compact` converts it) and tracing into a "
                   "new "
                << db_ << "\n";
      lock_ = store::TraceLock();  // the moved file's
      if (!create()) return kExitFailure;
    }
  }
  auto writer = store::TraceWriter::open(db_, registry_.views(), created);
  if (!writer) {
    std::cerr << "ingero trace: cannot open trace file: " << writer.error().message << "\n";
    return kExitFailure;
  }
  writer_ = std::move(*writer);
  if (struct stat st{}; ::stat(db_.c_str(), &st) == 0) db_id_ = {st.st_dev, st.st_ino};
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

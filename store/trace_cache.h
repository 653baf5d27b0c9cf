// A result derived from a trace file (the dashboard's model, an MCP tool's answer), computed
// once per change of the file and shared by every request that asks meanwhile (browser tabs,
// reloads, several users, 200 agents asking for the same statistics).
//
// A file's change is its stamp: which file the path names, and size and modification and
// change times of the file and of its -wal (the
// writer commits into the WAL every 200 ms; a checkpoint changes the file itself). A request
// gets the cached model when the stamp is unchanged, or when the model is younger than
// `min_age` (a trace being written changes every commit: the dashboard refreshes at most that
// often however many tabs poll). Otherwise one request computes (the others wait for it and
// share its result: single flight). Failures are cached the same way, so a missing file is
// not re-opened by every poll.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "hal/result.h"

namespace ingero::store {

struct FileStamp {
  int64_t size = -1, mtime_ns = 0, wal_size = -1, wal_mtime_ns = 0;  // -1: absent
  // Which file, and when its inode last changed: a file renamed over the path with the same
  // size and a modification time copied (`cp -p`, `rsync -a`, `touch -r`) is another file.
  uint64_t dev = 0, ino = 0;
  int64_t ctime_ns = 0, wal_ino = 0;
  bool operator==(const FileStamp&) const = default;
  // What the trace takes on disk: the file and its write-ahead log, whose frames reach the
  // file only at a checkpoint (what --max-db-size bounds).
  uint64_t bytes() const {
    return uint64_t(std::max<int64_t>(size, 0) + std::max<int64_t>(wal_size, 0));
  }
};
FileStamp file_stamp(const std::string& path);

class TraceCache {
 public:
  // Returns the serialized result (JSON text), or an Error to show.
  using Compute = std::function<Result<std::string>()>;
  TraceCache(std::string path, Compute compute, std::chrono::milliseconds min_age);

  struct Entry {
    std::shared_ptr<const std::string> body;  // the result, or {"error": ...}
    bool ok = false;
    std::string etag;  // "\"<16 hex digits>\"": the body's digest, the same for the same body
    double compute_s = 0;
    uint64_t generation = 0;
  };
  // The current entry, computing it first when needed. Thread-safe; blocks while another
  // thread computes.
  Entry get();
  uint64_t computations() const;

 private:
  std::string path_;
  Compute compute_;
  std::chrono::milliseconds min_age_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool computing_ = false, have_ = false;
  FileStamp stamp_;
  std::chrono::steady_clock::time_point computed_at_;
  Entry entry_;
};

}  // namespace ingero::store

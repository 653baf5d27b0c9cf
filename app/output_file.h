// Where a command writes a file it produces (`export -o`): every write, the fsync and the close
// are checked, and a failure is an Error naming the path and the cause (a full disk, /dev/full).
//
// A regular file is written as a temporary file in the same folder and renamed over the target
// by commit(), so a failed or interrupted run leaves the target as it was and no temporary file
// behind. An existing target is refused unless `force`; so is a target that is one of the
// inputs (same device and inode: `export --db a.db -o a.db`), even with `force`. Anything else
// that exists and is not a regular file (/dev/full, a FIFO, /dev/stdout) is written in place.
// A path of "-" or "" is standard output.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hal/result.h"

namespace ingero::app {

// Whether a file to create already has its name (anything there, a link to nothing or a link
// loop too), or an Error where the name cannot be looked up (a name past 255 bytes, a folder
// that cannot be searched): never an exception.
Result<bool> name_taken(const std::string& path);

// Before a new SQLite file is renamed to `path`: SQLite's files beside the name (-wal, -shm,
// -journal) would be read as part of it (an old trace's -wal took a merged file over). Where
// `path` is not there they are stray (a trace removed without its -wal) and are removed; beside
// an existing `path` they are its own (a program writing it, or one that was killed), and the
// answer is an Error naming them.
Status clear_sqlite_sides(const std::string& path);

class OutputFile {
 public:
  // Why `path` may not be written as asked: a folder, one of the inputs, or a file that exists
  // without `force`. Each is a usage error (exit 2), said before any trace is read, as merge and
  // export --format sqlite say theirs; nullopt where it may be written. open() refuses the same.
  static std::optional<std::string> refusal(const std::string& path, bool force,
                                            const std::vector<std::string>& inputs);
  static Result<std::unique_ptr<OutputFile>> open(const std::string& path, bool force,
                                                  const std::vector<std::string>& inputs);
  ~OutputFile();  // without commit(): the temporary file is removed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Buffered; the first error is kept and returned by every later call.
  Status write(std::string_view data);
  // Flushes, fsyncs (regular files), closes and renames the temporary file over the target.
  Status commit();
  const std::string& path() const { return path_; }  // "standard output" for stdout

 private:
  OutputFile() = default;
  Status flush();
  std::string path_, tmp_;
  int fd_ = -1;
  bool owns_fd_ = false, regular_ = false, force_ = false, committed_ = false;
  std::string buf_;
  Status error_;
};

}  // namespace ingero::app

// The checks a trace file passes before SQLite opens it, so that a path that cannot work is an
// Error naming the path and the cause ("is a directory", "Permission denied") instead of what
// SQLite would say ("disk I/O error", "unable to open database file"); and how new trace files
// and their folder are created: private to their owner, because a trace holds the command
// line of every process that ran while tracing.
#pragma once

#include <string>

#include "hal/result.h"

namespace ingero::store {

// Files ingero creates beside a trace (PATH-reserve, PATH.ship.lock, temporaries) must not let
// whoever may write in the trace's folder point ingero's writes elsewhere: `ingero trace` runs
// as root, and a folder may belong to a user (`--db /home/u/x.db`). So every such file is
// opened by open_owned_file(), never by a plain open():
//   - a symbolic link is never followed (O_NOFOLLOW): "PATH: is a symbolic link ...";
//   - what was opened must be a regular file (a FIFO or device is opened non-blocking, so it
//     cannot hang the open, and refused), with one link (a hard link to another file is
//     refused: "PATH: has N links ..."), owned by the effective user ("PATH: belongs to uid U,
//     not to the user running ingero (uid E) ...");
//   - nothing is truncated before those checks: the caller truncates the descriptor.
// A missing file is created with mode 0600. `exclusive`: it must not exist (O_CREAT|O_EXCL).
// Returns the open descriptor (O_RDWR, O_CLOEXEC, blocking), which the caller closes. Every
// Error names the path, the cause, and ends with what to do.
ingero::Result<int> open_owned_file(const std::string& path, bool exclusive = false);

// lstat() checks of an existing PATH without opening it (a missing one is fine): the checks of
// open_owned_file(), for refusing a trace before its first write when a file ingero will
// create beside it was planted.
ingero::Status check_owned_file(const std::string& path);

// Who writes a trace file: an exclusive advisory lock (flock) on the file itself, which
// `ingero trace` holds for as long as it writes the file and `ingero compact` while it
// compacts, so that neither runs on a file the other is writing (a compact beside a live
// tracer made it lose 24,547 calls to a full ring). flock locks are not SQLite's POSIX locks
// and do not interfere with them. But closing any descriptor of a file drops every POSIX
// lock the process holds on it, SQLite's included: a TraceLock must outlive every SQLite
// connection of the process to the file (declare it before them; it closes last).
class TraceLock {
 public:
  // Locks an existing `path`. When another process holds the lock, an Error:
  // "PATH is being written by another ingero process (a running `ingero trace`, or
  // `ingero compact`)".
  static ingero::Result<TraceLock> acquire(const std::string& path);
  // Creates `path` empty (mode 0600) already locked: the file is made without a name
  // (O_TMPFILE), locked, then linked to `path`, so no other process can open it under `path`
  // unlocked, as another tracer or a compact could while its tables were made. Never through a
  // symbolic link. An existing `path` is an Error with sys_errno EEXIST (lock that file with
  // acquire()). Where the file system cannot make such a file, it is created (O_EXCL) and
  // locked at once.
  static ingero::Result<TraceLock> create(const std::string& path);
  TraceLock() = default;
  TraceLock(TraceLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  TraceLock& operator=(TraceLock&& o) noexcept;
  TraceLock(const TraceLock&) = delete;
  ~TraceLock();
  bool held() const { return fd_ >= 0; }

 private:
  explicit TraceLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Whether another process holds an exclusive flock on `path` (a running `ingero trace` or
// `ingero compact`), read from /proc/locks: taking no lock itself, so a tracer that starts
// meanwhile is never refused because of it, and not counting this process's own (compact reads
// the file it locked). False where /proc/locks cannot be read.
bool locked_by_another_process(const std::string& path);

// A file to read: exists, is a regular file, and this process may read it. Never opens it:
// closing a descriptor of a file drops the process's POSIX locks on it (SQLite's).
ingero::Status check_readable(const std::string& path);

// A file to write: an existing regular file this process may read and write, in a folder it
// may write (SQLite creates PATH-wal and PATH-shm beside it). With `create` (the trace writer), a
// missing file is created empty with mode 0600 (the folder must exist), and an existing
// PATH-reserve must pass check_owned_file() first.
ingero::Status prepare_writable(const std::string& path, bool create);

// Creates `dir` and any missing parent with mode 0700 (folders that exist are left as they
// are). An Error names the folder that could not be created and why.
ingero::Status make_private_dirs(const std::string& dir);

// Removes a database file this process made and could not finish, with the files SQLite keeps
// beside it (-wal, -shm, -journal). Best effort: what is not there is not an error.
void remove_database_files(const std::string& path);

class Db;
// PRAGMA quick_check on an open file (read-only): a damaged file is an Error naming the path
// and the first problem SQLite found. Reads the whole file (4.8 s for 967 MB on a 2-core VM).
ingero::Status check_intact(Db& db);

}  // namespace ingero::store

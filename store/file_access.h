// The checks a trace file passes before SQLite opens it, so that a path that cannot work is an
// Error naming the path and the cause ("is a directory", "Permission denied") instead of what
// SQLite would say ("disk I/O error", "unable to open database file"); and how new trace files
// and their folder are created: private to their owner, because a trace holds the command
// line of every process that ran while tracing.
#pragma once

#include <string>

#include "hal/result.h"

namespace ingero::store {

// A file to read: exists, is a regular file, and this process may read it.
ingero::Status check_readable(const std::string& path);

// A file to write: an existing regular file this process may read and write, in a folder it
// may write (SQLite creates PATH-wal and PATH-shm beside it). With `create`, a missing file is
// created empty with mode 0600 (the folder must exist).
ingero::Status prepare_writable(const std::string& path, bool create);

// Creates `dir` and any missing parent with mode 0700 (folders that exist are left as they
// are). An Error names the folder that could not be created and why.
ingero::Status make_private_dirs(const std::string& dir);

class Db;
// PRAGMA quick_check on an open file (read-only): a damaged file is an Error naming the path
// and the first problem SQLite found. Reads the whole file (4.8 s for 967 MB on a 2-core VM).
ingero::Status check_intact(Db& db);

}  // namespace ingero::store

#include "store/owned_vfs.h"

#include <sqlite3.h>
#include <unistd.h>

#include <mutex>
#include <string>

#include "store/file_access.h"

namespace ingero::store {
namespace {

sqlite3_vfs g_owned;
sqlite3_vfs* g_base = nullptr;

bool owned(const std::string& path) {
  auto fd = open_owned_file(path);
  if (!fd) return false;
  ::close(*fd);
  return true;
}

int owned_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out) {
  if (name && (flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL))) {
    if (!owned(name)) return SQLITE_CANTOPEN;
    // The log's index is opened by name when the log is first read: made ours with it.
    if ((flags & SQLITE_OPEN_WAL) && !owned(std::string(sqlite3_filename_database(name)) + "-shm"))
      return SQLITE_CANTOPEN;
  }
  return g_base->xOpen(g_base, name, file, flags, out);
}

}  // namespace

const char* owned_vfs_name() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_base = sqlite3_vfs_find(nullptr);
    g_owned = *g_base;  // its methods read pAppData and szOsFile, which the copy keeps
    g_owned.zName = "ingero-owned";
    g_owned.pNext = nullptr;
    g_owned.xOpen = owned_open;
    sqlite3_vfs_register(&g_owned, /*makeDflt=*/0);
  });
  return g_owned.zName;
}

}  // namespace ingero::store

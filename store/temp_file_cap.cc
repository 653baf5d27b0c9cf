#include "store/temp_file_cap.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ingero::store {
namespace {

// The default VFS the shim forwards to, and what the temporary files hold.
sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;
std::atomic<int64_t> g_cap{0}, g_used{0}, g_peak{0};
std::atomic<bool> g_hit{false};

// A temporary file: ours, with the real VFS's file right after it.
struct CappedFile {
  sqlite3_file base;
  sqlite3_file* real;
  int64_t extent;  // bytes counted against the cap
};

sqlite3_file* real_of(sqlite3_file* f) { return reinterpret_cast<CappedFile*>(f)->real; }

void give_back(CappedFile* f, int64_t to) {
  if (to >= f->extent) return;
  g_used -= f->extent - to;
  f->extent = to;
}

int x_close(sqlite3_file* f) {
  auto* cf = reinterpret_cast<CappedFile*>(f);
  give_back(cf, 0);
  return cf->real->pMethods->xClose(cf->real);
}
int x_read(sqlite3_file* f, void* buf, int amt, sqlite3_int64 off) {
  return real_of(f)->pMethods->xRead(real_of(f), buf, amt, off);
}
int x_write(sqlite3_file* f, const void* buf, int amt, sqlite3_int64 off) {
  auto* cf = reinterpret_cast<CappedFile*>(f);
  int64_t end = off + amt;
  if (end > cf->extent) {
    int64_t grow = end - cf->extent;
    int64_t now = g_used.fetch_add(grow) + grow;
    if (now > g_cap) {
      g_used -= grow;
      g_hit = true;
      return SQLITE_FULL;
    }
    cf->extent = end;
    int64_t peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
  }
  return cf->real->pMethods->xWrite(cf->real, buf, amt, off);
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  auto* cf = reinterpret_cast<CappedFile*>(f);
  int rc = cf->real->pMethods->xTruncate(cf->real, size);
  if (rc == SQLITE_OK) give_back(cf, size);
  return rc;
}
int x_sync(sqlite3_file* f, int flags) { return real_of(f)->pMethods->xSync(real_of(f), flags); }
int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return real_of(f)->pMethods->xFileSize(real_of(f), size);
}
int x_lock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xLock(real_of(f), l); }
int x_unlock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xUnlock(real_of(f), l); }
int x_check_reserved(sqlite3_file* f, int* out) {
  return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}
int x_file_control(sqlite3_file* f, int op, void* arg) {
  // A size hint would let the real file grow without a write: not forwarded (only a hint).
  if (op == SQLITE_FCNTL_SIZE_HINT) return SQLITE_OK;
  return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}
int x_sector_size(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int x_device(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }

// Version 1: no shared memory and no memory mapping, which temporary files never use.
const sqlite3_io_methods kMethods = {
    1,       x_close,  x_read,           x_write,        x_truncate,    x_sync,   x_file_size,
    x_lock,  x_unlock, x_check_reserved, x_file_control, x_sector_size, x_device, nullptr,
    nullptr, nullptr,  nullptr,          nullptr,        nullptr};

constexpr int kTempFlags = SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL |
                           SQLITE_OPEN_TRANSIENT_DB | SQLITE_OPEN_SUBJOURNAL;

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  // Not a temporary file: the real VFS's own, in the same memory (szOsFile covers it).
  if (!(flags & kTempFlags)) return g_real->xOpen(g_real, name, file, flags, out_flags);
  auto* cf = reinterpret_cast<CappedFile*>(file);
  cf->real = reinterpret_cast<sqlite3_file*>(cf + 1);
  cf->extent = 0;
  std::memset(cf->real, 0, size_t(g_real->szOsFile));
  int rc = g_real->xOpen(g_real, name, cf->real, flags, out_flags);
  // SQLite calls xClose after a failed xOpen that left methods set.
  cf->base.pMethods = cf->real->pMethods ? &kMethods : nullptr;
  return rc;
}

}  // namespace

ingero::Status cap_temp_files(uint64_t max_bytes) {
  if (g_real) return ingero::make_error("cap_temp_files: called twice");
  if (sqlite3_initialize() != SQLITE_OK) return ingero::make_error("SQLite cannot initialise");
  g_real = sqlite3_vfs_find(nullptr);
  if (!g_real) return ingero::make_error("SQLite has no default VFS");
  // The real VFS's other methods, as they are: they take the VFS pointer but read nothing of
  // it that differs here (pAppData is the real one's; only xOpen is ours).
  g_vfs = *g_real;
  g_vfs.pNext = nullptr;
  g_vfs.zName = "ingero-temp-cap";
  g_vfs.szOsFile = int(sizeof(CappedFile)) + g_real->szOsFile;
  g_vfs.xOpen = x_open;
  g_cap = int64_t(max_bytes);
  if (sqlite3_vfs_register(&g_vfs, 1) != SQLITE_OK)
    return ingero::make_error("cannot register SQLite's temporary file cap");
  return {};
}

bool temp_cap_hit() { return g_hit; }
uint64_t temp_bytes_peak() { return uint64_t(g_peak.load()); }
void cap_temp_files_beyond_held(uint64_t max_bytes) {
  g_cap = g_used.load() + int64_t(std::min<uint64_t>(max_bytes, INT64_MAX / 2));
}

}  // namespace ingero::store

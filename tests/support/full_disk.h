// A disk that fills on demand: a VFS over SQLite's default one, registered as the default
// while a FullDisk lives, whose next `failing_writes` writes fail with SQLITE_FULL.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>

namespace ingero::test {

class FullDisk {
 public:
  FullDisk() {
    base_ = sqlite3_vfs_find(nullptr);
    vfs_ = *base_;
    vfs_.iVersion = 2;
    vfs_.szOsFile = int(sizeof(File)) + base_->szOsFile;
    vfs_.zName = "ingero_full_disk";
    vfs_.pNext = nullptr;
    vfs_.xOpen = open;
    vfs_.xDelete = [](sqlite3_vfs*, const char* n, int s) { return base_->xDelete(base_, n, s); };
    vfs_.xAccess = [](sqlite3_vfs*, const char* n, int f, int* r) {
      return base_->xAccess(base_, n, f, r);
    };
    vfs_.xFullPathname = [](sqlite3_vfs*, const char* n, int k, char* out) {
      return base_->xFullPathname(base_, n, k, out);
    };
    vfs_.xSetSystemCall = nullptr;
    vfs_.xGetSystemCall = nullptr;
    vfs_.xNextSystemCall = nullptr;
    EXPECT_EQ(sqlite3_vfs_register(&vfs_, 1), SQLITE_OK);
  }
  ~FullDisk() {
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(base_, 1);
  }
  static inline int failing_writes = 0;  // the next writes that fail

 private:
  struct File {
    sqlite3_file head;
    sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
  };
  static sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<File*>(f)->real(); }
  static const sqlite3_io_methods* base_io(sqlite3_file* f) { return real(f)->pMethods; }

  static int open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out) {
    f->pMethods = nullptr;
    int rc = base_->xOpen(base_, name, real(f), flags, out);
    if (rc != SQLITE_OK) return rc;
    if (!io_.xClose) make_io(base_io(f)->iVersion);
    f->pMethods = &io_;
    return SQLITE_OK;
  }
  // Every method is the real file's, but writes fail while the disk is full.
  static void make_io(int version) {
    io_.iVersion = std::min(version, 2);
    io_.xClose = [](sqlite3_file* f) { return base_io(f)->xClose(real(f)); };
    io_.xRead = [](sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
      return base_io(f)->xRead(real(f), b, n, o);
    };
    io_.xWrite = [](sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
      if (failing_writes > 0) {
        --failing_writes;
        return SQLITE_FULL;
      }
      return base_io(f)->xWrite(real(f), b, n, o);
    };
    io_.xTruncate = [](sqlite3_file* f, sqlite3_int64 s) {
      return base_io(f)->xTruncate(real(f), s);
    };
    io_.xSync = [](sqlite3_file* f, int fl) { return base_io(f)->xSync(real(f), fl); };
    io_.xFileSize = [](sqlite3_file* f, sqlite3_int64* s) {
      return base_io(f)->xFileSize(real(f), s);
    };
    io_.xLock = [](sqlite3_file* f, int l) { return base_io(f)->xLock(real(f), l); };
    io_.xUnlock = [](sqlite3_file* f, int l) { return base_io(f)->xUnlock(real(f), l); };
    io_.xCheckReservedLock = [](sqlite3_file* f, int* r) {
      return base_io(f)->xCheckReservedLock(real(f), r);
    };
    io_.xFileControl = [](sqlite3_file* f, int op, void* a) {
      return base_io(f)->xFileControl(real(f), op, a);
    };
    io_.xSectorSize = [](sqlite3_file* f) { return base_io(f)->xSectorSize(real(f)); };
    io_.xDeviceCharacteristics = [](sqlite3_file* f) {
      return base_io(f)->xDeviceCharacteristics(real(f));
    };
    io_.xShmMap = [](sqlite3_file* f, int i, int sz, int ext, void volatile** p) {
      return base_io(f)->xShmMap(real(f), i, sz, ext, p);
    };
    io_.xShmLock = [](sqlite3_file* f, int o, int n, int fl) {
      return base_io(f)->xShmLock(real(f), o, n, fl);
    };
    io_.xShmBarrier = [](sqlite3_file* f) { base_io(f)->xShmBarrier(real(f)); };
    io_.xShmUnmap = [](sqlite3_file* f, int d) { return base_io(f)->xShmUnmap(real(f), d); };
  }

  static inline sqlite3_vfs* base_ = nullptr;
  static inline sqlite3_io_methods io_{};
  sqlite3_vfs vfs_{};
};

}  // namespace ingero::test

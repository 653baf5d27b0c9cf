#include "store/file_access.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "store/sqlite_db.h"

namespace ingero::store {
namespace {

std::string folder_of(const std::string& path) {
  auto p = std::filesystem::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

// stat() of an existing path that must be a regular file.
ingero::Status regular_file(const std::string& path, const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return ingero::make_error(path + ": is a directory, not a trace file");
  if (!S_ISREG(st.st_mode)) return ingero::make_error(path + ": is not a regular file");
  return {};
}

// What open_owned_file() and check_owned_file() refuse, from an lstat() or fstat() result.
ingero::Status owned_regular(const std::string& path, const struct stat& st) {
  const std::string fix = " (remove it, or keep the trace in a folder only its owner can write)";
  if (S_ISLNK(st.st_mode))
    return ingero::make_error(path +
                              ": is a symbolic link; ingero never follows one to a file it keeps "
                              "beside a trace" +
                              fix);
  if (!S_ISREG(st.st_mode))
    return ingero::make_error(path +
                              ": is not a regular file; ingero keeps only its own files "
                              "beside a trace" +
                              fix);
  if (st.st_uid != geteuid())
    return ingero::make_error(path + ": belongs to uid " + std::to_string(st.st_uid) +
                              ", not to the user running ingero (uid " + std::to_string(geteuid()) +
                              "); ingero writes only its own files beside a trace" + fix);
  if (st.st_nlink != 1)
    return ingero::make_error(path + ": has " + std::to_string(st.st_nlink) +
                              " hard links; ingero writes only its own files beside a trace" + fix);
  return {};
}

}  // namespace

ingero::Result<int> open_owned_file(const std::string& path, bool exclusive) {
  // O_NONBLOCK: a FIFO planted at the path cannot hang the open (it is refused below). No
  // O_TRUNC: a file that fails the checks is left as it is.
  int flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (exclusive ? O_EXCL : 0);
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) {
    int err = errno;
    struct stat st {};
    if (err == ELOOP && lstat(path.c_str(), &st) == 0)
      if (auto s = owned_regular(path, st); !s) return s.error();
    return ingero::Error::sys("cannot create " + path, err);
  }
  struct stat st {};
  ingero::Status ok = fstat(fd, &st) == 0 ? owned_regular(path, st)
                                          : ingero::Status(ingero::Error::sys(path, errno));
  if (ok && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    ok = ingero::Error::sys(path, errno);
  if (!ok) {
    ::close(fd);
    return ok.error();
  }
  return fd;
}

ingero::Status check_owned_file(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? ingero::Status() : ingero::Error::sys(path, errno);
  return owned_regular(path, st);
}

ingero::Result<TraceLock> TraceLock::acquire(const std::string& path) {
  // Non-blocking: opening a FIFO for reading waited for a writer for ever (`compact FIFO`).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ingero::Error::sys("cannot read " + path, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return ingero::make_error(path + (S_ISDIR(st.st_mode) ? ": is a directory, not a trace file"
                                                          : ": is not a regular file"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      ingero::Error held{path +
                         " is being written by another ingero process (a running `ingero "
                         "trace`, or `ingero compact`)"};
      held.sys_errno = EWOULDBLOCK;  // the one failure a caller may wait out
      return held;
    }
    return ingero::Error::sys("cannot lock " + path, err);
  }
  return TraceLock(fd);
}

ingero::Result<TraceLock> TraceLock::create(const std::string& path) {
  auto failed = [&](int err) { return ingero::Error::sys("cannot create " + path, err); };
  int fd = ::open(folder_of(path).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) {
    // Nobody else can reach a file without a name: this lock cannot be refused.
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      return ingero::Error::sys("cannot lock " + path, err);
    }
    std::string self = "/proc/self/fd/" + std::to_string(fd);
    if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0)
      return TraceLock(fd);
    int err = errno;
    ::close(fd);
    if (err == EEXIST) return failed(EEXIST);
    if (err != ENOENT && err != EPERM && err != EOPNOTSUPP && err != EXDEV) return failed(err);
    // No /proc, or a file system that links no such file: made under its name below.
  } else if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    return failed(errno);
  }
  fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return failed(errno);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {  // another process opened it in the instant since
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return acquire(path);  // says who holds it
    return ingero::Error::sys("cannot lock " + path, err);
  }
  return TraceLock(fd);
}

bool locked_by_another_process(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  FILE* f = std::fopen("/proc/locks", "re");
  if (!f) return false;
  // "1: FLOCK  ADVISORY  WRITE 10892 fe:00:11027016 0 EOF"
  char line[256];
  bool held = false;
  const long self = long(getpid());
  while (!held && std::fgets(line, sizeof line, f)) {
    char kind[16], mode[16], access[16];
    long pid = 0;
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(line, "%*[^:]: %15s %15s %15s %ld %x:%x:%llu", kind, mode, access, &pid, &maj,
                    &min, &ino) != 7)
      continue;
    held = std::strcmp(kind, "FLOCK") == 0 && std::strcmp(access, "WRITE") == 0 && pid != self &&
           maj == major(st.st_dev) && min == minor(st.st_dev) && ino == st.st_ino;
  }
  std::fclose(f);
  return held;
}

TraceLock& TraceLock::operator=(TraceLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

TraceLock::~TraceLock() {
  if (fd_ >= 0) ::close(fd_);
}

ingero::Status check_readable(const std::string& path) {
  if (path.empty()) return ingero::make_error("no trace file given");
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return ingero::Error::sys(path, errno);
  if (auto s = regular_file(path, st); !s) return s;
  // Asked without opening the file: closing any descriptor of a file drops every POSIX lock
  // the process holds on it, SQLite's too. A second connection opened while a read
  // transaction held the file (explain's split read) let `compact` rewrite it under the reader,
  // which then called it damaged.
  if (faccessat(AT_FDCWD, path.c_str(), R_OK, AT_EACCESS) != 0)
    return ingero::Error::sys("cannot read " + path, errno);
  return {};
}

ingero::Status prepare_writable(const std::string& path, bool create) {
  if (path.empty()) return ingero::make_error("no trace file given");
  // The trace writer's reserve beside the trace (store/trace_writer.h): a planted one is
  // refused here, before the trace is created or written, not after.
  //
  // So are SQLite's (and again as SQLite opens them: store/owned_vfs.h): whoever may write the
  // folder (a sticky /tmp) could plant PATH-wal, keep it open and read every frame the tracer
  // wrote through it, or plant a hot PATH-journal whose "original pages" (a file of theirs,
  // with triggers) the writer then rolled back into the trace and ran.
  if (create)
    for (const char* side : {"-reserve", "-wal", "-shm", "-journal"})
      if (auto s = check_owned_file(path + side); !s) return s;
  std::string dir = folder_of(path);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (auto s = regular_file(path, st); !s) return s;
    // A trace of another user's: its owner would read every command line the tracer appends
    // (any local user could make /tmp/run.db first, with `ingero demo`).
    if (create && st.st_uid != geteuid())
      return ingero::make_error(path + ": belongs to uid " + std::to_string(st.st_uid) +
                                ", not to the user running ingero (uid " +
                                std::to_string(geteuid()) +
                                "); its owner would read what this trace records (give --db a "
                                "file of your own)");
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return ingero::Error::sys("cannot write " + path, errno);
    ::close(fd);
  } else if (errno != ENOENT || !create) {
    return ingero::Error::sys(path, errno);
  } else {
    struct stat ds {};
    if (stat(dir.c_str(), &ds) != 0)
      return ingero::Error::sys("cannot create " + path + ": folder " + dir, errno);
    if (!S_ISDIR(ds.st_mode))
      return ingero::make_error("cannot create " + path + ": " + dir + " is not a directory");
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return ingero::Error::sys("cannot create " + path, errno);
    ::close(fd);
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return ingero::Error::sys("cannot write in " + dir + " (SQLite keeps " +
                                  std::filesystem::path(path).filename().string() +
                                  "-wal and -shm beside the trace)",
                              errno);
  return {};
}

ingero::Status make_private_dirs(const std::string& dir) {
  if (dir.empty()) return {};
  std::filesystem::path p(dir), built;
  // The folders this call made, removed again when a later one fails: a path too long for the
  // system left 2,044 empty nested folders behind its error.
  std::vector<std::string> made;
  auto undo = [&](ingero::Error e) {
    for (auto it = made.rbegin(); it != made.rend(); ++it) (void)rmdir(it->c_str());
    return e;
  };
  for (const auto& part : p) {
    built /= part;
    if (part.empty() || part == "/") continue;
    bool fresh = mkdir(built.c_str(), 0700) == 0;
    if (fresh) made.push_back(built.string());
    if (fresh || errno == EEXIST) {
      struct stat st {};
      if (stat(built.c_str(), &st) != 0) return undo(ingero::Error::sys(built.string(), errno));
      if (!S_ISDIR(st.st_mode))
        return undo(ingero::make_error("cannot create " + dir + ": " + built.string() +
                                       " is not a directory"));
      continue;
    }
    return undo(ingero::Error::sys("cannot create the folder " + built.string(), errno));
  }
  return {};
}

ingero::Status check_intact(Db& db) {
  auto st = db.prepare("PRAGMA quick_check(1)");
  if (!st) return ingero::make_error(db.path() + ": " + st.error().message);
  auto row = st->step();
  if (!row) return ingero::make_error(row.error().message);
  std::string verdict = *row ? st->text(0) : "no answer";
  if (verdict != "ok")
    return ingero::make_error(db.path() + ": the file is damaged (PRAGMA quick_check: " + verdict +
                              ")");
  return {};
}

void remove_database_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    (void)::unlink((path + suffix).c_str());
}

}  // namespace ingero::store

#include "store/file_access.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

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

}  // namespace

ingero::Status check_readable(const std::string& path) {
  if (path.empty()) return ingero::make_error("no trace file given");
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return ingero::Error::sys(path, errno);
  if (auto s = regular_file(path, st); !s) return s;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ingero::Error::sys("cannot read " + path, errno);
  ::close(fd);
  return {};
}

ingero::Status prepare_writable(const std::string& path, bool create) {
  if (path.empty()) return ingero::make_error("no trace file given");
  std::string dir = folder_of(path);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (auto s = regular_file(path, st); !s) return s;
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
  for (const auto& part : p) {
    built /= part;
    if (part.empty() || part == "/") continue;
    if (mkdir(built.c_str(), 0700) == 0 || errno == EEXIST) {
      struct stat st {};
      if (stat(built.c_str(), &st) != 0) return ingero::Error::sys(built.string(), errno);
      if (!S_ISDIR(st.st_mode))
        return ingero::make_error("cannot create " + dir + ": " + built.string() +
                                  " is not a directory");
      continue;
    }
    return ingero::Error::sys("cannot create the folder " + built.string(), errno);
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

}  // namespace ingero::store

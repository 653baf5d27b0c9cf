#include "app/output_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "app/temp_files.h"

namespace ingero::app {
namespace {

constexpr size_t kBufferBytes = 64 << 10;

bool same_file(const struct stat& a, const std::string& other) {
  struct stat b {};
  return stat(other.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

Result<bool> name_taken(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::symlink_status(path, ec);
  // A name that is not there sets `ec` too (ENOENT), with the type not_found: free to take.
  if (st.type() == std::filesystem::file_type::not_found) return false;
  if (ec) return make_error(ec.message());
  return std::filesystem::exists(st);
}

Status clear_sqlite_sides(const std::string& path) {
  std::error_code ec;
  const bool there = std::filesystem::exists(std::filesystem::symlink_status(path, ec));
  for (const char* side : {"-wal", "-journal", "-shm"}) {
    const std::string p = path + side;
    auto st = std::filesystem::symlink_status(p, ec);
    if (st.type() == std::filesystem::file_type::not_found) continue;
    if (there)
      return make_error(p + " is beside " + path + ": a program is writing " + path +
                        ", or one was killed while it did; replacing " + path +
                        " would give the new file its log (write to another name, or remove " +
                        path + " and its -wal, -shm and -journal first)");
    if (!std::filesystem::remove(p, ec) && ec)
      return Error::sys("removing the stray " + p + " (no " + path + " beside it)", ec.value());
  }
  return {};
}

std::optional<std::string> OutputFile::refusal(const std::string& path, bool force,
                                               const std::vector<std::string>& inputs) {
  if (path.empty() || path == "-") return std::nullopt;
  // SQLite's files beside an input, by name: a report written as TRACE-journal made every
  // reader take it for an interrupted write, and compact deleted it as one.
  auto what = [](std::string_view suffix) -> std::string {
    return suffix == "-wal"   ? "the write-ahead log of the input "
           : suffix == "-shm" ? "the shared-memory index of the input "
           : suffix.empty()   ? "the input "
                              : "the rollback journal of the input ";
  };
  std::error_code ec;
  // Absolute first: a relative name none of whose folders exist stays relative otherwise.
  auto name_of = [&ec](const std::string& p) {
    return std::filesystem::weakly_canonical(std::filesystem::absolute(p, ec), ec);
  };
  auto out_name = name_of(path);
  for (const auto& in : inputs)
    for (const char* suffix : {"-wal", "-shm", "-journal"})
      if (!ec && out_name == name_of(in + suffix) && !ec)
        return path + ": is " + what(suffix) + in +
               "; writing it would destroy the trace (choose another output file)";
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    // A link to nothing is a name that exists: perfetto and pprof wrote the whole output, then
    // failed at the rename (exit 1); sqlite and the report replaced the link without a word.
    struct stat lst {};
    if (lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) && !force)
      return path + ": exists (a symbolic link to nothing); pass --force to replace it";
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) return path + ": is a directory, not a file to write";
  for (const auto& in : inputs)
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      if (same_file(st, in + suffix))
        return path + ": is " + what(suffix) + in +
               "; writing it would destroy the trace (choose another output file)";
  if (S_ISREG(st.st_mode) && !force) return path + ": exists; pass --force to replace it";
  return std::nullopt;
}

Result<std::unique_ptr<OutputFile>> OutputFile::open(const std::string& path, bool force,
                                                     const std::vector<std::string>& inputs) {
  std::unique_ptr<OutputFile> f(new OutputFile());
  if (path.empty() || path == "-") {
    f->path_ = "standard output";
    f->fd_ = STDOUT_FILENO;
    return f;
  }
  f->path_ = path;
  f->force_ = force;
  if (auto why = refusal(path, force, inputs)) return make_error(*why);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      // A device, a FIFO, /dev/stdout: written in place, there is nothing to rename.
      f->fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (f->fd_ < 0) return Error::sys("cannot open " + path + " for writing", errno);
      f->owns_fd_ = true;
      return f;
    }
  } else if (errno != ENOENT) {
    return Error::sys(path, errno);
  }
  std::filesystem::path p(path);
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  std::string tmpl = dir + "/." + p.filename().string() + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  {
    FatalSignalsHeld held;                      // until the file is listed
    f->fd_ = mkostemp(name.data(), O_CLOEXEC);  // mode 0600
    if (f->fd_ < 0) return Error::sys("cannot create a temporary file in " + dir, errno);
    f->tmp_ = name.data();
    remove_on_fatal_signal(f->tmp_);
  }
  f->owns_fd_ = true;
  f->regular_ = true;
  return f;
}

OutputFile::~OutputFile() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
  if (!tmp_.empty()) keep_on_fatal_signal(tmp_);
}

Status OutputFile::flush() {
  if (!error_) return error_;
  size_t off = 0;
  while (off < buf_.size()) {
    ssize_t n = ::write(fd_, buf_.data() + off, buf_.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error_ = Error::sys("writing " + path_, n < 0 ? errno : EIO);
      return error_;
    }
    off += size_t(n);
  }
  buf_.clear();
  return {};
}

Status OutputFile::write(std::string_view data) {
  if (!error_) return error_;
  buf_.append(data);
  return buf_.size() >= kBufferBytes ? flush() : Status();
}

Status OutputFile::commit() {
  if (auto st = flush(); !st) return st;
  if (!regular_) {
    if (owns_fd_) {
      int fd = fd_;
      fd_ = -1;
      if (::close(fd) != 0) return Error::sys("closing " + path_, errno);
    }
    committed_ = true;
    return {};
  }
  if (fsync(fd_) != 0) return Error::sys("writing " + path_ + " (fsync)", errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return Error::sys("writing " + path_ + " (close)", errno);
  // Without --force, a file that appeared at the target meanwhile is not overwritten.
  int rc = force_ ? ::rename(tmp_.c_str(), path_.c_str())
                  : renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
  if (rc != 0) return Error::sys("renaming " + tmp_ + " to " + path_, errno);
  committed_ = true;
  std::filesystem::path p(path_);
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);  // the rename's durability; the data itself is already synced
    ::close(dfd);
  }
  return {};
}

}  // namespace ingero::app

#include "app/stdout_check.h"

#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <vector>

namespace ingero::app {

class CheckedStdout::Buffer : public std::streambuf {
 public:
  Buffer() : data_(64 << 10) { setp(data_.data(), data_.data() + data_.size()); }
  int error() const { return errno_; }
  bool failed() const { return failed_; }

 protected:
  int overflow(int c) override {
    if (drain() != 0) return traits_type::eof();
    if (c != traits_type::eof()) {
      *pptr() = char(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain(); }

 private:
  // Writes what is buffered; after a failure, drops it (a reader that is gone stays gone).
  int drain() {
    const char* p = pbase();
    while (!failed_ && p < pptr()) {
      ssize_t n = ::write(STDOUT_FILENO, p, size_t(pptr() - p));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failed_ = true;
        errno_ = n < 0 ? errno : EIO;
        break;
      }
      p += n;
    }
    setp(data_.data(), data_.data() + data_.size());
    return failed_ ? -1 : 0;
  }
  std::vector<char> data_;
  bool failed_ = false;
  int errno_ = 0;
};

CheckedStdout::CheckedStdout() : buf_(std::make_unique<Buffer>()) {
  std::cout.flush();
  old_ = std::cout.rdbuf(buf_.get());
  // A person watching a terminal sees each line as it is printed.
  if (isatty(STDOUT_FILENO)) std::cout << std::unitbuf;
}

CheckedStdout::~CheckedStdout() {
  std::cout.flush();
  std::cout.rdbuf(old_);
}

Status CheckedStdout::finish() {
  std::cout.flush();
  if (buf_->failed() || std::cout.fail())
    return Error::sys("writing to standard output failed", buf_->error() ? buf_->error() : EIO);
  return {};
}

}  // namespace ingero::app

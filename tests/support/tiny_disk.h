// A small disk for tests that fill it: a tmpfs of `size` ("2m") at a fresh directory under the
// test's temporary folder, unmounted when it goes. Needs root (the BPF tests run as root).
#pragma once

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "tests/support/trace_db.h"

namespace ingero::test {

class TinyDisk {
 public:
  TinyDisk(const std::string& name, const std::string& size) : dir_(temp_path(name)) {
    std::filesystem::create_directories(dir_);
    mounted_ = mount("tmpfs", dir_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
    if (!mounted_) why_ = strerror(errno);
  }
  ~TinyDisk() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  TinyDisk(const TinyDisk&) = delete;
  TinyDisk& operator=(const TinyDisk&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, why_;
  bool mounted_ = false;
};

}  // namespace ingero::test

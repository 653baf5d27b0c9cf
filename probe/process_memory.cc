// Another process's memory, read through /proc/PID/mem (probe/python.h).
#include <fcntl.h>
#include <unistd.h>

#include "probe/python.h"

namespace ingero::hal {

ProcessMemory::ProcessMemory(int pid, const std::string& proc_root) {
  fd_ = ::open((proc_root + "/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
}

ProcessMemory::~ProcessMemory() {
  if (fd_ >= 0) ::close(fd_);
}

bool ProcessMemory::read(uint64_t addr, void* out, size_t n) const {
  if (fd_ < 0 || addr == 0) return false;
  ssize_t got = pread(fd_, out, n, off_t(addr));
  return got == ssize_t(n);
}

std::optional<uint64_t> ProcessMemory::u64(uint64_t addr) const {
  uint64_t v;
  if (!read(addr, &v, 8)) return std::nullopt;
  return v;
}

std::optional<int32_t> ProcessMemory::i32(uint64_t addr) const {
  int32_t v;
  if (!read(addr, &v, 4)) return std::nullopt;
  return v;
}

}  // namespace ingero::hal

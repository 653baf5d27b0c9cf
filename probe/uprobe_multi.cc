#include "probe/uprobe_multi.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace ingero::hal {
namespace {

constexpr uint32_t kUprobeMultiReturn = 1;
constexpr int kBpfLinkCreate = 28;

// BPF_LINK_CREATE attribute layout for uprobe_multi, from linux/bpf.h (6.6+): not in
// Debian 12's UAPI headers (Linux 6.1).
struct UprobeMultiAttr {
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t cnt;
  uint32_t multi_flags;
  uint32_t pid;
  uint8_t pad[128 - 60];
};
static_assert(offsetof(UprobeMultiAttr, cnt) == 48);

}  // namespace

Result<int> link_uprobe_multi(int prog_fd, const std::string& path,
                              std::span<const uint64_t> offsets, std::span<const uint64_t> cookies,
                              UprobeMode mode, uint32_t pid) {
  if (!cookies.empty() && cookies.size() != offsets.size())
    return Error{"uprobe_multi: one cookie per offset", EINVAL};
  UprobeMultiAttr attr{};
  attr.prog_fd = uint32_t(prog_fd);
  bool retprobe = mode == UprobeMode::kReturn;
  attr.attach_type = mode == UprobeMode::kSession ? kBpfTraceUprobeSession : kBpfTraceUprobeMulti;
  attr.path = uint64_t(uintptr_t(path.c_str()));
  attr.offsets = uint64_t(uintptr_t(offsets.data()));
  attr.cookies = cookies.empty() ? 0 : uint64_t(uintptr_t(cookies.data()));
  attr.cnt = uint32_t(offsets.size());
  attr.multi_flags = retprobe ? kUprobeMultiReturn : 0;
  attr.pid = pid;
  int fd = int(syscall(__NR_bpf, kBpfLinkCreate, &attr, sizeof(attr)));
  if (fd < 0)
    return Error{std::string(retprobe                       ? "uretprobe_multi"
                             : mode == UprobeMode::kSession ? "uprobe session"
                                                            : "uprobe_multi") +
                     " on " + path + ": " + std::strerror(errno),
                 errno};
  return fd;
}

}  // namespace ingero::hal

// /proc/PID/maps parsing (pure) and the host I/O seam discovery reads through.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hal/result.h"
#include "probe/elf_symbols.h"

namespace ingero::hal {

// The kernel's mark after the path of a mapped file replaced or removed on disk; discovery
// shows such a library with it (library_discovery.cc) and names it without it (probe_manager.cc).
inline constexpr std::string_view kDeletedMark = " (deleted)";

struct MapEntry {
  uint64_t start = 0, end = 0, offset = 0;
  char perms[5] = {};
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  std::string path;      // as the process sees it; "" for anonymous mappings
  bool deleted = false;  // " (deleted)" suffix: the file was replaced or removed
  bool executable() const { return perms[2] == 'x'; }
};

// Parses the text of /proc/PID/maps. Malformed lines are skipped, never fatal.
std::vector<MapEntry> parse_proc_maps(std::string_view text);

// Everything discovery needs from the host, behind one interface so tests can fake it.
class HostView {
 public:
  virtual ~HostView() = default;
  virtual std::vector<int> pids() const = 0;
  virtual Result<std::string> read_text(const std::string& path) const = 0;
  virtual Result<FileIdentity> identify(const std::string& path) const = 0;
  // Paths matching a shell glob (no brace expansion). Missing directories yield nothing.
  virtual std::vector<std::string> glob(const std::string& pattern) const = 0;
  virtual std::string env(const char* name) const = 0;
  virtual Result<std::string> readlink(const std::string& path) const = 0;
  // Root of pid's mount namespace as seen from here: "/proc/PID/root".
  virtual std::string proc_root() const { return "/proc"; }
};

// The real host.
class LocalHost : public HostView {
 public:
  explicit LocalHost(std::string proc = "/proc") : proc_(std::move(proc)) {}
  std::vector<int> pids() const override;
  Result<std::string> read_text(const std::string& path) const override;
  Result<FileIdentity> identify(const std::string& path) const override;
  std::vector<std::string> glob(const std::string& pattern) const override;
  std::string env(const char* name) const override;
  Result<std::string> readlink(const std::string& path) const override;
  std::string proc_root() const override { return proc_; }

 private:
  std::string proc_;
};

}  // namespace ingero::hal

// Finds vendor library files on the host, from every source the architecture names:
//   * the maps of running processes, opened through /proc/PID/root so container paths work;
//   * the dynamic loader cache;
//   * vendor install directories (CUDA_HOME, /usr/local/cuda*, pip-wheel layouts, ...),
//     which backends supply as globs.
// Files are deduplicated by (device, inode): symlinks and bind mounts of one file are one
// file. Only names that some backend hints at, and main executables (statically linked
// runtimes), are reported; everything else is ignored cheaply.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "probe/elf_symbols.h"
#include "probe/proc_maps.h"

namespace ingero::hal {

struct DiscoveredFile {
  std::string path;          // openable from here
  std::string display_path;  // as the process/filesystem names it
  FileIdentity id;
  std::set<std::string> sources;  // "maps", "ld.so.cache", "install-dir"
  std::set<int> pids;             // processes mapping it at scan time
  bool main_executable = false;
};

struct DiscoveryOptions {
  std::vector<std::string> hints;  // basename prefixes ("libcudart")
  std::vector<std::string> dirs;   // directory globs
  bool main_executables = true;    // look for statically linked runtimes
  std::string ld_cache = "/etc/ld.so.cache";
  // Where our root keeps its dynamic loaders: watched whether or not a process we may read
  // maps one (with CAP_BPF+CAP_PERFMON and no root, no root-owned process's maps can be read,
  // and a command's dlopen went unseen).
  std::vector<std::string> loader_globs = {"/lib64/ld-linux*.so*", "/lib/ld-linux*.so*",
                                           "/lib/*-linux-gnu/ld-linux*.so*",
                                           "/usr/lib/*-linux-gnu/ld-linux*.so*"};
};

class LibraryDiscovery {
 public:
  LibraryDiscovery(const HostView& host, DiscoveryOptions options)
      : host_(host), opts_(std::move(options)) {}

  // Every source. Results are unique by identity. `only`: the processes whose maps are read
  // (a trace filtered by pid traces no other); null: every process of the host.
  std::vector<DiscoveredFile> scan_all(const std::vector<int>* only = nullptr);
  // One process's current mappings (after exec or dlopen). `maps`: where the mappings read
  // are left, parsed, for the caller's other uses (the stack collector's snapshot): one read of
  // /proc/PID/maps for both, which on a host-wide trace happens at every exec of the host.
  std::vector<DiscoveredFile> scan_process(int pid, std::vector<MapEntry>* maps = nullptr);
  // One file named directly (the command `ingero trace -- CMD` is about to run).
  std::vector<DiscoveredFile> scan_file(const std::string& path, bool main_executable);
  // Dynamic loaders seen in process maps or installed in our root (loader_globs), for
  // link-map notifications.
  const std::vector<DiscoveredFile>& loaders() const { return loaders_; }

  bool hinted(std::string_view basename) const;

 private:
  void add(std::unordered_map<FileIdentity, DiscoveredFile, FileIdentityHash>& out,
           const std::string& path, const std::string& display, const std::string& source, int pid,
           bool main_exe);
  void scan_maps(int pid, std::unordered_map<FileIdentity, DiscoveredFile, FileIdentityHash>& out,
                 std::vector<MapEntry>* maps_out = nullptr);

  const HostView& host_;
  DiscoveryOptions opts_;
  std::vector<DiscoveredFile> loaders_;
  std::set<std::pair<dev_t, ino_t>> loader_ids_;
  // Loaders of our own root already identified, by their mapping's path, device and inode (a
  // loader replaced by an upgrade is a new one).
  std::set<std::tuple<std::string, uint32_t, uint32_t, uint64_t>> own_loaders_;
  std::optional<Result<FileIdentity>> self_root_;  // "/", once looked up
};

std::string_view path_basename(std::string_view path);

}  // namespace ingero::hal

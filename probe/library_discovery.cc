#include "probe/library_discovery.h"

#include <cstdio>

#include "probe/ld_cache.h"

namespace ingero::hal {

std::string_view path_basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool LibraryDiscovery::hinted(std::string_view basename) const {
  for (const auto& h : opts_.hints) {
    if (basename.substr(0, h.size()) != h) continue;
    std::string_view rest = basename.substr(h.size());
    if (rest.empty() || rest[0] == '.' || rest[0] == '-' || rest[0] == '_') return true;
  }
  return false;
}

void LibraryDiscovery::add(std::unordered_map<FileIdentity, DiscoveredFile, FileIdentityHash>& out,
                           const std::string& path, const std::string& display,
                           const std::string& source, int pid, bool main_exe) {
  auto id = host_.identify(path);
  if (!id) return;  // vanished, or not ours to read: not an error for discovery
  auto [it, fresh] = out.try_emplace(*id);
  DiscoveredFile& f = it->second;
  if (fresh) {
    f.path = path;
    f.display_path = display;
    f.id = *id;
  }
  f.sources.insert(source);
  if (pid > 0) f.pids.insert(pid);
  f.main_executable = f.main_executable || main_exe;
}

void LibraryDiscovery::scan_maps(
    int pid, std::unordered_map<FileIdentity, DiscoveredFile, FileIdentityHash>& out,
    std::vector<MapEntry>* maps_out) {
  std::string proc = host_.proc_root() + "/" + std::to_string(pid);
  auto text = host_.read_text(proc + "/maps");
  if (!text) return;  // exited or inaccessible
  // A main thread that ended with pthread_exit leaves its process running in its other threads,
  // with /proc/PID/maps (root, exe) empty: they are read through a live thread's. A library such
  // a process loaded was never attached.
  if (text->empty())
    for (const std::string& t : host_.glob(proc + "/task/*/maps"))
      if (auto live = host_.read_text(t); live && !live->empty()) {
        proc = t.substr(0, t.size() - std::string_view("/maps").size());
        text = std::move(live);
        break;
      }
  std::string exe;
  if (opts_.main_executables) {
    if (auto l = host_.readlink(proc + "/exe")) exe = *l;
  }
  // A process in our own mount namespace: its paths are ours, and stay valid after it exits
  // (attach needs a path the kernel can resolve; /proc/PID/root/... dies with the process).
  // Ours is looked up once (until found): this runs at every exec of the host on a host-wide
  // trace.
  if (!self_root_ || !*self_root_) self_root_ = host_.identify("/");
  const auto& self_root = *self_root_;
  auto its_root = host_.identify(proc + "/root");
  bool same_root =
      self_root && its_root && self_root->dev == its_root->dev && self_root->ino == its_root->ino;
  std::set<std::string_view> done;
  auto maps = parse_proc_maps(*text);
  for (const MapEntry& m : maps) {
    if (!m.executable() || m.path.empty() || m.path[0] != '/') continue;
    std::string_view base = path_basename(m.path);
    char range[48];
    std::snprintf(range, sizeof range, "/map_files/%llx-%llx",
                  static_cast<unsigned long long>(m.start), static_cast<unsigned long long>(m.end));
    if (m.deleted) {
      // Replaced or removed on disk since the process mapped it (pip or dpkg renames a new
      // file over the old one under a running job): the process still runs the old file, which
      // only its map_files entry reaches now. It was skipped, and the job went untraced with
      // no word said.
      if (!hinted(base)) continue;
      add(out, proc + range, m.path + std::string(kDeletedMark), "maps", pid, false);
      continue;
    }
    if (!done.insert(m.path).second) continue;
    std::string openable = same_root ? m.path : proc + "/root" + m.path;
    if (base.substr(0, 9) == "ld-linux-" || base.substr(0, 6) == "ld.so.") {
      // A loader of our own root identified before is not looked up again (every process
      // maps one).
      std::tuple key{m.path, m.dev_major, m.dev_minor, m.inode};
      if (!same_root || !own_loaders_.count(key)) {
        auto id = host_.identify(openable);
        if (id && same_root) own_loaders_.insert(std::move(key));
        if (id && loader_ids_.insert({id->dev, id->ino}).second)
          loaders_.push_back({openable, m.path, *id, {"maps"}, {pid}, false});
      }
    }
    bool is_main = !exe.empty() && m.path == exe;
    if (!is_main && !hinted(base)) continue;
    // The file its path names from here may not be the one it mapped: after a chroot its maps
    // give our paths and its root is another; a private mount namespace may bind-mount another
    // copy over the path, or hold it on a tmpfs of its own. Each went untraced without a word.
    // The mapped file itself is its map_files entry.
    if (auto id = host_.identify(openable); !id || (m.inode && id->ino != m.inode))
      if (host_.identify(proc + range)) openable = proc + range;
    add(out, openable, m.path, "maps", pid, is_main);
  }
  if (maps_out) *maps_out = std::move(maps);
}

std::vector<DiscoveredFile> LibraryDiscovery::scan_process(int pid, std::vector<MapEntry>* maps) {
  std::unordered_map<FileIdentity, DiscoveredFile, FileIdentityHash> out;
  scan_maps(pid, out, maps);
  std::vector<DiscoveredFile> v;
  for (auto& [id, f] : out) v.push_back(std::move(f));
  return v;
}

std::vector<DiscoveredFile> LibraryDiscovery::scan_file(const std::string& path, bool main_exe) {
  std::unordered_map<FileIdentity, DiscoveredFile, FileIdentityHash> out;
  add(out, path, path, main_exe ? "command" : "file", 0, main_exe);
  std::vector<DiscoveredFile> v;
  for (auto& [id, f] : out) v.push_back(std::move(f));
  return v;
}

std::vector<DiscoveredFile> LibraryDiscovery::scan_all(const std::vector<int>* only) {
  std::unordered_map<FileIdentity, DiscoveredFile, FileIdentityHash> out;
  for (int pid : only ? *only : host_.pids()) scan_maps(pid, out);
  for (const std::string& g : opts_.loader_globs)
    for (const std::string& p : host_.glob(g))
      if (auto id = host_.identify(p); id && loader_ids_.insert({id->dev, id->ino}).second)
        loaders_.push_back({p, p, *id, {"install-dir"}, {}, false});

  if (auto bytes = host_.read_text(opts_.ld_cache)) {
    if (auto entries = parse_ld_cache(*bytes)) {
      for (const auto& e : *entries)
        if (hinted(e.soname)) add(out, e.path, e.path, "ld.so.cache", 0, false);
    }
  }
  for (const auto& dir : opts_.dirs) {
    for (const auto& d : host_.glob(dir)) {
      for (const auto& h : opts_.hints) {
        for (const auto& p : host_.glob(d + "/" + h + "*.so*"))
          if (hinted(path_basename(p))) add(out, p, p, "install-dir", 0, false);
      }
    }
  }
  std::vector<DiscoveredFile> v;
  for (auto& [id, f] : out) v.push_back(std::move(f));
  return v;
}

}  // namespace ingero::hal

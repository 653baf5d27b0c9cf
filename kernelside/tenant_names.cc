#include "kernelside/tenant_names.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>

namespace ingero::kernelside {
namespace {

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Reads at most `max` bytes of a regular file (or a /proc file) opened as `fd`; closes it.
std::optional<std::string> read_fd(int fd, size_t max) {
  struct stat st {};
  // A FIFO or a device in a container's tree must not block the tracer.
  if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode))) {
    close(fd);
    return std::nullopt;
  }
  std::string out;
  char buf[4096];
  while (out.size() < max) {
    ssize_t n = ::read(fd, buf, std::min(sizeof(buf), max - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  close(fd);
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// Whether `full` ends with the components of `rel` after its leading ".." ones: "/../../b/c"
// ends "/a/b/c".
bool ends_with_components(const std::string& full, const std::string& rel) {
  std::string tail = rel;
  while (tail.rfind("/..", 0) == 0) tail.erase(0, 3);
  if (tail.empty() || tail[0] != '/' || tail.find("/..") != std::string::npos) return false;
  return full.size() >= tail.size() &&
         full.compare(full.size() - tail.size(), tail.size(), tail) == 0;
}

void add_from(TenantNames& n, const char* what) {
  if (n.from.find(what) != std::string::npos) return;
  n.from += (n.from.empty() ? "" : ",") + std::string(what);
}

struct StateFile {
  const char* runtime;  // as CgroupLayout::runtime names it
  const char* dir;      // under a root
  const char* file;     // under DIR/ID
  bool docker;          // config.v2.json, else an OCI config.json
};
constexpr StateFile kStateFiles[] = {
    {"containerd", "io.containerd.runtime.v2.task/k8s.io", "config.json", false},
    {"cri-o", "overlay-containers", "userdata/config.json", false},
    {"docker", "containers", "config.v2.json", true},
    {"containerd", "io.containerd.runtime.v2.task/default", "config.json", false},
};

}  // namespace

std::vector<std::string> TenantSources::default_runtime_roots(const std::string& proc) {
  // Through PID 1's root: the host's files, also from a DaemonSet pod with hostPID.
  std::vector<std::string> out;
  for (const char* r :
       {"/run/containerd", "/run/k3s/containerd", "/var/snap/microk8s/common/run/containerd",
        "/run/containers/storage", "/var/lib/containers/storage", "/var/lib/docker"})
    out.push_back(proc + "/1/root" + r);
  return out;
}

TenantResolver::TenantResolver(TenantSources sources) : src_(std::move(sources)) {
  root_ = src_.cgroup_root;
  if (root_.empty()) {
    int fd = open((src_.proc + "/self/mountinfo").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      // /proc files report size 0: read_fd's regular-file check holds for them.
      if (auto m = read_fd(fd, 1 << 20)) root_ = cgroup2_mount(*m).value_or("");
    }
  }
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::optional<std::string> TenantResolver::read(const std::string& path, size_t max,
                                                const char* kind) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    ++cost_.absent;
    return std::nullopt;
  }
  auto r = read_fd(fd, max);
  if (!r) {
    ++cost_.absent;
    return r;
  }
  ++cost_.reads;
  ++cost_.files[kind];
  cost_.bytes += r->size();
  return r;
}

std::optional<std::string> TenantResolver::read_in_root(uint32_t pid, const char* path, size_t max,
                                                        const char* kind) {
  std::string root = src_.proc + "/" + std::to_string(pid) + "/root";
  int dir = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    ++cost_.absent;
    return std::nullopt;
  }
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  int fd = int(syscall(SYS_openat2, dir, path, &how, sizeof(how)));
  close(dir);
  if (fd < 0) {
    ++cost_.absent;
    return std::nullopt;
  }
  auto r = read_fd(fd, max);
  if (!r) {
    ++cost_.absent;
    return r;
  }
  ++cost_.reads;
  ++cost_.files[kind];
  cost_.bytes += r->size();
  return r;
}

// Whether the process has a UTS namespace of its own (not the host's: PID 1's).
bool TenantResolver::own_uts(uint32_t pid) {
  struct stat mine {
  }, host{};
  std::string p = src_.proc + "/" + std::to_string(pid) + "/ns/uts";
  if (stat(p.c_str(), &mine) != 0) return false;
  if (stat((src_.proc + "/1/ns/uts").c_str(), &host) != 0 &&
      stat((src_.proc + "/self/ns/uts").c_str(), &host) != 0)
    return false;
  ++cost_.files["uts"];
  return mine.st_ino != host.st_ino || mine.st_dev != host.st_dev;
}

void TenantResolver::read_names(uint32_t pid, CgroupTenant& t) {
  const CgroupLayout& l = t.layout;
  TenantNames& n = t.names;
  if (!l.container_id.empty()) {
    for (const std::string& root : src_.runtime_roots) {
      bool found = false;
      for (const StateFile& f : kStateFiles) {
        if (!l.runtime.empty() && l.runtime != f.runtime) continue;
        std::string dir = root + "/" + f.dir;
        struct stat st {};
        if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        auto text = read(dir + "/" + l.container_id + "/" + f.file, 4 << 20, f.runtime);
        if (!text) continue;
        RuntimeNames rn = f.docker ? names_from_docker_config(*text) : names_from_oci_config(*text);
        // The runtime's record of another pod is not this one's.
        if (rn.pod_uid && l.kubernetes() && *rn.pod_uid != l.pod_uid) continue;
        bool any = false;
        if (l.kubernetes() && rn.pod && !n.pod) n.pod = rn.pod, any = true;
        if (l.kubernetes() && rn.pod_namespace && !n.pod_namespace)
          n.pod_namespace = rn.pod_namespace, any = true;
        if (!l.monitor && rn.container && !n.container) n.container = rn.container, any = true;
        if (any) add_from(n, f.runtime);
        found = true;
        break;
      }
      if (found) break;
    }
  }
  // A monitor runs on the host: its environment and root are not the pod's.
  if (!l.kubernetes() || !pid || l.monitor) return;
  if (!n.pod && own_uts(pid)) {
    auto env = read(src_.proc + "/" + std::to_string(pid) + "/environ", 1 << 20, "environ");
    if (env)
      if (auto h = environ_value(*env, "HOSTNAME"); h && dns_subdomain(*h)) {
        n.pod = *h;
        add_from(n, "environ");
      }
  }
  if (!n.pod_namespace) {
    auto ns = read_in_root(pid, "var/run/secrets/kubernetes.io/serviceaccount/namespace", 256,
                           "serviceaccount");
    if (ns)
      if (std::string v = trim(*ns); dns_label(v)) {
        n.pod_namespace = v;
        add_from(n, "serviceaccount");
      }
  }
}

// The path of `cgroup_id` from walking the hierarchy, walked again at most every 10 s when
// an id is missing (a cgroup created since).
std::optional<std::string> TenantResolver::walked_path(uint64_t cgroup_id) {
  auto it = walked_.find(cgroup_id);
  if (it != walked_.end()) return it->second;
  int64_t now = mono_ns();
  if (root_.empty() || (walked_at_ && now - walked_at_ < kWalkEveryNs)) return std::nullopt;
  walked_at_ = now;
  walked_ = walk_cgroup_paths(root_);
  ++cost_.walks;
  cost_.walk_ns += mono_ns() - now;
  it = walked_.find(cgroup_id);
  if (it == walked_.end()) return std::nullopt;
  return it->second;
}

CgroupTenant TenantResolver::resolve(uint64_t cgroup_id, uint32_t pid) {
  std::lock_guard<std::mutex> g(mu_);
  CgroupTenant none;
  none.id = cgroup_id;
  if (!cgroup_id) return none;
  auto it = cache_.find(cgroup_id);
  if (it != cache_.end() && it->second.settled) return it->second.t;
  if (it == cache_.end()) {
    if (cache_.size() >= kMaxCgroups) {
      ++cost_.over_cap;
      return none;
    }
    it = cache_.emplace(cgroup_id, Entry{}).first;
    it->second.t.id = cgroup_id;
  }
  Entry& e = it->second;
  int64_t t0 = mono_ns();
  ++e.tries;
  // The path as the process reports it, checked against the id: its files then speak for the
  // cgroup. Else (the process left it, or is gone) the hierarchy says where the cgroup is, and
  // only the runtime's state is read for it.
  std::optional<std::string> path;
  bool in_it = false;
  if (pid && !root_.empty()) {
    auto text = read(src_.proc + "/" + std::to_string(pid) + "/cgroup", 64 << 10, "cgroup");
    auto own = text ? v2_path_of(*text) : std::nullopt;
    struct stat st {};
    if (own && own->find("/..") == std::string::npos) {
      in_it = stat((root_ + (*own == "/" ? "" : *own)).c_str(), &st) == 0 &&
              uint64_t(st.st_ino) == cgroup_id;
      if (in_it) path = own;
    } else if (own) {
      // Relative to our own cgroup namespace (a container's): it names the cgroup when its
      // components below the ".." are the end of the cgroup's path in the hierarchy.
      path = walked_path(cgroup_id);
      in_it = path && ends_with_components(*path, *own);
    }
  }
  if (!path) path = walked_path(cgroup_id);
  if (path) {
    e.t.path = *path;
    e.t.layout = parse_cgroup_path(e.t.path);
    if (e.t.layout.recognised() && src_.names) read_names(in_it ? pid : 0, e.t);
    e.settled = true;
    ++cost_.cgroups;
    if (e.t.names.any()) ++cost_.named;
  }
  if (e.tries >= kTries) e.settled = true;
  cost_.ns += mono_ns() - t0;
  return e.t;
}

CgroupTenant TenantResolver::resolve_path(uint64_t cgroup_id, const std::string& path) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = cache_.find(cgroup_id);
  if (it != cache_.end() && !it->second.t.path.empty()) return it->second.t;
  if (it == cache_.end()) it = cache_.emplace(cgroup_id, Entry{}).first;
  Entry& e = it->second;
  int64_t t0 = mono_ns();
  e.t.id = cgroup_id;
  e.t.path = path;
  e.t.layout = parse_cgroup_path(path);
  if (e.t.layout.recognised() && src_.names) read_names(0, e.t);
  e.settled = true;
  ++cost_.cgroups;
  if (e.t.names.any()) ++cost_.named;
  cost_.ns += mono_ns() - t0;
  return e.t;
}

bool TenantResolver::settled(uint64_t cgroup_id) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = cache_.find(cgroup_id);
  return !cgroup_id || (it != cache_.end() && it->second.settled) ||
         (it == cache_.end() && cache_.size() >= kMaxCgroups);
}

std::optional<CgroupTenant> TenantResolver::find(uint64_t cgroup_id) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = cache_.find(cgroup_id);
  if (it == cache_.end()) return std::nullopt;
  return it->second.t;
}

std::vector<CgroupTenant> TenantResolver::all() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<CgroupTenant> out;
  for (const auto& [id, e] : cache_) out.push_back(e.t);
  return out;
}

TenantCost TenantResolver::cost() const {
  std::lock_guard<std::mutex> g(mu_);
  return cost_;
}

std::map<uint64_t, std::string> walk_cgroup_paths(const std::string& root) {
  std::map<uint64_t, std::string> out;
  std::error_code ec;
  struct stat st {};
  if (root.empty() || stat(root.c_str(), &st) != 0) return out;
  out[st.st_ino] = "/";
  for (auto it = std::filesystem::recursive_directory_iterator(
           root, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    if (stat(it->path().c_str(), &st) == 0)
      out[st.st_ino] = "/" + std::filesystem::relative(it->path(), root, ec).string();
  }
  return out;
}

}  // namespace ingero::kernelside

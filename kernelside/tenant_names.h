// Who a cgroup belongs to, read from the host without a cluster API: its path (from a process
// in it), the layout that path shows (kernelside/cgroup_layout.h), and for a container or a pod
// the names the host keeps:
//   container, pod, namespace  from the runtime's state where it is a file (containerd's and
//                              CRI-O's OCI config.json annotations, Docker's config.v2.json),
//                              read as root without a socket;
//   pod                        else the process's HOSTNAME (/proc/PID/environ), when the process
//                              has a UTS namespace of its own (a host-network pod shares the
//                              node's, and its HOSTNAME names the node: not taken);
//   namespace                  else the service-account file the pod mounts,
//                              /var/run/secrets/kubernetes.io/serviceaccount/namespace, resolved
//                              inside the process's root (/proc/PID/root with RESOLVE_IN_ROOT:
//                              the container's /var/run -> /run symlink is followed in the
//                              container, not on the host).
// A name that is not there, or breaks the Kubernetes name rules, stays absent: nothing is
// guessed. Each cgroup is read once, for the first process seen in it, and cached.
//
// Only the processes the tracer names (those its events name, callers and preemptors) are read;
// nothing scans /proc.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernelside/cgroup_layout.h"

namespace ingero::kernelside {

struct TenantNames {
  std::optional<std::string> pod, pod_namespace, container;
  // Where they came from, comma-separated: "containerd", "cri-o", "docker" (the runtime's
  // state), "environ" (HOSTNAME), "serviceaccount"; "" when none was found.
  std::string from;
  bool any() const { return pod || pod_namespace || container; }
};

struct CgroupTenant {
  uint64_t id = 0;
  std::string path;  // relative to the v2 mount ("/kubepods.slice/..."); "" while unknown
  CgroupLayout layout;
  TenantNames names;
};

// Where the resolver reads; tests point these at a tree of their own.
struct TenantSources {
  std::string proc = "/proc";
  // The cgroup v2 mount; "" finds it in PROC/self/mountinfo (a hybrid host's
  // /sys/fs/cgroup/unified included).
  std::string cgroup_root;
  // Runtime state roots, each tried for containerd (R/io.containerd.runtime.v2.task/{k8s.io,
  // moby,default}/ID/config.json), CRI-O (R/overlay-containers/ID/userdata/config.json) and
  // Docker (R/containers/ID/config.v2.json).
  std::vector<std::string> runtime_roots = default_runtime_roots();
  // false: paths and layouts only; no file of a process or a runtime is read for names.
  bool names = true;
  // The defaults: /run/containerd, /run/k3s/containerd,
  // /var/snap/microk8s/common/run/containerd, /run/containers/storage,
  // /var/lib/containers/storage, /var/lib/docker, each read through PROC/1/root (the host's
  // root: the same files on the host, and the host's from a DaemonSet pod with hostPID).
  static std::vector<std::string> default_runtime_roots(const std::string& proc = "/proc");
};

// What naming cost so far: the files read (by kind: "cgroup", "environ", "serviceaccount",
// "uts", "containerd", "cri-o", "docker"), those absent or unreadable, and the time spent.
struct TenantCost {
  uint64_t cgroups = 0;  // resolved (each once)
  uint64_t named = 0;    // of them, with at least one name
  uint64_t reads = 0, absent = 0, bytes = 0;
  int64_t ns = 0;
  uint64_t over_cap = 0;  // cgroups past kMaxCgroups, not resolved
  // Walks of the hierarchy for cgroups a process's /proc/PID/cgroup could not place (it left
  // them, or the tracer has a cgroup namespace of its own): at most one per 10 s.
  uint64_t walks = 0;
  int64_t walk_ns = 0;
  std::map<std::string, uint64_t> files;
};

class TenantResolver {
 public:
  explicit TenantResolver(TenantSources sources = {});

  // The cgroup `cgroup_id` that process `pid` was seen in: resolved on the first call, cached
  // after. Its path is the process's (/proc/PID/cgroup, checked against the id: then the
  // process's files give names too); else, when the process left the cgroup or is gone, or its
  // path is relative to the tracer's own cgroup namespace, the hierarchy's (walked, at most
  // every 10 s), and then only the runtime's state is read unless the process's relative path
  // matches. A cgroup found nowhere (deleted) is tried again by later calls, 3 tries in all.
  // Thread-safe. cgroup 0 is never resolved.
  CgroupTenant resolve(uint64_t cgroup_id, uint32_t pid);
  // A cgroup known only by its path (the hierarchy walked at a session's end, its processes
  // gone): its layout and the names the runtime's state keeps (nothing of a process).
  CgroupTenant resolve_path(uint64_t cgroup_id, const std::string& path);
  // Whether `cgroup_id` needs no more resolve() calls (resolved, or out of tries).
  bool settled(uint64_t cgroup_id) const;
  std::optional<CgroupTenant> find(uint64_t cgroup_id) const;
  std::vector<CgroupTenant> all() const;
  TenantCost cost() const;
  const std::string& cgroup_root() const { return root_; }

  static constexpr size_t kMaxCgroups = 16384;
  static constexpr int kTries = 3;

 private:
  struct Entry {
    CgroupTenant t;
    int tries = 0;
    bool settled = false;
  };
  std::optional<std::string> read(const std::string& path, size_t max, const char* kind);
  std::optional<std::string> read_in_root(uint32_t pid, const char* path, size_t max,
                                          const char* kind);
  void read_names(uint32_t pid, CgroupTenant& t);
  std::optional<std::string> walked_path(uint64_t cgroup_id);
  static constexpr int64_t kWalkEveryNs = 10'000'000'000;
  bool own_uts(uint32_t pid);

  TenantSources src_;
  std::string root_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> cache_;
  std::map<uint64_t, std::string> walked_;  // the last walk
  int64_t walked_at_ = 0;
  TenantCost cost_;
};

// cgroup v2 id -> path (relative to `root`, "/" for the root) of every cgroup under `root`, by
// walking it: the id is the directory's inode number.
std::map<uint64_t, std::string> walk_cgroup_paths(const std::string& root);

}  // namespace ingero::kernelside

// What a cgroup v2 path says about who runs in it: the container runtime's scope, the
// Kubernetes pod (UID and QoS class) and the cgroup driver that named them. Pure functions of
// text, no I/O: kernelside/tenant_names.h reads the files these parse.
//
// Layouts recognised (docs/schema.md, "cgroup_metadata", lists them with examples):
//   systemd driver  .../kubepods[-<qos>]-pod<uid with '_' for '-'>.slice/<scope>
//                   where <scope> is cri-containerd-<id>.scope (containerd), crio-<id>.scope
//                   (CRI-O), docker-<id>.scope (Docker, cri-dockerd); kubepods-pod<uid> is a
//                   Guaranteed pod, burstable and besteffort name their QoS class. The slices may
//                   carry a prefix (kind's kubelet-kubepods-...) and sit under any parent.
//   cgroupfs driver .../kubepods[/burstable|/besteffort]/pod<uid>/<64-hex id> (or crio-<id>)
//   plain Docker    /system.slice/docker-<id>.scope, /docker/<id>
//   Podman          libpod-<id>.scope, /libpod_parent/libpod-<id>
//   runtime monitors crio-conmon-<id>.scope, libpod-conmon-<id>.scope: the pod (if any) is
//                   known; the cgroup is the monitor's, not the container's.
// The innermost container wins (a kind node is itself a Docker container). A hybrid host mounts
// the v2 hierarchy at /sys/fs/cgroup/unified; its paths read the same.
//
// Nothing is guessed: a path that matches none of these (a systemd service, a user session, a
// layout not listed) gives an empty layout, and a component that almost matches (an id that is
// not 64 hex digits, a pod UID of the wrong shape) is not taken.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ingero::kernelside {

enum class QosClass : uint8_t { kNone, kGuaranteed, kBurstable, kBestEffort };
// "", "guaranteed", "burstable", "besteffort"
std::string_view qos_name(QosClass q);

struct CgroupLayout {
  std::string_view driver;   // "systemd", "cgroupfs"; "" when nothing was recognised
  std::string_view runtime;  // "containerd", "cri-o", "docker", "podman"; "" unknown (a bare id)
  std::string container_id;  // 64 lowercase hex digits; "" when not a container's cgroup
  bool monitor = false;      // a runtime's monitor (conmon) of container_id, not the container
  std::string pod_uid;       // Kubernetes pod UID, with dashes; "" when not a pod's
  QosClass qos = QosClass::kNone;
  bool kubernetes() const { return !pod_uid.empty(); }
  bool container() const { return !container_id.empty() && !monitor; }
  bool recognised() const { return kubernetes() || !container_id.empty(); }
};

CgroupLayout parse_cgroup_path(std::string_view path);

// The cgroup v2 line ("0::/path") of /proc/PID/cgroup: the path, relative to the reader's
// cgroup namespace root. nullopt without one (a v1-only host, or an unreadable file).
std::optional<std::string> v2_path_of(std::string_view proc_pid_cgroup);

// Where the cgroup v2 hierarchy is mounted, from /proc/self/mountinfo: /sys/fs/cgroup on a
// unified host, /sys/fs/cgroup/unified on a hybrid one (v1 controllers beside it). Among
// several mounts: /sys/fs/cgroup, then /sys/fs/cgroup/unified, then the first whose root is the
// hierarchy's. nullopt: no cgroup2 mount.
std::optional<std::string> cgroup2_mount(std::string_view mountinfo);

// The value of `key` in a NUL-separated environment (/proc/PID/environ), first occurrence.
std::optional<std::string> environ_value(std::string_view environ, std::string_view key);

// Kubernetes name rules: a DNS-1123 label (namespaces, container names: [a-z0-9-], at most 63,
// alphanumeric at both ends) and subdomain (pod names: labels joined by '.', at most 253).
bool dns_label(std::string_view s);
bool dns_subdomain(std::string_view s);

// Names a runtime's own state records for a container (nullopt: not recorded there).
struct RuntimeNames {
  std::optional<std::string> container, pod, pod_namespace, pod_uid;
  bool sandbox = false;  // the pod's sandbox (pause) container, which has no container name
};
// An OCI bundle's config.json as containerd (annotations io.kubernetes.cri.*) or CRI-O
// (io.kubernetes.container.name, io.kubernetes.pod.*) write it. Names that break the
// Kubernetes rules are dropped; text that is not JSON gives nothing.
RuntimeNames names_from_oci_config(std::string_view json);
// Docker's config.v2.json: the io.kubernetes.* labels cri-dockerd sets, else the container's
// own name ("/web-1" -> "web-1"; [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most 128).
RuntimeNames names_from_docker_config(std::string_view json);

}  // namespace ingero::kernelside

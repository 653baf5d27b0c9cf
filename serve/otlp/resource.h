// Who the telemetry is about. The resource is the agent: service.name "ingero",
// service.version, host.name, ingero.node (the --node name events carry), and, where ingero
// itself runs in a container, container.id and k8s.pod.uid read from its cgroup; then
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, the OpenTelemetry variables, which win.
// Log records and spans are about traced processes: their container.id and k8s.pod.uid come
// from the process's own cgroup (process_container). Pure but for the /proc reads it names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hal/result.h"
#include "serve/otlp/config.h"

namespace ingero::serve::otlp {

// What a cgroup v2 path says about its container: the 64-hex-digit id of docker, containerd,
// CRI-O and podman scopes ("docker-<id>.scope", "cri-containerd-<id>.scope", "crio-<id>.scope",
// "libpod-<id>.scope", or a bare "<id>" component) and the pod UID of a kubelet slice
// ("kubepods-burstable-pod<uid>.slice", with '_' for '-', or "pod<uid>"). Empty when absent.
struct ContainerIds {
  std::string container_id, pod_uid;
  bool empty() const { return container_id.empty() && pod_uid.empty(); }
};
ContainerIds container_ids(std::string_view cgroup_path);
// The same from a /proc/PID/cgroup text (its "0::PATH" line, the unified hierarchy).
ContainerIds container_ids_of_proc(std::string_view proc_cgroup_text);
// /proc/PID/cgroup read now; empty when the process has gone or is not in a container.
ContainerIds process_container(uint32_t pid, const std::string& proc_root = "/proc");

using Attributes = std::vector<std::pair<std::string, std::string>>;
// The agent's resource attributes, in order. `self_cgroup` is /proc/self/cgroup's text.
// A malformed OTEL_RESOURCE_ATTRIBUTES is an error naming it.
ingero::Result<Attributes> agent_resource(const std::string& host_name, const std::string& node,
                                          std::string_view self_cgroup, const EnvFn& env);

}  // namespace ingero::serve::otlp

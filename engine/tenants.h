// Tenants: who a cgroup belongs to (a Kubernetes pod, a container, or only a cgroup path), as
// people name them, and an analysis seen per tenant: GPU API time, preempted time, and who
// preempted whom across tenants (`explain --group-by pod`, the `tenants` section of the JSON,
// MCP get_tenants). Reads nothing: the names come with the trace (TraceSource::cgroups()).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/analysis.h"

namespace ingero::engine {

// "pod team-b/etl-5d8f (container etl)", "pod etl-5d8f" (namespace unknown), "pod uid <uid>
// (container 9b1c2d3e4f5a)" (names unknown: the container's id, short), "container web-1",
// "docker container 9b1c2d3e4f5a"; "" for a cgroup that is neither a pod's nor a container's.
std::string tenant_label(const CgroupInfo& c);
// The pod alone: "pod team-b/etl-5d8f"; "" when not a pod's.
std::string pod_label(const CgroupInfo& c);
// How a cgroup is named in chains and reports: tenant_label, else its path, else "cgroup <id>".
std::string cgroup_name(const std::map<uint64_t, CgroupInfo>& cgroups, uint64_t id);
// Whether two cgroups are one tenant: the same cgroup, or containers of one pod.
bool same_tenant(const std::map<uint64_t, CgroupInfo>& cgroups, uint64_t a, uint64_t b);
// Whether the trace names some tenant (a pod or a container).
bool names_tenants(const std::map<uint64_t, CgroupInfo>& cgroups);

enum class TenantGrouping : uint8_t {
  kPod,        // a pod's containers together; containers and cgroups outside pods alone
  kContainer,  // every container (cgroup) alone
};
std::string_view grouping_name(TenantGrouping g);  // "pod", "container"

struct TenantUsage {
  std::string name;  // as grouped: "pod team-a/trainer-7f9c", "container web-1", a path, ...
  std::string kind;  // "pod", "container", "cgroup" (no layout recognised), "unknown" (no cgroup)
  std::string pod, pod_namespace, pod_uid, qos;  // pods
  std::vector<std::string> containers;           // names, or short ids
  std::vector<uint64_t> cgroup_ids;
  std::vector<uint32_t> gpu_pids;  // its processes that made GPU calls
  uint64_t calls = 0, api_ns = 0;  // their GPU API calls and time in them
  uint64_t api_off_cpu_ns = 0;     // off-CPU inside those calls (per-call data)
  // Involuntary off-CPU time of its GPU processes' threads (scheduler events), and of that,
  // what tasks of other tenants held the CPU for.
  uint64_t preempted_ns = 0, preemptions = 0, preempted_by_others_ns = 0;
  // Time its tasks held the CPU while other tenants' GPU threads waited for it.
  uint64_t preempting_ns = 0;
};

// The GPU threads of `victim` lost their CPU to tasks of `by`.
struct TenantPreemption {
  std::string victim, by;
  uint64_t ns = 0, count = 0;
  uint32_t top_pid = 0;  // the task of `by` that held it longest
  std::string top_comm;
};

struct TenantReport {
  TenantGrouping grouping = TenantGrouping::kPod;
  bool named = false;                    // some cgroup has a pod or container name
  std::vector<TenantUsage> tenants;      // by GPU API time, then preempted time
  std::vector<TenantPreemption> across;  // by time, descending
  size_t tenants_omitted = 0, across_omitted = 0;
};

inline constexpr size_t kMaxTenantRows = 100;

// Tenants with GPU processes, and those whose tasks preempted them.
TenantReport tenant_report(const Analysis& a, TenantGrouping g = TenantGrouping::kPod);

// The cgroup of a process with GPU calls (its first call's), else of its host events; 0 unknown.
uint64_t process_cgroup(const Analysis& a, uint32_t pid);

}  // namespace ingero::engine

#include "engine/tenants.h"

#include <algorithm>

namespace ingero::engine {
namespace {

std::string short_id(const std::string& id) { return id.substr(0, 12); }

std::string container_part(const CgroupInfo& c) {
  if (!c.container.empty()) return c.container;
  return short_id(c.container_id);
}

const CgroupInfo* info_of(const std::map<uint64_t, CgroupInfo>& cgroups, uint64_t id) {
  auto it = cgroups.find(id);
  return it == cgroups.end() ? nullptr : &it->second;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

}  // namespace

std::string pod_label(const CgroupInfo& c) {
  if (c.pod_uid.empty() && c.pod.empty()) return "";
  std::string name = c.pod.empty() ? "uid " + c.pod_uid : c.pod;
  return "pod " + (c.pod_namespace.empty() ? "" : c.pod_namespace + "/") + name;
}

std::string tenant_label(const CgroupInfo& c) {
  std::string pod = pod_label(c);
  std::string ctr = container_part(c);
  if (!pod.empty()) return ctr.empty() ? pod : pod + " (container " + ctr + ")";
  if (ctr.empty()) return "";
  if (c.container.empty() && !c.runtime.empty()) return c.runtime + " container " + ctr;
  return "container " + ctr;
}

std::string cgroup_name(const std::map<uint64_t, CgroupInfo>& cgroups, uint64_t id) {
  if (const CgroupInfo* c = info_of(cgroups, id)) {
    if (std::string t = tenant_label(*c); !t.empty()) return t;
    if (!c->path.empty()) return c->path;
  }
  return "cgroup " + std::to_string(id);
}

bool same_tenant(const std::map<uint64_t, CgroupInfo>& cgroups, uint64_t a, uint64_t b) {
  if (a == b) return true;
  const CgroupInfo* x = info_of(cgroups, a);
  const CgroupInfo* y = info_of(cgroups, b);
  return x && y && !x->pod_uid.empty() && x->pod_uid == y->pod_uid;
}

bool names_tenants(const std::map<uint64_t, CgroupInfo>& cgroups) {
  for (const auto& [id, c] : cgroups)
    if (!c.pod.empty() || !c.container.empty() || !c.pod_namespace.empty()) return true;
  return false;
}

std::string_view grouping_name(TenantGrouping g) {
  return g == TenantGrouping::kPod ? "pod" : "container";
}

uint64_t process_cgroup(const Analysis& a, uint32_t pid) {
  for (const OpStats& s : a.stats.per_process)
    if (s.key.pid == pid && s.cgroup_id) return s.cgroup_id;
  auto it = a.host.per_pid.find(pid);
  return it == a.host.per_pid.end() ? 0 : it->second.cgroup_id;
}

namespace {

// The tenants of one analysis, by name, as its cgroups are met.
class TenantTally {
 public:
  TenantTally(const Analysis& a, TenantGrouping g) : a_(a), g_(g) {}

  // The tenant of a cgroup, created on first use.
  TenantUsage& of(uint64_t id) {
    const CgroupInfo* c = info_of(a_.host.cgroups, id);
    auto [name, kind] = name_of(id, c);
    TenantUsage& t = by_name_[name];
    if (t.name.empty()) {
      t.name = name;
      t.kind = kind;
      if (c) {
        t.pod = c->pod;
        t.pod_namespace = c->pod_namespace;
        t.pod_uid = c->pod_uid;
        t.qos = c->qos;
      }
    }
    if (id && std::find(t.cgroup_ids.begin(), t.cgroup_ids.end(), id) == t.cgroup_ids.end()) {
      t.cgroup_ids.push_back(id);
      if (c) add_unique(t.containers, container_part(*c));
    }
    return t;
  }

  // GPU API calls and time, per process's tenant.
  void gpu_calls() {
    for (const OpStats& s : a_.stats.per_process) {
      auto known = gpu_tenant_.find(s.key.pid);
      TenantUsage& t =
          known != gpu_tenant_.end() ? by_name_[known->second] : of(process_cgroup(a_, s.key.pid));
      if (known == gpu_tenant_.end()) {
        gpu_tenant_[s.key.pid] = t.name;
        t.gpu_pids.push_back(s.key.pid);
      }
      t.calls += s.count;
      t.api_ns += s.sum_ns;
      t.api_off_cpu_ns += s.off_cpu_ns;
    }
  }

  // The GPU threads' preempted intervals: their tenant's, and across tenants by whom.
  void preemptions() {
    for (const auto& [pid, ivs] : a_.host.offcpu) {
      auto gt = gpu_tenant_.find(pid);
      if (gt == gpu_tenant_.end()) continue;  // not a process with GPU calls in the window
      const std::string victim = gt->second;
      for (const OffCpuInterval& iv : ivs) {
        if (!iv.preempted) continue;
        uint64_t d = uint64_t(iv.end - iv.start);
        TenantUsage& v = by_name_[victim];
        v.preempted_ns += d;
        ++v.preemptions;
        uint64_t cg = a_.host.by_cgroup(iv);
        if (!a_.host.by_pid(iv) || !cg) continue;  // who held the CPU is not known
        TenantUsage& by = of(cg);
        if (by.name == victim) continue;
        by_name_[victim].preempted_by_others_ns += d;
        by.preempting_ns += d;
        Pair& p = pairs_[{victim, by.name}];
        p.ns += d;
        ++p.count;
        p.tasks[{a_.host.by_pid(iv), a_.host.by_comm(iv)}] += d;
      }
    }
  }

  TenantReport report() {
    TenantReport r;
    r.grouping = g_;
    r.named = names_tenants(a_.host.cgroups);
    for (auto& [name, t] : by_name_) {
      std::sort(t.gpu_pids.begin(), t.gpu_pids.end());
      r.tenants.push_back(std::move(t));
    }
    std::sort(r.tenants.begin(), r.tenants.end(), [](const TenantUsage& x, const TenantUsage& y) {
      return std::tie(y.api_ns, y.preempted_ns, y.preempting_ns, x.name) <
             std::tie(x.api_ns, x.preempted_ns, x.preempting_ns, y.name);
    });
    r.tenants_omitted = cap(r.tenants);
    for (auto& [key, p] : pairs_) {
      TenantPreemption x{key.first, key.second, p.ns, p.count, 0, ""};
      auto top = std::max_element(p.tasks.begin(), p.tasks.end(), [](auto& l, auto& rr) {
        return l.second != rr.second ? l.second < rr.second : l.first > rr.first;
      });
      if (top != p.tasks.end()) {
        x.top_pid = top->first.first;
        x.top_comm = a_.host.comm_name(top->first.second);
      }
      r.across.push_back(std::move(x));
    }
    std::sort(r.across.begin(), r.across.end(), [](const auto& x, const auto& y) {
      return std::tie(y.ns, x.victim, x.by) < std::tie(x.ns, y.victim, y.by);
    });
    r.across_omitted = cap(r.across);
    return r;
  }

 private:
  struct Pair {
    uint64_t ns = 0, count = 0;
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> tasks;  // (pid, comm) -> ns
  };
  std::pair<std::string, std::string> name_of(uint64_t id, const CgroupInfo* c) const {
    if (!id) return {"no cgroup", "unknown"};
    if (c && g_ == TenantGrouping::kPod && !pod_label(*c).empty()) return {pod_label(*c), "pod"};
    if (c && !tenant_label(*c).empty())
      return {tenant_label(*c),
              c->container_id.empty() && c->container.empty() ? "pod" : "container"};
    return {cgroup_name(a_.host.cgroups, id), "cgroup"};
  }
  template <typename T>
  static size_t cap(std::vector<T>& v) {
    if (v.size() <= kMaxTenantRows) return 0;
    size_t left = v.size() - kMaxTenantRows;
    v.resize(kMaxTenantRows);
    return left;
  }

  const Analysis& a_;
  TenantGrouping g_;
  std::map<std::string, TenantUsage> by_name_;
  std::map<uint32_t, std::string> gpu_tenant_;  // GPU pid -> tenant name
  std::map<std::pair<std::string, std::string>, Pair> pairs_;
};

}  // namespace

TenantReport tenant_report(const Analysis& a, TenantGrouping g) {
  TenantTally t(a, g);
  t.gpu_calls();
  t.preemptions();
  return t.report();
}

}  // namespace ingero::engine

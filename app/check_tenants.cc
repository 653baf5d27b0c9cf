// `ingero check`: where cgroup v2 is (a hybrid host's included), which container and pod
// layouts the host's cgroups show, and what naming them costs: the check names a few of them
// exactly as the tracer would (kernelside/tenant_names.h) and says what it read and how long
// it took.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "app/check_items.h"
#include "capture/host_info.h"
#include "engine/chain.h"
#include "kernelside/tenant_names.h"

namespace ingero::app {
namespace {

constexpr size_t kMaxNamed = 4;       // cgroups named as the tracer would
constexpr size_t kMaxWalked = 50000;  // cgroups looked at

struct Found {
  std::string path;
  kernelside::CgroupLayout layout;
};

std::string files_read(const kernelside::TenantCost& c) {
  std::string s;
  for (const auto& [kind, n] : c.files) {
    if (kind == "uts") continue;  // a stat, not a read
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  }
  return s.empty() ? "nothing" : s;
}

std::string tenant_text(const kernelside::CgroupTenant& t) {
  const auto& n = t.names;
  std::string s;
  if (t.layout.kubernetes())
    s = "pod " + (n.pod_namespace ? *n.pod_namespace + "/" : "") +
        n.pod.value_or("uid " + t.layout.pod_uid);
  std::string ctr = n.container.value_or(t.layout.container_id.substr(0, 12));
  if (!ctr.empty()) s += s.empty() ? "container " + ctr : " (container " + ctr + ")";
  return s + " [" + (n.from.empty() ? "no names found" : n.from) + "]";
}

}  // namespace

void tenant_checks(const CheckInputs& in, CheckReport& rep) {
  const std::string& r = in.root;
  std::string mountinfo = capture::read_small_file(r + "/proc/self/mountinfo");
  auto mount = kernelside::cgroup2_mount(mountinfo);
  bool unified = std::filesystem::exists(r + "/sys/fs/cgroup/cgroup.controllers");
  if (!mount && unified) mount = "/sys/fs/cgroup";
  if (!mount) {
    rep.add("cgroup_v2", CheckStatus::kOptional, "not mounted",
            "events carry no usable cgroup id; per-container attribution is off",
            "boot with systemd.unified_cgroup_hierarchy=1");
    return;
  }
  bool hybrid = *mount != "/sys/fs/cgroup";
  rep.add("cgroup_v2", CheckStatus::kPass, hybrid ? "hybrid: v2 at " + *mount : "unified hierarchy",
          "cgroup ids on events resolve to paths (noisy-neighbour attribution)", "");

  // The layouts of the host's cgroups (names of directories only: nothing of a process).
  std::string root = r + *mount;
  int64_t t0 = capture::mono_now_ns();
  auto paths = kernelside::walk_cgroup_paths(root);
  int64_t walk_ns = capture::mono_now_ns() - t0;
  size_t containers = 0;
  std::map<std::string, size_t> runtimes;
  std::vector<std::pair<uint64_t, Found>> sample;
  std::set<std::string> pod_uids;
  size_t walked = 0;
  for (const auto& [id, path] : paths) {
    if (++walked > kMaxWalked) break;
    auto l = kernelside::parse_cgroup_path(path);
    if (!l.recognised()) continue;
    if (l.kubernetes()) pod_uids.insert(l.pod_uid);
    if (!l.container()) continue;
    ++containers;
    ++runtimes[l.runtime.empty() ? "unknown runtime" : std::string(l.runtime)];
    sample.push_back({id, {path, l}});
  }
  size_t pods = pod_uids.size();
  auto count = [](size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  std::string value = count(paths.size(), "cgroup");
  if (containers)
    value += ", " + count(containers, "container") + (pods ? " in " + count(pods, "pod") : "");
  std::string walk = "walked " + count(paths.size(), "cgroup") + " under " + *mount + " in " +
                     engine::format_duration(uint64_t(walk_ns));
  if (sample.empty()) {
    rep.add("tenant_names", CheckStatus::kPass, value,
            walk + "; no container or pod cgroup on this host: nothing to name", "");
    return;
  }
  // Name a few, as the tracer would: one process of each (its first in cgroup.procs).
  std::stable_sort(sample.begin(), sample.end(), [](const auto& a, const auto& b) {
    return a.second.layout.kubernetes() > b.second.layout.kubernetes();
  });
  kernelside::TenantSources src;
  src.proc = r + "/proc";
  src.cgroup_root = root;
  src.runtime_roots = kernelside::TenantSources::default_runtime_roots(src.proc);
  kernelside::TenantResolver resolver(src);
  std::string named;
  size_t n = 0, with_names = 0;
  for (const auto& [id, f] : sample) {
    if (n >= kMaxNamed) break;
    uint32_t pid = 0;
    std::ifstream procs(root + f.path + "/cgroup.procs");
    procs >> pid;
    if (!pid) continue;
    auto t = resolver.resolve(id, pid);
    if (t.path.empty()) continue;
    ++n;
    with_names += t.names.any();
    named += (named.empty() ? "" : "; ") + tenant_text(t);
  }
  auto cost = resolver.cost();
  std::string rt;
  for (const auto& [name, k] : runtimes)
    rt += (rt.empty() ? "" : ", ") + std::to_string(k) + " " + name;
  std::string detail = walk + " (" + rt + ")";
  if (n)
    detail += "; named " + std::to_string(n) + " as the tracer does, reading " + files_read(cost) +
              " in " + engine::format_duration(uint64_t(cost.ns)) + ": " + named;
  bool missing = n && with_names < n;
  rep.add("tenant_names", missing ? CheckStatus::kOptional : CheckStatus::kPass, value, detail,
          missing ? "container names come from the runtime's state (trace --runtime-state DIR if "
                    "it is elsewhere; a DaemonSet mounts it and runs with hostPID)"
                  : "");
}

}  // namespace ingero::app

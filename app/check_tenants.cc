// `ingero check`: where cgroup v2 is (a hybrid host's included), which container and pod
// layouts the host's cgroups show, and what naming them costs: the check names a few of them
// exactly as the tracer would (kernelside/tenant_names.h) and says what it read and how long
// it took.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
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

namespace {

std::string count(size_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// The cgroup v2 mount (a hybrid host's too), as the cgroup_v2 line says; nullopt: none.
std::optional<std::string> cgroup_v2_check(const std::string& r, CheckReport& rep) {
  auto mount = kernelside::cgroup2_mount(capture::read_small_file(r + "/proc/self/mountinfo"));
  if (!mount && std::filesystem::exists(r + "/sys/fs/cgroup/cgroup.controllers"))
    mount = "/sys/fs/cgroup";
  if (!mount) {
    rep.add("cgroup_v2", CheckStatus::kOptional, "not mounted",
            "events carry no usable cgroup id; per-container attribution is off",
            "boot with systemd.unified_cgroup_hierarchy=1");
    return std::nullopt;
  }
  bool hybrid = *mount != "/sys/fs/cgroup";
  rep.add("cgroup_v2", CheckStatus::kPass, hybrid ? "hybrid: v2 at " + *mount : "unified hierarchy",
          "cgroup ids on events resolve to paths (noisy-neighbour attribution)", "");
  return mount;
}

// The layouts of the host's cgroups: names of directories only, nothing of a process.
struct Survey {
  size_t cgroups = 0, containers = 0, pods = 0;
  int64_t walk_ns = 0;
  std::map<std::string, size_t> runtimes;
  std::vector<std::pair<uint64_t, Found>> containers_found;  // pods' first
};

Survey survey(const std::string& root) {
  Survey s;
  int64_t t0 = capture::mono_now_ns();
  auto paths = kernelside::walk_cgroup_paths(root);
  s.walk_ns = capture::mono_now_ns() - t0;
  s.cgroups = paths.size();
  std::set<std::string> pod_uids;
  size_t walked = 0;
  for (const auto& [id, path] : paths) {
    if (++walked > kMaxWalked) break;
    auto l = kernelside::parse_cgroup_path(path);
    if (!l.recognised()) continue;
    if (l.kubernetes()) pod_uids.insert(l.pod_uid);
    if (!l.container()) continue;
    ++s.containers;
    ++s.runtimes[l.runtime.empty() ? "unknown runtime" : std::string(l.runtime)];
    s.containers_found.push_back({id, {path, l}});
  }
  s.pods = pod_uids.size();
  std::stable_sort(s.containers_found.begin(), s.containers_found.end(),
                   [](const auto& a, const auto& b) {
                     return a.second.layout.kubernetes() > b.second.layout.kubernetes();
                   });
  return s;
}

// A few containers named as the tracer would: one process of each (its first in cgroup.procs).
struct Named {
  size_t cgroups = 0, with_names = 0;
  std::string text;
  kernelside::TenantCost cost;
};

Named name_some(const std::string& r, const std::string& root, const Survey& s) {
  kernelside::TenantSources src;
  src.proc = r + "/proc";
  src.cgroup_root = root;
  src.runtime_roots = kernelside::TenantSources::default_runtime_roots(src.proc);
  kernelside::TenantResolver resolver(src);
  Named n;
  for (const auto& [id, f] : s.containers_found) {
    if (n.cgroups >= kMaxNamed) break;
    uint32_t pid = 0;
    std::ifstream procs(root + f.path + "/cgroup.procs");
    procs >> pid;
    if (!pid) continue;
    auto t = resolver.resolve(id, pid);
    if (t.path.empty()) continue;
    ++n.cgroups;
    n.with_names += t.names.any();
    n.text += (n.text.empty() ? "" : "; ") + tenant_text(t);
  }
  n.cost = resolver.cost();
  return n;
}

}  // namespace

void tenant_checks(const CheckInputs& in, CheckReport& rep) {
  auto mount = cgroup_v2_check(in.root, rep);
  if (!mount) return;
  std::string root = in.root + *mount;
  Survey s = survey(root);
  std::string value = count(s.cgroups, "cgroup");
  if (s.containers)
    value +=
        ", " + count(s.containers, "container") + (s.pods ? " in " + count(s.pods, "pod") : "");
  std::string detail = "walked " + count(s.cgroups, "cgroup") + " under " + *mount + " in " +
                       engine::format_duration(uint64_t(s.walk_ns));
  if (s.containers_found.empty()) {
    rep.add("tenant_names", CheckStatus::kPass, value,
            detail + "; no container or pod cgroup on this host: nothing to name", "");
    return;
  }
  std::string rt;
  for (const auto& [name, k] : s.runtimes)
    rt += (rt.empty() ? "" : ", ") + std::to_string(k) + " " + name;
  detail += " (" + rt + ")";
  Named n = name_some(in.root, root, s);
  if (n.cgroups)
    detail += "; named " + std::to_string(n.cgroups) + " as the tracer does, reading " +
              files_read(n.cost) + " in " + engine::format_duration(uint64_t(n.cost.ns)) + ": " +
              n.text;
  bool missing = n.cgroups && n.with_names < n.cgroups;
  rep.add("tenant_names", missing ? CheckStatus::kOptional : CheckStatus::kPass, value, detail,
          missing ? "container names come from the runtime's state (trace --runtime-state DIR if "
                    "it is elsewhere; a DaemonSet reads the host's through /proc/1/root, with "
                    "hostPID)"
                  : "");
}

}  // namespace ingero::app

#include "kernelside/cgroup_layout.h"

#include <nlohmann/json.hpp>
#include <vector>

namespace ingero::kernelside {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// A container id as the runtimes generate them: 64 lowercase hex digits.
bool container_id(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!lower_hex(c)) return false;
  return true;
}

// A pod UID: a UUID (8-4-4-4-12 lowercase hex), or the 32 hex digits of a static pod's config
// hash. The systemd driver writes '_' for '-'; `s` has them back.
bool pod_uid(std::string_view s) {
  if (s.size() == 32) {
    for (char c : s)
      if (!lower_hex(c)) return false;
    return true;
  }
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !lower_hex(s[i])) return false;
  }
  return true;
}

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view c = path.substr(0, slash);
    if (!c.empty() && c != ".") out.push_back(c);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

struct Pod {
  std::string uid;
  QosClass qos = QosClass::kNone;
};

// [<prefix>-]kubepods[-burstable|-besteffort]-pod<uid>.slice
std::optional<Pod> systemd_pod(std::string_view c) {
  if (!ends_with(c, ".slice")) return std::nullopt;
  c.remove_suffix(6);
  size_t k = c.rfind("kubepods-");
  if (k == std::string_view::npos || (k > 0 && c[k - 1] != '-')) return std::nullopt;
  c.remove_prefix(k + 9);
  Pod p;
  if (starts_with(c, "burstable-")) {
    p.qos = QosClass::kBurstable;
    c.remove_prefix(10);
  } else if (starts_with(c, "besteffort-")) {
    p.qos = QosClass::kBestEffort;
    c.remove_prefix(11);
  } else {
    p.qos = QosClass::kGuaranteed;
  }
  if (!starts_with(c, "pod")) return std::nullopt;
  c.remove_prefix(3);
  p.uid = std::string(c);
  for (char& ch : p.uid)
    if (ch == '_') ch = '-';
  if (!pod_uid(p.uid)) return std::nullopt;
  return p;
}

// kubepods[/burstable|/besteffort]/pod<uid>: the component at `i` and its parents.
std::optional<Pod> cgroupfs_pod(const std::vector<std::string_view>& c, size_t i) {
  if (!starts_with(c[i], "pod") || i == 0) return std::nullopt;
  Pod p;
  p.uid = std::string(c[i].substr(3));
  if (!pod_uid(p.uid)) return std::nullopt;
  if (c[i - 1] == "kubepods") {
    p.qos = QosClass::kGuaranteed;
  } else if (i >= 2 && c[i - 2] == "kubepods" && (c[i - 1] == "burstable")) {
    p.qos = QosClass::kBurstable;
  } else if (i >= 2 && c[i - 2] == "kubepods" && (c[i - 1] == "besteffort")) {
    p.qos = QosClass::kBestEffort;
  } else {
    return std::nullopt;
  }
  return p;
}

struct Scope {
  std::string_view prefix, suffix, runtime;
  bool monitor;
};
// Longer prefixes first: crio-conmon- before crio-.
constexpr Scope kScopes[] = {
    {"cri-containerd-", ".scope", "containerd", false},
    {"crio-conmon-", ".scope", "cri-o", true},
    {"crio-", ".scope", "cri-o", false},
    {"docker-", ".scope", "docker", false},
    {"libpod-conmon-", ".scope", "podman", true},
    {"libpod-", ".scope", "podman", false},
    // cgroupfs names of the same runtimes
    {"crio-conmon-", "", "cri-o", true},
    {"crio-", "", "cri-o", false},
    {"libpod-conmon-", "", "podman", true},
    {"libpod-", "", "podman", false},
};

struct Container {
  std::string id;
  std::string_view runtime, driver;
  bool monitor = false;
};

// The component at `i` as a container's cgroup; `pod_at` is the index of the component just
// above it when that is a cgroupfs pod (bare ids are taken only there, and under /docker).
std::optional<Container> container_at(const std::vector<std::string_view>& c, size_t i,
                                      bool under_cgroupfs_pod) {
  std::string_view s = c[i];
  for (const Scope& k : kScopes) {
    if (!starts_with(s, k.prefix) || !ends_with(s, k.suffix)) continue;
    std::string_view id = s.substr(k.prefix.size(), s.size() - k.prefix.size() - k.suffix.size());
    if (!container_id(id)) continue;
    return Container{std::string(id), k.runtime, k.suffix.empty() ? "cgroupfs" : "systemd",
                     k.monitor};
  }
  if (container_id(s)) {
    if (under_cgroupfs_pod) return Container{std::string(s), "", "cgroupfs", false};
    if (i > 0 && c[i - 1] == "docker")
      return Container{std::string(s), "docker", "cgroupfs", false};
  }
  return std::nullopt;
}

std::string unescape_mountinfo(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    auto oct = [&](size_t k) { return s[k] >= '0' && s[k] <= '7'; };
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] <= '3' && oct(i + 1) && oct(i + 2) &&
        oct(i + 3)) {
      out += char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = line.find(' ', i);
    if (j == std::string_view::npos) j = line.size();
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::string_view qos_name(QosClass q) {
  switch (q) {
    case QosClass::kGuaranteed:
      return "guaranteed";
    case QosClass::kBurstable:
      return "burstable";
    case QosClass::kBestEffort:
      return "besteffort";
    case QosClass::kNone:
      break;
  }
  return "";
}

CgroupLayout parse_cgroup_path(std::string_view path) {
  CgroupLayout out;
  auto c = components(path);
  std::optional<Pod> pod;
  std::optional<Container> ctr;
  std::string_view pod_driver;
  bool cgroupfs_pod_above = false;
  for (size_t i = 0; i < c.size(); ++i) {
    bool under_pod = cgroupfs_pod_above;
    cgroupfs_pod_above = false;
    if (auto p = systemd_pod(c[i])) {
      pod = std::move(p);
      pod_driver = "systemd";
      ctr.reset();  // a container above a pod is the node's own (kind): the pod's come below
      continue;
    }
    if (auto p = cgroupfs_pod(c, i)) {
      pod = std::move(p);
      pod_driver = "cgroupfs";
      ctr.reset();
      cgroupfs_pod_above = true;
      continue;
    }
    if (auto k = container_at(c, i, under_pod)) ctr = std::move(k);
  }
  if (pod) {
    out.pod_uid = pod->uid;
    out.qos = pod->qos;
    out.driver = pod_driver;
  }
  if (ctr) {
    out.container_id = ctr->id;
    out.runtime = ctr->runtime;
    out.monitor = ctr->monitor;
    if (!pod) out.driver = ctr->driver;
  }
  return out;
}

std::optional<std::string> v2_path_of(std::string_view text) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (starts_with(line, "0::")) return std::string(line.substr(3));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return std::nullopt;
}

std::optional<std::string> cgroup2_mount(std::string_view mountinfo) {
  std::optional<std::string> first, unified;
  while (!mountinfo.empty()) {
    size_t nl = mountinfo.find('\n');
    auto f = fields(mountinfo.substr(0, nl));
    // id parent maj:min root mount-point options [optional...] - fstype source super-options
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 1 < f.size() && f[dash + 1] == "cgroup2" && f[3] == "/") {
      std::string mp = unescape_mountinfo(f[4]);
      if (mp == "/sys/fs/cgroup") return mp;
      if (mp == "/sys/fs/cgroup/unified") unified = mp;
      if (!first) first = mp;
    }
    if (nl == std::string_view::npos) break;
    mountinfo.remove_prefix(nl + 1);
  }
  return unified ? unified : first;
}

std::optional<std::string> environ_value(std::string_view env, std::string_view key) {
  while (!env.empty()) {
    size_t end = env.find('\0');
    std::string_view kv = env.substr(0, end);
    if (kv.size() > key.size() && starts_with(kv, key) && kv[key.size()] == '=')
      return std::string(kv.substr(key.size() + 1));
    if (end == std::string_view::npos) break;
    env.remove_prefix(end + 1);
  }
  return std::nullopt;
}

bool dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : s)
    if (!alnum(c) && c != '-') return false;
  return alnum(s.front()) && alnum(s.back());
}

bool dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  while (true) {
    size_t dot = s.find('.');
    if (!dns_label(s.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    s.remove_prefix(dot + 1);
  }
}

namespace {

std::optional<std::string> text_at(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

template <typename Valid>
void take(std::optional<std::string>& dst, std::optional<std::string> v, Valid valid) {
  if (!dst && v && valid(*v)) dst = std::move(v);
}

// The io.kubernetes.* names in a map of annotations or labels, both runtimes' keys.
void kubernetes_names(const nlohmann::json& m, RuntimeNames& n) {
  take(n.container, text_at(m, "io.kubernetes.cri.container-name"), dns_label);
  take(n.container, text_at(m, "io.kubernetes.container.name"), dns_label);
  take(n.pod, text_at(m, "io.kubernetes.cri.sandbox-name"), dns_subdomain);
  take(n.pod, text_at(m, "io.kubernetes.pod.name"), dns_subdomain);
  take(n.pod_namespace, text_at(m, "io.kubernetes.cri.sandbox-namespace"), dns_label);
  take(n.pod_namespace, text_at(m, "io.kubernetes.pod.namespace"), dns_label);
  auto uid = [](const std::string& u) { return pod_uid(u); };
  take(n.pod_uid, text_at(m, "io.kubernetes.cri.sandbox-uid"), uid);
  take(n.pod_uid, text_at(m, "io.kubernetes.pod.uid"), uid);
  n.sandbox = text_at(m, "io.kubernetes.cri.container-type") == "sandbox" ||
              text_at(m, "io.kubernetes.docker.type") == "podsandbox";
  if (n.sandbox) n.container.reset();
}

nlohmann::json parse(std::string_view text) {
  return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

bool docker_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(s[0])) return false;
  for (char c : s)
    if (!alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

}  // namespace

RuntimeNames names_from_oci_config(std::string_view json) {
  RuntimeNames n;
  auto j = parse(json);
  if (j.is_object()) {
    auto a = j.find("annotations");
    if (a != j.end()) kubernetes_names(*a, n);
  }
  return n;
}

RuntimeNames names_from_docker_config(std::string_view json) {
  RuntimeNames n;
  auto j = parse(json);
  if (!j.is_object()) return n;
  if (auto c = j.find("Config"); c != j.end() && c->is_object())
    if (auto l = c->find("Labels"); l != c->end()) kubernetes_names(*l, n);
  if (!n.container && !n.pod && !n.sandbox) {
    auto name = text_at(j, "Name");
    if (name && !name->empty() && (*name)[0] == '/') name->erase(0, 1);
    take(n.container, name, docker_name);
  }
  return n;
}

}  // namespace ingero::kernelside

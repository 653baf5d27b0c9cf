#include "serve/otlp/resource.h"

#include <fstream>
#include <sstream>

#include "hal/utf8.h"

namespace ingero::serve::otlp {
namespace {

bool is_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool is_uid(std::string_view s) {
  // 8-4-4-4-12 hex digits (dashes, or underscores in systemd slice names).
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? !(s[i] == '-' || s[i] == '_') : !is_hex(s.substr(i, 1))) return false;
  }
  return true;
}

void set(Attributes& a, const std::string& key, const std::string& value) {
  for (auto& [k, v] : a)
    if (k == key) {
      v = value;
      return;
    }
  a.emplace_back(key, value);
}

}  // namespace

ContainerIds container_ids(std::string_view path) {
  ContainerIds ids;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    std::string_view part =
        path.substr(pos, slash == std::string_view::npos ? path.npos : slash - pos);
    pos = slash == std::string_view::npos ? path.size() + 1 : slash + 1;
    if (part.empty()) continue;
    std::string_view name = part;
    if (name.size() > 6 && name.substr(name.size() - 6) == ".scope") name.remove_suffix(6);
    if (name.size() > 6 && name.substr(name.size() - 6) == ".slice") name.remove_suffix(6);
    // The container: the last 64-hex-digit token of a component, after its runtime's prefix.
    size_t dash = name.rfind('-');
    std::string_view tail = dash == std::string_view::npos ? name : name.substr(dash + 1);
    if (tail.size() == 64 && is_hex(tail)) ids.container_id = std::string(tail);
    // The pod: "pod<uid>" at the end of a component.
    size_t pod = name.rfind("pod");
    if (pod != std::string_view::npos && is_uid(name.substr(pod + 3))) {
      std::string uid(name.substr(pod + 3));
      for (auto& c : uid)
        if (c == '_') c = '-';
      ids.pod_uid = uid;
    }
  }
  return ids;
}

ContainerIds container_ids_of_proc(std::string_view text) {
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) return container_ids(std::string_view(line).substr(3));
  return {};
}

ContainerIds process_container(uint32_t pid, const std::string& proc_root) {
  std::ifstream f(proc_root + "/" + std::to_string(pid) + "/cgroup");
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return container_ids_of_proc(ss.str());
}

ingero::Result<Attributes> agent_resource(const std::string& host_name, const std::string& node,
                                          std::string_view self_cgroup, const EnvFn& env) {
  Attributes a = {{"service.name", "ingero"}, {"service.version", INGERO_VERSION}};
  if (!host_name.empty()) a.emplace_back("host.name", host_name);
  if (!node.empty()) a.emplace_back("ingero.node", node);
  ContainerIds self = container_ids_of_proc(self_cgroup);
  if (!self.container_id.empty()) a.emplace_back("container.id", self.container_id);
  if (!self.pod_uid.empty()) a.emplace_back("k8s.pod.uid", self.pod_uid);
  if (auto extra = env("OTEL_RESOURCE_ATTRIBUTES"); extra && !extra->empty()) {
    auto kv = parse_key_values(*extra);
    if (!kv) return ingero::make_error("OTEL_RESOURCE_ATTRIBUTES: " + kv.error().message);
    // A key or value of other bytes ("%ff") made every request one a strict collector
    // rejects: the key went out as it was.
    for (size_t i = 0; i < kv->size(); ++i)
      if (!hal::is_utf8((*kv)[i].first) || !hal::is_utf8((*kv)[i].second))
        return ingero::make_error("OTEL_RESOURCE_ATTRIBUTES: entry " + std::to_string(i + 1) +
                                  ": not UTF-8 once percent-decoded (OTLP keys and strings "
                                  "are UTF-8)");
    for (auto& [k, v] : *kv) set(a, k, v);
  }
  if (auto name = env("OTEL_SERVICE_NAME"); name && !name->empty()) set(a, "service.name", *name);
  return a;
}

}  // namespace ingero::serve::otlp

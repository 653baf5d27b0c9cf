#include "engine/node_selection.h"

#include <algorithm>

namespace ingero::engine {

ingero::Result<std::vector<std::string>> pick_nodes(std::vector<std::string> have,
                                                    const std::vector<std::string>& asked) {
  if (asked.empty()) return have;
  for (const auto& n : asked)
    if (std::find(have.begin(), have.end(), n) == have.end()) {
      std::string list;
      for (const auto& h : have) list += (list.empty() ? "" : ", ") + h;
      return ingero::make_error("no node '" + n + "' in this trace (nodes: " + list + ")");
    }
  return asked;
}

ingero::Status check_pid(const std::map<uint32_t, ProcessInfo>& have, uint32_t pid) {
  if (have.empty() || have.count(pid)) return {};
  constexpr size_t kNamed = 10;
  std::string list;
  size_t n = 0;
  for (const auto& [p, info] : have) {
    if (n++ == kNamed) break;
    list +=
        (list.empty() ? "" : ", ") + std::to_string(p) + (info.name.empty() ? "" : " " + info.name);
  }
  if (have.size() > kNamed) list += " and " + std::to_string(have.size() - kNamed) + " more";
  return ingero::make_error("no process " + std::to_string(pid) +
                            " in this trace (processes: " + list + ")");
}

}  // namespace ingero::engine

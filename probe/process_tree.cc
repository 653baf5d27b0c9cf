#include "probe/process_tree.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

namespace ingero::hal {

std::optional<int> parent_in_stat(std::string_view stat) {
  size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat.substr(close + 1);  // " S PPID ..."
  auto skip_space = [&] {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  };
  skip_space();
  size_t state_end = rest.find(' ');
  if (rest.empty() || state_end == std::string_view::npos) return std::nullopt;
  rest.remove_prefix(state_end);
  skip_space();
  int ppid = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), ppid);
  if (ec != std::errc() || end == rest.data()) return std::nullopt;
  return ppid;
}

std::vector<int> descendants_of(const HostView& host, const std::vector<int>& roots) {
  std::multimap<int, int> children;  // parent -> child
  for (int pid : host.pids()) {
    auto stat = host.read_text(host.proc_root() + "/" + std::to_string(pid) + "/stat");
    if (!stat) continue;  // exited
    if (auto parent = parent_in_stat(*stat); parent && *parent != pid)
      children.emplace(*parent, pid);
  }
  std::set<int> seen(roots.begin(), roots.end()), out;
  std::vector<int> todo(roots.begin(), roots.end());
  while (!todo.empty()) {
    int p = todo.back();
    todo.pop_back();
    auto [from, to] = children.equal_range(p);
    for (auto it = from; it != to; ++it)
      if (seen.insert(it->second).second) {
        out.insert(it->second);
        todo.push_back(it->second);
      }
  }
  return {out.begin(), out.end()};
}

}  // namespace ingero::hal

#include "app/node_selection.h"

#include <algorithm>

namespace ingero::app {

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

}  // namespace ingero::app

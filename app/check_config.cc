#include "app/check_config.h"

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/config_file.h"
#include "engine/json_text.h"

namespace ingero::app {

int run_config_check(const std::string& path, bool json, std::ostream& out) {
  ParsedConfig parsed = parse_config_file(path);
  std::vector<ConfigProblem> problems = check_config(parsed, config_cli_schema);
  if (json) {
    nlohmann::json probs = nlohmann::json::array(), settings = nlohmann::json::array();
    for (const auto& p : problems)
      probs.push_back({{"line", p.line},
                       {"column", p.column},
                       {"table", p.table},
                       {"key", p.key},
                       {"message", p.message},
                       {"text", format_problem(path, p)}});
    for (const auto& e : parsed.entries)
      settings.push_back(
          {{"table", e.table}, {"key", e.key}, {"values", e.values}, {"line", e.line}});
    out << engine::json_text({{"config", path},
                              {"valid", problems.empty()},
                              {"problems", probs},
                              {"settings", settings}},
                             2)
        << "\n";
    return problems.empty() ? kExitOk : kExitFailure;
  }
  if (!problems.empty()) {
    for (const auto& p : problems) out << format_problem(path, p) << "\n";
    out << problems.size() << " problem" << (problems.size() == 1 ? "" : "s") << " in " << path
        << "\n";
    return kExitFailure;
  }
  out << path << ": valid, " << parsed.entries.size() << " setting"
      << (parsed.entries.size() == 1 ? "" : "s") << "\n";
  for (const auto& e : parsed.entries) {
    out << "  " << e.line << ": [" << e.table << "] " << e.key << " =";
    for (const auto& v : e.values) out << " " << v;
    out << "\n";
  }
  return kExitOk;
}

}  // namespace ingero::app

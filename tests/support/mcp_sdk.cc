#include "tests/support/mcp_sdk.h"

#include <unistd.h>

#include <filesystem>

#include "test_paths.h"
#include "tests/support/subprocess.h"

namespace ingero::test {
namespace {

std::string node_binary() {
  for (const char* p : {"/usr/bin/node", "/usr/local/bin/node", "/usr/bin/nodejs"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

std::string sdk_dir() { return std::string(INGERO_SOURCE_DIR) + "/tests/mcp"; }

}  // namespace

std::string mcp_sdk_unavailable() {
  if (node_binary().empty()) return "node is not installed (apt-get install nodejs npm)";
  if (!std::filesystem::exists(sdk_dir() + "/node_modules/@modelcontextprotocol/sdk/package.json"))
    return "tests/mcp/node_modules is missing (npm ci --prefix tests/mcp, or scripts/setup.sh "
           "--with-tests)";
  return "";
}

nlohmann::json run_mcp_sdk(const std::vector<std::string>& args,
                           const std::vector<std::string>& env) {
  std::vector<std::string> argv = {node_binary(), sdk_dir() + "/sdk_client.mjs"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out, err;
  int rc = run_command(argv, &out, &err, env, std::chrono::seconds(180));
  size_t nl = out.find_last_of('\n', out.size() >= 2 ? out.size() - 2 : 0);
  std::string last = out.substr(nl == std::string::npos ? 0 : nl + 1);
  auto j = nlohmann::json::parse(last, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return {{"fatal", "exit " + std::to_string(rc) + ", no report: " + out.substr(0, 2000) +
                          err.substr(0, 2000)}};
  if (rc != 0 && !j.contains("fatal"))
    j["fatal"] = "exit " + std::to_string(rc) + ": " + err.substr(0, 2000);
  return j;
}

}  // namespace ingero::test

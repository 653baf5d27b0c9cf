// `ingero check --bench` where the host cannot trace: the figures asked for are said to be
// missing, not left out in silence. Run as nobody (under setpriv when root), who cannot load BPF.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(CheckBench, OnAHostThatCannotTraceItIsSaidNotRun) {
  std::vector<std::string> argv;
  if (geteuid() == 0)
    argv = {"setpriv", "--reuid=65534",           "--regid=65534", "--clear-groups",
            "--",      ingero_binary_for_nobody()};
  else
    argv = {INGERO_BIN};
  const std::string why = "not run: this host cannot trace (the checks above say why)";
  for (bool json : {false, true}) {
    std::vector<std::string> a = argv;
    a.insert(a.end(), {"check", "--bench", "--backends", "cuda"});
    if (json) a.push_back("--json");
    std::string out, err;
    EXPECT_EQ(run_command(a, &out, &err, {"HOME=/nonexistent"}), 3) << err;
    EXPECT_NE(err.find("ingero check --bench: " + why + "\n"), std::string::npos) << err;
    if (json) {
      auto j = nlohmann::json::parse(out);
      EXPECT_EQ(j["probe_cost"], nlohmann::json({{"not_run", why}})) << out;
    } else {
      EXPECT_EQ(out.find("Probe cost on this host"), std::string::npos) << out;
    }
  }
}

}  // namespace
}  // namespace ingero::test

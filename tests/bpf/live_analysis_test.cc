// The tracer's live analysis (every 30 s, behind ingero_causal_chains_active, the steps'
// histograms and OTLP's chain records), run here every second (INGERO_TEST_LIVE_ANALYSIS_MS).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "test_paths.h"
#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// An analysis that cannot read the trace changes nothing: the gauge keeps the figures of the
// last one that could (it was emptied), and stderr says why, once. The file is moved away from
// under the tracer, which keeps writing it, so every analysis after that fails to open it;
// moved back, the session ends as usual.
TEST(LiveAnalysis, OneThatCannotReadTheTraceLeavesTheLastFiguresAndSaysSoOnce) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  using namespace std::chrono_literals;
  std::string dir = temp_path("live");
  std::filesystem::create_directories(dir);
  std::string db = temp_path("live.db"), away = temp_path("away.db");
  // The loop's hidden sync and its failing calls: two HIGH chains.
  std::string script = std::string(INGERO_STEP_FAULTS) + " rowsync 40 > /dev/null; while [ ! -e " +
                       dir + "/stop ]; do sleep 0.1; done";
  int port = free_tcp_port();
  auto tracer =
      Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--prometheus",
                         "127.0.0.1:" + std::to_string(port), "--", "/bin/sh", "-c", script},
                        {"INGERO_TEST_LIVE_ANALYSIS_MS=1000"});
  std::regex gauge("\\ningero_causal_chains_active\\{severity=\"HIGH\"\\} ([0-9]+)");
  auto high = [&] {
    HttpResponse m = http_get("127.0.0.1", port, "/metrics");
    std::smatch g;
    return m.status == 200 && std::regex_search(m.body, g, gauge) ? g[1].str() : std::string();
  };
  std::string seen;
  for (auto until = std::chrono::steady_clock::now() + 40s;
       seen != "2" && std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(300ms))
    seen = high();
  ASSERT_EQ(seen, "2") << tracer.err();
  std::filesystem::rename(db, away);
  const std::string said =
      "the live analysis (chains and steps for /metrics and OTLP) could not "
      "read the trace; the last published stand: ";
  EXPECT_TRUE(tracer.wait_stderr_line(said, 20s)) << tracer.err();
  // Three more analyses fail; the chains stay as the last good one found them.
  std::this_thread::sleep_for(3500ms);
  EXPECT_EQ(high(), "2");
  std::filesystem::rename(away, db);
  std::ofstream(dir + "/stop") << "";
  EXPECT_EQ(tracer.wait(60s), 0) << tracer.err();
  EXPECT_EQ(occurrences(tracer.err(), said), 1u) << tracer.err();
  EXPECT_NE(tracer.err().find(said + db), std::string::npos) << tracer.err();
}

}  // namespace
}  // namespace ingero::test

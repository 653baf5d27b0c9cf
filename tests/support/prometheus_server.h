// A real Prometheus server (Debian package prometheus) for tests that check what it scrapes:
// started on a free loopback port with a temporary storage folder, queried through its HTTP
// API.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/subprocess.h"

namespace ingero::test {

inline const char* kPrometheusBinary = "/usr/bin/prometheus";

class PrometheusServer {
 public:
  using Json = nlohmann::json;
  // Scrapes 127.0.0.1:target_port every second, plain HTTP, no authentication.
  bool start(int target_port, std::string* why);
  // `scrape_configs`: the YAML list under scrape_configs (each entry "  - job_name: ...").
  bool start_with(const std::string& scrape_configs, std::string* why);
  ~PrometheusServer();

  // Instant query: metric labels -> value, as Prometheus stored them.
  std::vector<std::pair<Json, double>> query(const std::string& promql);
  // Polls `promql` until `done` holds for its result or the timeout passes.
  template <typename Pred>
  std::vector<std::pair<Json, double>> wait_for(const std::string& promql, Pred done,
                                                int seconds = 30) {
    std::vector<std::pair<Json, double>> v;
    for (int i = 0; i < seconds * 5; ++i) {
      v = query(promql);
      if (done(v)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return v;
  }

 private:
  int port_ = 0;
  Subprocess proc_;
};

}  // namespace ingero::test

// Prometheus is missing: skip loudly, but fail under CI=true.
#define REQUIRE_PROMETHEUS()                                               \
  do {                                                                     \
    if (access(::ingero::test::kPrometheusBinary, X_OK) != 0) {            \
      if (::ingero::test::running_in_ci())                                 \
        FAIL() << "CI=true but " << ::ingero::test::kPrometheusBinary      \
               << " is missing (Debian package prometheus)";               \
      GTEST_SKIP() << "*** SKIPPED: " << ::ingero::test::kPrometheusBinary \
                   << " not installed ***";                                \
    }                                                                      \
  } while (0)

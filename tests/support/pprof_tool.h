// The tests' use of `go tool pprof` (golang-go) and of `ingero query`: shared by the pprof unit
// tests (tests/unit/pprof_support.h) and the traced one (tests/bpf/pprof_trace_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {

inline std::string run_ok(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {}) {
  std::string out, err;
  int rc = run_command(argv, &out, &err, env);
  EXPECT_EQ(rc, 0) << argv[0] << " " << (argv.size() > 1 ? argv[1] : "") << ": " << err;
  return out;
}

inline int64_t query_one(const std::string& db, const std::string& sql) {
  auto j = nlohmann::json::parse(run_ok({INGERO_BIN, "query", "--json", "--db", db, sql}));
  EXPECT_EQ(j.size(), 1u) << j.dump();
  const auto& v = j[0].begin().value();
  return v.is_null() ? 0 : v.get<int64_t>();
}

// What each sample type of trace `db`'s profile totals, by `ingero query` over the file, in the
// order `ingero export --format pprof` writes them: cpu samples at `period` ns each, the waits
// (syncs and device-to-host copies), launches, and the time inside GPU calls.
struct PprofTotals {
  int64_t samples = 0, waits = 0, launches = 0, api = 0;
  std::vector<int64_t> values(int64_t period) const {
    return {samples * period, waits, launches, api};
  }
};
inline PprofTotals pprof_expected_totals(const std::string& db) {
  PprofTotals t;
  t.samples = query_one(db, "SELECT count(*) FROM host_events WHERE event = 'cpu_sample'");
  t.waits = query_one(db,
                      "SELECT sum(dur_ns) FROM calls WHERE kind = 'sync' OR (kind = 'memcpy' AND "
                      "direction = 'D2H')");
  t.launches = query_one(
      db, "SELECT sum(calls) FROM call_summaries WHERE kind IN ('launch', 'graph_launch')");
  t.api = query_one(db, "SELECT sum(sum_ns) FROM call_summaries");
  return t;
}

// Sums of each sample type over `go tool pprof -raw`'s samples.
inline std::vector<int64_t> pprof_raw_totals(const std::string& file) {
  std::string out = run_ok({INGERO_GO, "tool", "pprof", "-raw", file}, {"HOME=" + scratch_root()});
  std::istringstream in(out);
  std::vector<int64_t> sums;
  bool samples = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Samples:", 0) == 0) {
      samples = true;
      continue;
    }
    if (line.rfind("Locations", 0) == 0) break;
    size_t colon = line.find(':');
    if (!samples || colon == std::string::npos) continue;
    std::istringstream vals(line.substr(0, colon));
    std::vector<int64_t> v;
    bool numbers = true;
    for (std::string tok; vals >> tok;) {
      if (tok.find_first_not_of("-0123456789") != std::string::npos) {
        numbers = false;
      } else {
        v.push_back(std::stoll(tok));
      }
    }
    if (!numbers || v.empty()) continue;
    sums.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) sums[i] += v[i];
  }
  return sums;
}

inline bool have_go() {
  if (*INGERO_GO && access(INGERO_GO, X_OK) == 0) return true;
  return false;
}

#define REQUIRE_GO()                                                                            \
  do {                                                                                          \
    if (!::ingero::test::have_go()) {                                                           \
      if (::ingero::test::running_in_ci()) FAIL() << "CI=true but `go` (golang-go) is missing"; \
      GTEST_SKIP() << "*** SKIPPED: no `go` (golang-go) to run go tool pprof ***";              \
    }                                                                                           \
  } while (0)

}  // namespace ingero::test

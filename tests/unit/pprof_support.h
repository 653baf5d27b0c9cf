// Helpers of the pprof tests (pprof_test.cc, the builder; pprof_export_test.cc, the command):
// reading a profile's strings and labels, exporting a written trace, and go tool pprof's totals.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "compress/gzip.h"
#include "profile.pb.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::serve::pprof {

namespace pp = perftools::profiles;

inline std::string str(const pp::Profile& p, int64_t i) { return p.string_table(int(i)); }

inline std::map<std::string, std::string> labels_of(const pp::Profile& p, const pp::Sample& s) {
  std::map<std::string, std::string> out;
  for (const auto& l : s.label())
    out[str(p, l.key())] = l.str() ? str(p, l.str()) : std::to_string(l.num());
  return out;
}

inline std::string run_ok(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {}) {
  std::string out, err;
  int rc = test::run_command(argv, &out, &err, env);
  EXPECT_EQ(rc, 0) << argv[0] << " " << (argv.size() > 1 ? argv[1] : "") << ": " << err;
  return out;
}

inline int64_t query_one(const std::string& db, const std::string& sql) {
  auto j = nlohmann::json::parse(run_ok({INGERO_BIN, "query", "--json", "--db", db, sql}));
  EXPECT_EQ(j.size(), 1u) << j.dump();
  const auto& v = j[0].begin().value();
  return v.is_null() ? 0 : v.get<int64_t>();
}

// `calls` written as one ended session in `name`.db and exported as pprof: the profile's path
// ("" where either failed), the trace's in `db`, export's stderr in `err`.
inline std::string exported(const std::vector<hal::Event>& calls, const std::string& name,
                            std::string* db, std::string* err) {
  std::string path = *db = test::temp_path(name + ".db");
  {
    auto w = store::tiers_fixture::begin_trace(path);
    if (!w) return "";
    for (const auto& e : calls)
      if (!w->add(e)) return "";
    if (!w->finish(store::SessionEnd{})) return "";
  }
  std::string out = test::temp_path(name + ".pb.gz");
  int rc = test::run_command({INGERO_BIN, "export", "--format", "pprof", "--db", path, "-o", out},
                             nullptr, err);
  return rc == 0 ? out : "";
}

// A written profile, read back with our own definitions.
inline std::optional<pp::Profile> read_profile(const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  std::stringstream raw;
  raw << f.rdbuf();
  auto plain = compress::gunzip(raw.str());
  pp::Profile p;
  if (!plain || !p.ParseFromString(*plain)) return std::nullopt;
  return p;
}

// Sums of each sample type over `go tool pprof -raw`'s samples.
inline std::vector<int64_t> pprof_raw_totals(const std::string& file) {
  std::string out =
      run_ok({INGERO_GO, "tool", "pprof", "-raw", file}, {"HOME=" + test::scratch_root()});
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

#define REQUIRE_GO()                                                                  \
  do {                                                                                \
    if (!have_go()) {                                                                 \
      if (test::running_in_ci()) FAIL() << "CI=true but `go` (golang-go) is missing"; \
      GTEST_SKIP() << "*** SKIPPED: no `go` (golang-go) to run go tool pprof ***";    \
    }                                                                                 \
  } while (0)

}  // namespace ingero::serve::pprof

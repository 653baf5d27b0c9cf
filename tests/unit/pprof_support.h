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
#include "tests/support/pprof_tool.h"
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

using test::have_go;
using test::pprof_expected_totals;
using test::pprof_raw_totals;
using test::PprofTotals;
using test::query_one;
using test::run_ok;

}  // namespace ingero::serve::pprof

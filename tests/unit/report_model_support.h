// What the report's tests share (report_model_test.cc, report_folded_test.cc): the H100
// fixture under the report tests' name, the report model of a trace file as `ingero report
// --json` builds it, and a JSON array's total.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/report/report_model.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "tests/support/h100_fixture.h"

namespace ingero::serve::report::test_support {

inline std::string h100(const std::string& name) { return test::h100_fixture(name, "report"); }

// The model, with no error from the build or from the source's reads.
inline nlohmann::json model_of(const std::string& path, ReportOptions o = {}) {
  auto reader = store::TraceReader::open(path);
  EXPECT_TRUE(reader) << (reader ? "" : reader.error().message);
  if (!reader) return nlohmann::json();
  store::SqlTraceSource source(**reader);
  o.title = path;
  auto m = build_report(**reader, source, o);
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  EXPECT_EQ(source.error(), "");
  return m ? *m : nlohmann::json();
}

inline uint64_t sum(const nlohmann::json& arr) {
  uint64_t s = 0;
  for (const auto& v : arr) s += v.get<uint64_t>();
  return s;
}

}  // namespace ingero::serve::report::test_support

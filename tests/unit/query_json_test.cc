// `query --json` and MCP run_sql render SQL values as JSON: NULL is null, and a REAL JSON
// cannot hold (infinite, not a number) is named, never null (it read as SQL NULL).
#include "store/query_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ingero::store {
namespace {

TEST(QueryJson, NonFiniteRealsAreNamedNotNull) {
  QueryResult r;
  r.columns = {"a", "b", "c", "d", "e"};
  r.rows.push_back({Value{std::numeric_limits<double>::infinity()},
                    Value{-std::numeric_limits<double>::infinity()}, Value{std::nan("")},
                    Value{std::monostate{}}, Value{0.5}});
  EXPECT_EQ(to_json(r).dump(), R"([{"a":"inf","b":"-inf","c":"nan","d":null,"e":0.5}])");
}

}  // namespace
}  // namespace ingero::store

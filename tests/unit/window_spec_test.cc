// --from/--to times: a fraction and a zone are read, anything else is refused. A dropped
// offset would move the window by hours without a word.
#include "engine/window_spec.h"

#include <gtest/gtest.h>

namespace ingero::engine {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT = 1795371619;  // 2026-11-22T18:20:19Z

TEST(WindowSpec, TimesWithFractionsAndZonesAreReadExactly) {
  EXPECT_EQ(parse_time_ns("2026-11-22T18:20:19"), kT * kS);
  EXPECT_EQ(parse_time_ns("2026-11-22 18:20:19"), kT * kS);
  EXPECT_EQ(parse_time_ns("2026-11-22T18:20:19Z"), kT * kS);
  EXPECT_EQ(parse_time_ns("2026-11-22T18:20:19.5"), kT * kS + 500'000'000);
  EXPECT_EQ(parse_time_ns("2026-11-22T18:20:19.000000001Z"), kT * kS + 1);
  EXPECT_EQ(parse_time_ns("2026-11-22T20:20:19+02:00"), kT * kS);
  EXPECT_EQ(parse_time_ns("2026-11-22T20:20:19.25+0200"), kT * kS + 250'000'000);
  EXPECT_EQ(parse_time_ns("2026-11-22T13:20:19-05"), kT * kS);
  EXPECT_EQ(parse_time_ns(std::to_string(kT)), kT * kS);
}

TEST(WindowSpec, AnythingElseAfterTheSecondsIsRefused) {
  for (const char* bad :
       {"2026-11-22T18:20:19junk", "2026-11-22T18:20:19.", "2026-11-22T18:20:19.1234567891",
        "2026-11-22T18:20:19+2", "2026-11-22T18:20:19+25:00", "2026-11-22T18:20:19+02:00x",
        "2026-11-22T18:20:19 UTC", "1795371619.5"})
    EXPECT_EQ(parse_time_ns(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace ingero::engine

// A lower bound's share is rounded down: the step model's GPU idle share without device data
// is a lower bound, and a loader trace whose GPU idled 99.83% of each step read "GPU idle
// ≥ 100%" while the chain's own title said "≥ 98%".
#include <gtest/gtest.h>

#include "engine/chain.h"

namespace ingero::engine {
namespace {

TEST(LowerBoundShare, IsRoundedDownNeverUp) {
  EXPECT_EQ(pct_at_least(0.9983), "99%");
  EXPECT_EQ(pct(0.9983), "100%");  // a share that is not a bound still rounds
  EXPECT_EQ(pct_at_least(0.0082), "0%");
  EXPECT_EQ(pct_at_least(0.29), "29%");  // 28.999... in binary is still 29
  EXPECT_EQ(pct_at_least(1.0), "100%");
  EXPECT_EQ(pct_at_least(0.0), "0%");
}

}  // namespace
}  // namespace ingero::engine

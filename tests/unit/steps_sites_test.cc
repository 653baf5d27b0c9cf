// The step model's call sites (engine/steps_summary.cc): what a site is named by, with and
// without stacks.
#include <gtest/gtest.h>

#include "engine/analysis.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

// Traced with --no-stack, every call has stack 0 and a site is its op ("op:NAME"). Round-trip
// sites were named by the first blocking call whose stack matched, 0 == 0: the sync's site
// was called cudaMemcpyAsync, and a hidden_sync chain on it named the copy.
TEST(StepSites, SitesWithoutAStackAreNamedByTheirOwnOp) {
  Source s;
  s.offcpu(0, 10 * kUs, false, 1);
  for (int i = 0; i < 30; ++i) {
    uint64_t t = uint64_t(i) * 10 * kMs;
    row_syncs(s, t, 0);
  }
  auto a = analyze(s, Window{});
  size_t op_sites = 0;
  for (const SiteCount& x : only(a).sites) {
    if (x.site.rfind("op:", 0) != 0) continue;
    ++op_sites;
    EXPECT_EQ("op:" + x.op, x.site);
  }
  EXPECT_EQ(op_sites, 2u);
}

}  // namespace
}  // namespace ingero::engine

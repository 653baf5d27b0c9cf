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

// Found by a hostile-testing helper: gaps were counted by whole stack and said under the stack's
// line, "ends 102 gaps at upload (wl.c:24)" where all 299 ended at that line (called from three
// loops). Gaps ending at one line are one site: here 50 steps whose upload comes from one line
// through two callers, in turn.
TEST(StepSites, GapsEndingAtOneLineAreCountedTogetherWhateverItsCaller) {
  Source s;
  loop(s, 50, 10 * kMs, 8 * kMs, false);
  s.offcpu(0, 10 * kUs, false, 1);  // the trace has scheduler events
  constexpr uint64_t kViaA = 41, kViaB = 42;
  bool a_turn = true;
  for (auto& e : s.calls_)
    if (e.stack_id == kUploadStack) {
      e.stack_id = a_turn ? kViaA : kViaB;
      a_turn = !a_turn;
    }
  s.frames_[kViaA] = {{true, "load", "/w/train.py", 24, "", ""},
                      {true, "<module>", "/w/train.py", 30, "", ""}};
  s.frames_[kViaB] = {{true, "load", "/w/train.py", 24, "", ""},
                      {true, "<module>", "/w/train.py", 40, "", ""}};
  auto a = analyze(s, Window{});
  const Chain* c = nullptr;
  for (const auto& x : a.chains)
    if (x.rule == "data_loader_starvation") c = &x;
  ASSERT_NE(c, nullptr);
  const uint64_t steady = only(a).summary.steps;
  ASSERT_GT(steady, 40u);
  EXPECT_NE(c->explanation.find(" " + format_count(steady) +
                                " gaps (100% of gap time) ended with cudaMemcpy at load "
                                "(train.py:24), a host-to-device copy"),
            std::string::npos)
      << c->explanation;
  bool said = false;
  for (const auto& t : c->timeline)
    said = said || t.detail == "ends " + format_count(steady) + " gaps at load (train.py:24)";
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace ingero::engine

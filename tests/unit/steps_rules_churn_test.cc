// allocator_churn's figures per step (engine/rules_steps.cc).
#include <gtest/gtest.h>

#include "engine/analysis.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

using namespace step_source;

// A free and an allocation in 9 steps of 10 (the rule asks 8 of 10): 0.9 of each a step,
// which an integer division said as "0 frees per step, 0 allocations".
TEST(StepRulesChurn, LessThanOneAStepIsSaidToATenth) {
  Source s;
  loop(s, 101, 10 * kMs, 8 * kMs, false);
  for (int i = 1; i < 101; ++i) {
    if (i % 10 == 0) continue;
    uint64_t t = uint64_t(i) * 10 * kMs + 8400 * kUs;
    s.call("cudaFree", EventKind::kFree, t, 400 * kUs);
    s.call("cudaMalloc", EventKind::kAlloc, t + 500 * kUs, 400 * kUs);
  }
  auto a = analyze(s, Window{});
  const Chain* c = nullptr;
  for (const Chain& x : a.chains)
    if (x.rule == "allocator_churn") c = &x;
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->summary.find("(0.9 frees per step; 0.9 allocations)"), std::string::npos)
      << c->summary;
}

// A LOW churn every step and a LOW tail the host does not explain (two allocations stalled 5 ms:
// a ratio in the hundreds, the larger score): the finding that says what to change comes first,
// in the JSON as in the text report, where the tail is folded into the last line.
TEST(StepRulesChurn, ATailWithoutHostCauseRanksAfterTheChurn) {
  Source s;
  loop(s, 101, 10 * kMs, 8 * kMs, false);
  for (int i = 1; i < 101; ++i) {
    uint64_t t = uint64_t(i) * 10 * kMs + 8400 * kUs;
    s.call("cudaFree", EventKind::kFree, t, 20 * kUs);
    s.call("cudaMalloc", EventKind::kAlloc, t + 30 * kUs, i == 30 || i == 70 ? 5 * kMs : 20 * kUs);
  }
  auto a = analyze(s, Window{});
  int churn = -1, tail = -1;
  for (size_t i = 0; i < a.chains.size(); ++i) {
    if (a.chains[i].rule == "allocator_churn") churn = int(i);
    if (a.chains[i].rule == "tail_latency") tail = int(i);
  }
  ASSERT_GE(churn, 0);
  ASSERT_GE(tail, 0);
  EXPECT_EQ(a.chains[size_t(churn)].severity, Severity::kLow);
  EXPECT_EQ(a.chains[size_t(tail)].severity, Severity::kLow);
  EXPECT_GT(a.chains[size_t(tail)].score, a.chains[size_t(churn)].score);
  EXPECT_LT(churn, tail);
}

}  // namespace
}  // namespace ingero::engine

// When kernel-name look-ups rest and come back (capture/lookup_rest.h): exact counts of repeats
// held back, news and functions launched without a name, as the tracer samples them.
#include "capture/lookup_rest.h"

#include <gtest/gtest.h>

namespace ingero {
namespace {

using capture::LookupRest;
using Ids = std::vector<uint32_t>;
constexpr uint64_t kProof = LookupRest::kFirstProof;

// architecture.md: a look-up probe rests once it held back 2,000 repeats since it last named
// something (the tests below count from the constant; this pins the constant to the docs).
TEST(LookupRest, TheFirstProofIsTheDocumentedTwoThousandRepeats) {
  EXPECT_EQ(kProof, 2000u);
  LookupRest r;
  EXPECT_EQ(r.to_rest({{7, 1999, 0}}), Ids{});
  EXPECT_EQ(r.to_rest({{7, 2000, 0}}), Ids{7});
}

TEST(LookupRest, AProbeRestsAfterItsProofOfRepeatsAndNotOneBefore) {
  LookupRest r;
  // It named something before its first sample: the repeats count from that sample on.
  EXPECT_EQ(r.to_rest({{7, 500, 3}}), Ids{});
  EXPECT_EQ(r.to_rest({{7, 500 + kProof - 1, 3}}), Ids{});
  EXPECT_EQ(r.to_rest({{7, 500 + kProof, 3}}), Ids{7});
  r.rested({7}, 0);
  EXPECT_TRUE(r.resting());
  EXPECT_EQ(r.rests(), 1u);
  // At rest it is not asked about again.
  EXPECT_EQ(r.to_rest({{7, 900000, 3}}), Ids{});
}

// What a probe that never named anything held back before the tracer's first sample counts
// (a burst of look-ups shorter than a sampling period).
TEST(LookupRest, RepeatsBeforeTheFirstSampleCount) {
  LookupRest r;
  EXPECT_EQ(r.to_rest({{7, kProof, 0}, {8, kProof - 1, 0}}), Ids{7});
}

TEST(LookupRest, NewsStartsTheCountAgain) {
  LookupRest r;
  EXPECT_EQ(r.to_rest({{7, 0, 0}}), Ids{});
  EXPECT_EQ(r.to_rest({{7, kProof - 1, 0}}), Ids{});
  // A new kernel named (cuDNN's autotuning tries another one): the repeats so far do not count.
  EXPECT_EQ(r.to_rest({{7, kProof + 10, 1}}), Ids{});
  EXPECT_EQ(r.to_rest({{7, 2 * kProof + 9, 1}}), Ids{});
  EXPECT_EQ(r.to_rest({{7, 2 * kProof + 10, 1}}), Ids{7});
}

// cuModuleGetFunction after each module's load (Triton): every call names something, and
// nothing is held back.
TEST(LookupRest, ALookUpThatNamesAtEachCallNeverRests) {
  LookupRest r;
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(r.to_rest({{3, 0, i}}), Ids{});
  EXPECT_FALSE(r.resting());
}

TEST(LookupRest, OnlyAFunctionFirstLaunchedUnnamedSinceTheRestWakesThem) {
  LookupRest r;
  r.to_rest({{7, 0, 0}, {8, 0, 5}});
  // Probe 8 names something at each sample: only 7 rests.
  EXPECT_EQ(r.to_rest({{7, kProof, 0}, {8, kProof, 6}}), Ids{7});
  r.rested({7}, 4);  // 4 functions had been launched unnamed before
  EXPECT_FALSE(r.to_wake(4));
  EXPECT_TRUE(r.to_wake(5));
  r.woke();
  EXPECT_FALSE(r.resting());
  EXPECT_FALSE(r.to_wake(9));  // nothing rests
  EXPECT_EQ(r.wakes(), 1u);
  // The woken probe needs twice the proof; the other's is untouched.
  EXPECT_EQ(r.proof(7), 2 * kProof);
  EXPECT_EQ(r.proof(8), kProof);
  // Its first sample back is its base again (what BPF held back before the rest is not news).
  EXPECT_EQ(r.to_rest({{7, kProof + 50, 0}, {8, 3 * kProof, 7}}), Ids{});
  EXPECT_EQ(r.to_rest({{7, 3 * kProof + 49, 0}, {8, 3 * kProof, 7}}), Ids{});
  EXPECT_EQ(r.to_rest({{7, 3 * kProof + 50, 0}, {8, 4 * kProof, 7}}), (Ids{7, 8}));
}

// A wake that foresaw a look-up (a process newly mapping their library) is no sign that they
// rest too soon: the proof stays.
TEST(LookupRest, AWakeForANewcomerKeepsTheProof) {
  LookupRest r;
  EXPECT_EQ(r.to_rest({{1, kProof, 0}}), Ids{1});
  r.rested({1}, 0);
  r.woke(false);
  EXPECT_FALSE(r.resting());
  EXPECT_EQ(r.proof(1), kProof);
  EXPECT_EQ(r.wakes(), 1u);
  EXPECT_EQ(r.to_rest({{1, kProof + 7, 0}}), Ids{});  // its base again
  EXPECT_EQ(r.to_rest({{1, 2 * kProof + 7, 0}}), Ids{1});
}

TEST(LookupRest, TheProofDoublesAtEachWakeUpToItsBound) {
  LookupRest r;
  uint64_t held = 0, unnamed = 0;
  r.to_rest({{1, held, 0}});
  for (int wake = 0; wake < 40; ++wake) {
    uint64_t proof = r.proof(1);
    held += proof;
    ASSERT_EQ(r.to_rest({{1, held, 0}}), Ids{1}) << wake;
    r.rested({1}, unnamed);
    ASSERT_TRUE(r.to_wake(++unnamed));
    r.woke();
    EXPECT_EQ(r.proof(1), std::min(2 * proof, LookupRest::kMaxProof));
    r.to_rest({{1, held, 0}});  // the base after the wake
  }
  EXPECT_EQ(r.proof(1), LookupRest::kMaxProof);
  EXPECT_EQ(r.rests(), 40u);
  EXPECT_EQ(r.wakes(), 40u);
}

}  // namespace
}  // namespace ingero

// Which failure the failed_calls rule (engine/rules_failed_calls.cc) leads with when one failure
// causes the others.
#include <gtest/gtest.h>

#include "engine/analysis.h"
#include "hal/error_codes.h"
#include "step_source.h"

namespace ingero::engine {
namespace {

using hal::EventKind;
using hal::Field;
using step_source::kMs;

// A rank whose ncclCommInitRank failed (ncclUnhandledCudaError, class "other") then makes 4
// all-reduces on the communicator it never got, each ncclInvalidArgument: the chain led with
// the first all-reduce ("Calls had failed before it"). The init is the cause.
TEST(FailedCallsLead, AFailedCommunicatorInitLeadsTheInvalidCallsAfterIt) {
  step_source::Source s;
  auto& init = s.call("ncclCommInitRank", EventKind::kCommInit, kMs, kMs, 0, "nccl");
  init.ret = 1;
  init.set(Field::kErrClass, uint64_t(hal::ErrorClass::kOther));
  for (int i = 0; i < 4; ++i) {
    auto& c =
        s.call("ncclAllReduce", EventKind::kCollective, (10 + uint64_t(i)) * kMs, kMs, 0, "nccl");
    c.ret = 4;
    c.set(Field::kErrClass, uint64_t(hal::ErrorClass::kInvalid));
  }
  Analysis a = analyze(s, Window{});
  const Chain* c = nullptr;
  for (const auto& ch : a.chains)
    if (ch.rule == "failed_calls") c = &ch;
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->op, "ncclCommInitRank");
  EXPECT_EQ(c->window_start, int64_t(kMs));
  EXPECT_EQ(c->summary.find("the first ncclAllReduce"), std::string::npos) << c->summary;
  EXPECT_NE(c->summary.find("ncclCommInitRank returned"), std::string::npos) << c->summary;
}

// Invalid calls with no failed init before them lead as before (their class outweighs
// "other").
TEST(FailedCallsLead, WithoutAFailedInitTheInvalidCallsLead) {
  step_source::Source s;
  auto& m = s.call("ncclGroupEnd", EventKind::kGroup, kMs, kMs, 0, "nccl");
  m.ret = 1;
  m.set(Field::kErrClass, uint64_t(hal::ErrorClass::kOther));
  auto& c = s.call("ncclAllReduce", EventKind::kCollective, 10 * kMs, kMs, 0, "nccl");
  c.ret = 4;
  c.set(Field::kErrClass, uint64_t(hal::ErrorClass::kInvalid));
  Analysis a = analyze(s, Window{});
  const Chain* ch = nullptr;
  for (const auto& x : a.chains)
    if (x.rule == "failed_calls") ch = &x;
  ASSERT_NE(ch, nullptr);
  EXPECT_EQ(ch->op, "ncclAllReduce");
}

}  // namespace
}  // namespace ingero::engine

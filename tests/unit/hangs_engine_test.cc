// Collective hangs from the tracer's rows of stuck threads (engine/hangs.h): a collective every
// rank inside has left is no hang, and a rank read after it left the collective is said to have
// completed it, never to have "never entered it" (helper-74: a rank 7 s late made a HIGH hang
// whose late rank "never entered it: it completed ncclAllReduce #0 already").
#include <gtest/gtest.h>

#include "engine/hangs.h"

namespace ingero::engine {
namespace {

using hal::Field;
using hal::Inflight;

constexpr uint64_t kSec = 1'000'000'000;
constexpr uint64_t kHash = 0x5eed;

InflightRow rank_row(uint64_t rank, Inflight::What what, Inflight::Status status, uint64_t seq) {
  InflightRow r;
  r.node = "n";
  Inflight& in = r.in;
  in.what = what;
  in.status = status;
  in.seq = seq;
  in.call.pid = in.call.tid = uint32_t(100 + rank);
  in.call.vendor = "nvidia";
  in.call.api = "nccl";
  in.call.op = what == Inflight::What::kCall ? "ncclAllReduce" : "";
  in.call.kind = what == Inflight::What::kCall ? hal::EventKind::kCollective : hal::EventKind{};
  in.call.ts_ns = 100 * kSec;
  in.call.dur_ns = 7 * kSec;
  in.seen_ns = 107 * kSec;
  in.state = hal::ThreadState::kSleeping;
  in.call.set(Field::kCommHash, kHash);
  in.call.set(Field::kRank, rank);
  in.call.set(Field::kNranks, 2);
  return r;
}

TEST(CollectiveHangs, ACollectiveEveryRankInsideHasLeftIsNoHang) {
  std::vector<InflightRow> rows = {
      rank_row(0, Inflight::What::kCall, Inflight::Status::kReturned, 0)};
  EXPECT_TRUE(find_collective_hangs(rows, {}).empty());
  rows[0].in.status = Inflight::Status::kInFlight;
  EXPECT_EQ(find_collective_hangs(rows, {}).size(), 1u);
}

TEST(CollectiveHangs, ARankPastTheCollectiveCompletedItAndIsNotItsCause) {
  // Rank 0 is inside #4; rank 1's idle row was read after it had completed 5 collectives.
  std::vector<InflightRow> rows = {
      rank_row(0, Inflight::What::kCall, Inflight::Status::kInFlight, 4),
      rank_row(1, Inflight::What::kIdle, Inflight::Status::kInFlight, 5)};
  auto hangs = find_collective_hangs(rows, {});
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_TRUE(hangs[0].missing().empty());
  Chain c = collective_hang_chain(nullptr, hangs[0], {});
  EXPECT_EQ(c.summary,
            "Collective hang: rank 0 has waited 7.0 s inside ncclAllReduce #4 (the 5th collective "
            "on communicator 0x5eed, 2 ranks); every rank entered it");
  ASSERT_EQ(c.timeline.size(), 2u);
  EXPECT_EQ(c.timeline[1].detail,
            "rank 1 (pid 101 on n) has completed ncclAllReduce #4 already: its thread has made no "
            "GPU call for 7.0 s and is asleep");
  EXPECT_EQ(c.root_cause.find("rank 1"), std::string::npos) << c.root_cause;
}

}  // namespace
}  // namespace ingero::engine

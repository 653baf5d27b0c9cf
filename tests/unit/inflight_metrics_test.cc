// The in-flight gauges of the Prometheus sink (serve/metrics/inflight_metrics.cc), set from the
// tracer's once-a-second report: calls in flight, the oldest, and this node's ranks waiting
// inside a collective.
#include <gtest/gtest.h>

#include "hal/inflight.h"
#include "serve/metrics/metrics.h"

namespace ingero {
namespace {

using hal::Inflight;
constexpr uint64_t kSec = 1'000'000'000ULL;

TEST(InflightMetrics, GaugesCountCallsAndTheOldestNotIdleThreads) {
  serve::Metrics m(false);
  hal::InflightReport r;
  Inflight a, b, idle;
  a.call.dur_ns = 7 * kSec;
  b.call.dur_ns = 312 * kSec + kSec / 2;
  idle.what = Inflight::What::kIdle;
  idle.call.dur_ns = 900 * kSec;
  r.current = {a, b, idle};
  r.changed = {true, true, true};
  ASSERT_TRUE(m.on_inflight(r));
  std::string x = m.exposition();
  EXPECT_NE(x.find("\ningero_inflight_calls 2\n"), std::string::npos) << x;
  EXPECT_NE(x.find("\ningero_inflight_oldest_seconds 312.5\n"), std::string::npos) << x;
  ASSERT_TRUE(m.on_inflight(hal::InflightReport{}));
  x = m.exposition();
  EXPECT_NE(x.find("\ningero_inflight_calls 0\n"), std::string::npos) << x;
  EXPECT_NE(x.find("\ningero_inflight_oldest_seconds 0\n"), std::string::npos) << x;
}

// The tracer's live analysis of its own ranks: ranks inside the same collective (communicator
// hash, sequence number) longer than --inflight-after count; a shorter wait, another
// collective's lone rank and a sync do too only when they qualify.
TEST(InflightMetrics, CollectiveHangCountsThisNodesWaitingRanks) {
  serve::Metrics m(false);
  auto rank = [](uint64_t r, uint64_t seq, uint64_t dur_s) {
    Inflight in;
    in.call.pid = in.call.tid = uint32_t(100 + r);
    in.call.kind = hal::EventKind::kCollective;
    in.call.op = "ncclAllReduce";
    in.call.dur_ns = dur_s * kSec;
    in.call.set(hal::Field::kCommHash, 0xfeed);
    in.call.set(hal::Field::kRank, r);
    in.seq = seq;
    return in;
  };
  Inflight sync;
  sync.call.kind = hal::EventKind::kSync;
  sync.call.dur_ns = 60 * kSec;
  Inflight idle = rank(3, 7, 60);
  idle.what = Inflight::What::kIdle;
  hal::InflightReport r;
  r.after_ns = 5 * kSec;
  r.current = {rank(0, 7, 30), rank(1, 7, 31), rank(2, 7, 2), sync, idle};
  r.changed.assign(r.current.size(), true);
  ASSERT_TRUE(m.on_inflight(r));
  std::string x = m.exposition();
  EXPECT_NE(x.find("\ningero_collective_hang 2\n"), std::string::npos) << x;
  r.current = {sync};
  r.changed = {true};
  ASSERT_TRUE(m.on_inflight(r));
  x = m.exposition();
  EXPECT_NE(x.find("\ningero_collective_hang 0\n"), std::string::npos) << x;
}

}  // namespace
}  // namespace ingero

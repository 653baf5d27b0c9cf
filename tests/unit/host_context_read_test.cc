// How the host context reads a file's host events (SqlTraceSource::host_context_events): from
// blocks whose rows come in stretches each in time order, in (time, id) order exactly; with the
// fields the host context reads and no others; and to the very same context as a read of whole
// events gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/host_context.h"
#include "tests/support/forwarding_source.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;
using tiers_fixture::describe;  // beside this file's own overload

// `e` as the host context's read gives it: no return code, detail or addresses, and of the
// fields only those it reads.
Event as_context_reads(const Event& e) {
  Event c = e;
  c.has_ret = false;
  c.ret = 0;
  c.detail.clear();
  c.saddr.clear();
  c.daddr.clear();
  for (size_t i = 0; i < hal::kFieldCount; ++i) {
    const auto& want = engine::TraceSource::kHostContextFields;
    if (c.has(Field(i)) && std::find(std::begin(want), std::end(want), Field(i)) == std::end(want))
      c.clear(Field(i));
  }
  return c;
}

struct Reads {
  std::vector<std::string> whole, context;
};

Reads read_both(const std::string& path) {
  auto reader = TraceReader::open(path, app::builtin_views());
  EXPECT_TRUE(reader);
  Reads r;
  if (!reader) return r;
  SqlTraceSource s(**reader);
  s.host_events({}, [&](const Event& e) { r.whole.push_back(describe(e)); });
  s.host_context_events({}, [&](const Event& e) { r.context.push_back(describe(e)); });
  EXPECT_TRUE(s.error().empty()) << s.error();
  return r;
}

// The events as a read must give them: by time, ties in the order written (their ids), at
// their wall-clock times; as the host context's read gives them, or (`whole`) as they are.
std::vector<std::string> in_time_order(std::vector<Event> events, bool whole = false) {
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  std::vector<std::string> out;
  for (Event e : events) {
    e.ts_ns += uint64_t(kOffset);
    out.push_back(describe(whole ? e : as_context_reads(e)));
  }
  return out;
}

// 10,000 switches written in blocks of 4,096 (store/host_store.h) whose rows come as `k`
// stretches, each in time order and spanning the block's time, the second stretch's first
// switch at the very time of the first's (a tie the ids decide); `k` = 0: in random order.
std::vector<Event> in_stretches(size_t k) {
  std::mt19937_64 rng(k + 3);
  std::vector<Event> out;
  for (size_t i = 0; i < 10'000; ++i) {
    size_t block = i / 4096, at = i % 4096;
    size_t per = (4096 + k - 1) / std::max<size_t>(k, 1);
    uint64_t ts = 1'000'000 + block * 4096 * 10 * kUs;
    if (k == 0)
      ts += rng() % (4096 * 10 * kUs);
    else
      ts += (at % per) * k * 10 * kUs + (at / per == 1 ? 0 : at / per) * 10 * kUs;
    Event e = switch_out(ts, 5 * kUs + i % 13, i % 3 == 0);
    e.tid = 10 + uint32_t(i % 4);
    out.push_back(e);
  }
  return out;
}

TEST(HostContextRead, BlocksInStretchesReadInTimeOrder) {
  // In order; 2 and 3 stretches (an odd one is merged last); 40; more than 64 (sorted whole);
  // random.
  for (size_t k : {1, 2, 3, 40, 100, 0}) {
    std::vector<Event> events = in_stretches(k);
    std::string path = write_trace("host-stretches-" + std::to_string(k) + ".db", events);
    EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM host_store"), 3) << k;
    Reads r = read_both(path);
    std::vector<std::string> want = in_time_order(events);
    ASSERT_EQ(r.context.size(), want.size()) << k;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(r.context[i], want[i]) << k << " stretches, event " << i;
    EXPECT_EQ(r.whole, in_time_order(events, true)) << k;
  }
}

// One of each kind of host event, with what it has beyond what the host context reads.
std::vector<Event> every_kind() {
  std::vector<Event> out;
  for (uint64_t i = 0; i < 600; ++i) {
    uint64_t ts = 1'000'000 + i * 50 * kUs;
    Event e;
    switch (i % 8) {
      case 0:
        e = switch_out(ts, 7 * kUs + i, i % 16 == 0);
        e.set(Field::kWakerTid, 7000 + i);
        e.set(Field::kCpu, i % 2);
        e.set(Field::kPeerCgroup, 4242);
        e.detail = "waker";
        break;
      case 1:
        e = host_event(ts, "block_rq_complete", EventKind::kBlockIo);
        e.dur_ns = 20 * kUs + i;
        e.detail = i % 2 ? "WS" : "R";
        e.set(Field::kSector, 1'000'000 + i);
        e.set(Field::kBytes, 4096 * (i % 9));
        break;
      case 2:
        e = host_event(ts, "tcp_retransmit_skb", EventKind::kTcpRetransmit);
        e.saddr = "10.0.0.1:5000";
        e.daddr = "10.0.0.2:29500";
        e.set(Field::kSport, 5000);
        e.set(Field::kDport, 29500);
        e.set(Field::kState, 1);
        break;
      case 3:
        e = host_event(ts, "process_fork", EventKind::kProcessFork);
        e.set(Field::kPeerPid, 2000 + i);
        e.set_peer_comm("child");
        break;
      case 4:
        e = host_event(ts, "process_exit", EventKind::kProcessExit);
        e.has_ret = true;
        e.ret = -3;
        break;
      case 5:
        e = host_event(ts, "mm_page_alloc", EventKind::kPageAlloc);
        e.dur_ns = kMs;
        e.set(Field::kCount, 3 + i % 5);
        e.set(Field::kBytes, 4096 * (3 + i % 5));
        break;
      case 6:
        e = host_event(ts, "oom_kill", EventKind::kOomKill);
        e.set(Field::kPeerPid, 77);
        e.set_peer_comm("victim");
        break;
      default:
        e = host_event(ts, "sched_wakeup", EventKind::kSchedWakeup);
        e.set(Field::kWakerPid, 31);
        e.set(Field::kRunqNs, 900 + i);
        break;
    }
    e.pid = 10 + uint32_t(i % 3);
    e.tid = e.pid * 10 + uint32_t(i % 2);
    e.cgroup_id = 500 + i % 2;
    out.push_back(e);
  }
  return out;
}

TEST(HostContextRead, TheContextsReadCarriesWhatItReadsAndNoMore) {
  std::vector<Event> events = every_kind();
  std::string path = write_trace("host-context-kinds.db", events);
  Reads r = read_both(path);
  std::vector<std::string> want = in_time_order(events);
  EXPECT_EQ(r.context, want);
  EXPECT_EQ(r.whole, in_time_order(events, true));
  // The whole read has what the context's leaves out (detail, addresses, return codes, the
  // fields it does not read), which the context's read never decoded.
  ASSERT_EQ(r.whole.size(), want.size());
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) differ += r.whole[i] != want[i];
  EXPECT_EQ(differ, 75u + 75 + 75 + 75 + 75);  // switches, block I/O, TCP, exits, wakeups
  EXPECT_NE(r.whole[1].find("[WS]"), std::string::npos) << r.whole[1];
  EXPECT_NE(r.whole[1].find("sector=1000001"), std::string::npos) << r.whole[1];
  EXPECT_EQ(r.context[1].find("sector="), std::string::npos) << r.context[1];
}

// Everything collect_host_context keeps, as text.
std::string describe(const engine::HostContext& h) {
  std::ostringstream o;
  for (const auto& [op, s] : h.ops)
    o << op << ' ' << s.count << ' ' << s.sum_ns << ' ' << s.max_ns << '\n';
  for (const auto& [pid, p] : h.per_pid)
    o << pid << ' ' << p.comm << ' ' << p.switches << ' ' << p.involuntary << ' ' << p.off_cpu_ns
      << ' ' << p.max_off_cpu_ns << ' ' << p.wakeups << ' ' << p.forks << ' ' << p.execs << ' '
      << p.exits << ' ' << p.page_allocs << ' ' << p.page_bytes << ' ' << p.block_ios << ' '
      << p.block_bytes << ' ' << p.block_ns << ' ' << p.cgroup_id << '\n';
  for (const auto& [pid, v] : h.offcpu)
    for (const auto& iv : v)
      o << pid << ": " << iv.start << '-' << iv.end << ' ' << iv.tid << ' ' << h.by_pid(iv) << ' '
        << h.comm_name(h.by_comm(iv)) << ' ' << h.by_cgroup(iv) << ' ' << iv.preempted << iv.io
        << '\n';
  for (const auto& f : h.forks)
    o << "fork " << f.ts << ' ' << f.parent << ' ' << f.child << ' ' << f.child_comm << '\n';
  for (const auto& k : h.ooms)
    o << "oom " << k.ts << ' ' << k.pid << ' ' << k.comm << ' ' << k.by_pid << ' ' << k.by_comm
      << '\n';
  o << h.block_ios << ' ' << h.block_reads << ' ' << h.block_writes << ' ' << h.block_bytes << ' '
    << h.block_ns << ' ' << h.block_max_ns << ' ' << h.tcp_retransmits << '\n';
  for (const auto& [pid, v] : h.block_by_pid)
    for (const auto& b : v)
      o << "io " << pid << ' ' << b.start << ' ' << b.end << ' ' << b.bytes << '\n';
  for (int64_t t : h.tcp_times) o << "tcp " << t << '\n';
  return o.str();
}

TEST(HostContextRead, TheContextIsTheSameReadForItOrWhole) {
  std::string path = write_trace("host-context-same.db", every_kind());
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource s(**reader);
  test::ForwardingSource whole(s);  // passes host_events on, and the context's read is that
  std::string lean = describe(engine::collect_host_context(s, {}));
  EXPECT_EQ(lean, describe(engine::collect_host_context(whole, {})));
  EXPECT_TRUE(s.error().empty()) << s.error();
  // Each thing the context keeps is there to compare.
  for (const char* kept :
       {"fork ", "oom ", "io ", "tcp ", " 999 hog 4242 10", "block_rq_complete 75"})
    EXPECT_NE(lean.find(kept), std::string::npos) << kept << "\n" << lean;
}

}  // namespace
}  // namespace ingero::store

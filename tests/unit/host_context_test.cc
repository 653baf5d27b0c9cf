// The host context (engine/host_context.h): every context switch becomes an off-CPU interval of
// its process with its own preemptor, state and times, whatever the events around it; the
// tallies by op and process count every event. collect_host_context remembers the previous
// event's op, process and preemptor, so these events change each of them in every pattern:
// runs of one, alternations, and names that recur after others.
#include "engine/host_context.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace ingero::engine {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;

class HostEvents : public TraceSource {
 public:
  std::vector<Event> events;

  void calls(const Window&, const EventFn&) override {}
  void host_events(const Window&, const EventFn& fn) override {
    for (const auto& e : events) fn(e);
  }
  std::vector<SnapshotRow> snapshots(const Window&) override { return {}; }
  std::map<uint32_t, ProcessActivity> process_activity(const Window&) override { return {}; }
  std::map<uint32_t, ProcessInfo> processes() override { return {}; }
  std::pair<int64_t, int64_t> time_span() override { return {0, 0}; }
  uint64_t event_count(const Window&) override { return events.size(); }
};

struct Switch {
  uint64_t ts, dur;
  uint32_t pid, tid, by_pid, state;
  std::string by_comm;
  uint64_t by_cgroup;
  bool preempted;
};

TEST(HostContext, EverySwitchKeepsItsOwnPreemptorAmongRunsOfTheSame) {
  std::mt19937 rng(7);
  HostEvents src;
  std::vector<Switch> want;
  std::map<std::string, uint64_t> ops;
  std::map<uint32_t, uint64_t> switches, wakeups;
  // Forty names (a task's name is at most 15 bytes): the interned names' storage grows, and
  // its strings move, while one of them is remembered.
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) names.push_back((i % 2 ? "w" : "dataloader-") + std::to_string(i));
  uint64_t ts = 1'000;
  uint32_t pid = 1, by = 0;
  int kind = 0;
  for (int i = 0; i < 20'000; ++i) {
    // Runs: the same process, preemptor and op for a while, then a change of one of them.
    switch (rng() % 8) {
      case 0:
        pid = 1 + rng() % 3;
        break;
      case 1:
        by = rng() % 40;
        break;
      case 2:
        kind = int(rng() % 3);
        break;
      default:
        break;
    }
    Event e;
    e.ts_ns = ts += 1'000;
    e.dur_ns = 10 + rng() % 5'000;
    e.pid = pid;
    e.tid = pid * 100 + rng() % 2;
    e.set_comm("trainer");
    e.vendor = "host";
    e.api = "kernel";
    if (kind == 0 || kind == 1) {
      // The same name in two cgroups: two preemptors.
      uint64_t cgroup = by % 3 == 0 ? 0 : 1'000 + (by + uint32_t(ts / 7'000)) % 2;
      Switch s{e.ts_ns,   e.dur_ns,   pid,
               e.tid,     5'000 + by, uint32_t(rng() % 3 == 0 ? 0x402 : 1),
               names[by], cgroup,     rng() % 2 == 0};
      e.op = "sched_switch";
      e.kind = EventKind::kSchedSwitch;
      e.set(Field::kFlags, s.preempted ? 1 : 0);
      e.set(Field::kState, s.state);
      e.set(Field::kPeerPid, s.by_pid);
      e.set(Field::kPeerCgroup, s.by_cgroup);
      e.set_peer_comm(s.by_comm);
      want.push_back(s);
      ++switches[pid];
    } else {
      e.op = "sched_wakeup";
      e.kind = EventKind::kSchedWakeup;
      ++wakeups[pid];
    }
    ++ops[std::string(e.op)];
    src.events.push_back(e);
  }

  HostContext h = collect_host_context(src, {});
  std::map<uint32_t, size_t> at;
  for (const Switch& s : want) {
    const auto& v = h.offcpu.at(s.pid);
    ASSERT_LT(at[s.pid], v.size());
    const OffCpuInterval& iv = v[at[s.pid]++];
    ASSERT_EQ(iv.start, int64_t(s.ts));
    EXPECT_EQ(iv.end, int64_t(s.ts + s.dur));
    EXPECT_EQ(iv.tid, s.tid);
    EXPECT_EQ(h.by_pid(iv), s.by_pid);
    EXPECT_EQ(h.comm_name(h.by_comm(iv)), s.by_comm);
    EXPECT_EQ(h.by_cgroup(iv), s.by_cgroup);
    EXPECT_EQ(bool(iv.io), (s.state & 2) != 0);
    EXPECT_EQ(bool(iv.preempted), s.preempted);
  }
  for (const auto& [pid, n] : at) EXPECT_EQ(h.offcpu.at(pid).size(), n);
  EXPECT_EQ(h.offcpu_dropped, 0u);
  // One name for each, each (pid, name, cgroup) once.
  EXPECT_EQ(h.comms.size(), 41u);  // and "" for none
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, int> seen;
  for (const auto& p : h.preemptors) EXPECT_EQ(++seen[std::make_tuple(p.pid, p.comm, p.cgroup)], 1);
  ASSERT_EQ(h.ops.size(), ops.size());
  for (const auto& [op, n] : ops) EXPECT_EQ(h.ops.at(op).count, n) << op;
  for (const auto& [pid, n] : switches) EXPECT_EQ(h.per_pid.at(pid).switches, n);
  for (const auto& [pid, n] : wakeups) EXPECT_EQ(h.per_pid.at(pid).wakeups, n);
}

// Switches of four processes in turn, one every microsecond, kMaxOffCpuIntervals + 4,000 of them.
class Switches : public HostEvents {
 public:
  void host_events(const Window&, const EventFn& fn) override {
    Event e;
    e.vendor = "host";
    e.api = "kernel";
    e.op = "sched_switch";
    e.kind = EventKind::kSchedSwitch;
    e.set(Field::kFlags, 1);
    e.set(Field::kPeerPid, 7);
    e.set_peer_comm("hog");
    for (uint64_t i = 0; i < kTotal; ++i) {
      e.ts_ns = 1'000 * i;
      e.dur_ns = 500;
      e.pid = e.tid = uint32_t(1 + i % 4);
      fn(e);
    }
  }
  static constexpr uint64_t kTotal = kMaxOffCpuIntervals + 4'000;
};

// The intervals kept are capped over all processes, not each: four processes switching as
// often as one keep kMaxOffCpuIntervals in all, the earliest, and count the rest as dropped.
TEST(HostContext, OffCpuIntervalsAreCappedOverAllProcesses) {
  Switches src;
  HostContext h = collect_host_context(src, {});
  size_t kept = 0;
  int64_t last = 0;
  for (const auto& [pid, v] : h.offcpu) {
    kept += v.size();
    last = std::max(last, v.back().start);
    EXPECT_EQ(h.per_pid.at(pid).switches, Switches::kTotal / 4);  // every switch is counted
  }
  EXPECT_EQ(h.offcpu.size(), 4u);
  EXPECT_EQ(kept, kMaxOffCpuIntervals);
  EXPECT_EQ(h.offcpu_held, kMaxOffCpuIntervals);
  EXPECT_EQ(h.offcpu_dropped, 4'000u);
  EXPECT_EQ(h.offcpu_kept_until_ns, int64_t(1'000 * kMaxOffCpuIntervals));
  EXPECT_EQ(h.offcpu_kept_from_ns, 0);
  EXPECT_EQ(last, int64_t(1'000 * (kMaxOffCpuIntervals - 1)));
  EXPECT_EQ(h.by_pid(h.offcpu.at(1)[0]), 7u);
  EXPECT_EQ(h.comm_name(h.by_comm(h.offcpu.at(1)[0])), "hog");
}

// Where only the window's last part is modelled (the tracer's own analyses), its intervals are
// kept first: past the cap the oldest give way, the window then holds the newest. Where the
// modelled part alone holds more than the cap, its earliest are kept and the rest refused.
TEST(HostContext, TheModelledWindowsIntervalsAreKeptFirst) {
  Switches src;
  constexpr int64_t kUs = 1'000;
  {
    HostContext h = collect_host_context(src, {}, kUs * int64_t(Switches::kTotal - 500'000));
    size_t kept = 0;
    for (const auto& [pid, v] : h.offcpu) {
      kept += v.size();
      EXPECT_EQ(v[0].start, kUs * int64_t(4'000 + pid - 1)) << pid;  // the newest of each
      EXPECT_EQ(v.back().start, kUs * int64_t(Switches::kTotal - 5 + pid)) << pid;
      EXPECT_EQ(h.per_pid.at(pid).switches, Switches::kTotal / 4);
    }
    EXPECT_EQ(kept, kMaxOffCpuIntervals);
    EXPECT_EQ(h.offcpu_held, kMaxOffCpuIntervals);
    EXPECT_EQ(h.offcpu_dropped, 4'000u);
    EXPECT_EQ(h.offcpu_kept_from_ns, kUs * 4'000);
    EXPECT_EQ(h.offcpu_kept_until_ns, 0);
  }
  {
    HostContext h = collect_host_context(src, {}, kUs * 1'000);
    size_t kept = 0;
    int64_t first = INT64_MAX, last = 0;
    for (const auto& [pid, v] : h.offcpu) {
      kept += v.size();
      first = std::min(first, v[0].start);
      last = std::max(last, v.back().start);
    }
    EXPECT_EQ(kept, kMaxOffCpuIntervals);
    EXPECT_EQ(h.offcpu_dropped, 4'000u);  // 1,000 gave way, 3,000 found no room
    EXPECT_EQ(first, kUs * 1'000);
    EXPECT_EQ(last, kUs * int64_t(1'000 + kMaxOffCpuIntervals - 1));
    EXPECT_EQ(h.offcpu_kept_from_ns, kUs * 1'000);
    EXPECT_EQ(h.offcpu_kept_until_ns, kUs * int64_t(1'000 + kMaxOffCpuIntervals));
  }
}

}  // namespace
}  // namespace ingero::engine

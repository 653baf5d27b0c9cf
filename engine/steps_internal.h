// Internals of the step model shared by steps.cc (calls, cadence), steps_timeline.cc (the
// sweep, gaps), steps_gap_attribution.cc (what a gap's thread did), steps_preemption.cc (the
// threads feeding the GPU, their preemption) and steps_summary.cc (sites, locations, the
// summary).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "engine/call_run.h"
#include "engine/min_queue.h"
#include "engine/steps.h"

namespace ingero::engine::steps_detail {

// What the host is doing inside a top-level call.
enum Cat : uint8_t { kWait = 0, kEnqueue = 1, kApi = 2 };
inline constexpr uint64_t kNoStream = UINT64_MAX;

inline constexpr uint32_t kNoRun = UINT32_MAX;
inline constexpr uint32_t kGroupBit = 1u << 31;  // Call::run: an index into Proc::groups

struct Call {
  int64_t start = 0, end = 0;
  uint64_t stream = kNoStream;
  uint64_t stack = 0;  // of the item's first call
  uint64_t bytes = 0;
  uint32_t tid = 0;
  uint32_t op = 0;  // index into Proc::ops
  // kNoRun: one call. Else the item holds several calls of one op on this thread, alike in
  // every field here but their times and stacks, none nested, from `start` to the end of the
  // last at `end`:
  //  - a folded run of launches (engine/call_run.h), its index in Proc::runs, spread as it
  //    reads back;
  //  - kGroupBit | its index in Proc::groups: consecutive calls read from rows, exact. Waits
  //    are never grouped: round trips and the step cadence read them as items.
  uint32_t run = kNoRun;
  hal::EventKind kind = hal::EventKind::kUnknown;
  Cat cat = kApi;
  bool work : 1 = false;  // queues device work on `stream`
  bool d2h : 1 = false;
  bool h2d : 1 = false;
  // Its end (of a group: its last call's) is an estimate: a call seen at entry only reads back
  // with its op's mean duration (hal::Event::timed).
  bool estimated : 1 = false;
};

// Whether consecutive calls are grouped (see Call::run). Tests turn it off to check that
// groups change nothing.
inline bool group_calls = true;

// A call of a group: its start from the item's start, and in one word its duration and its
// stack (an index into Proc::stacks). 8 bytes, not a 56-byte item: a launch-bound process's
// launches, or an allocating loop's allocations, come one after another on their thread. A
// call longer than kMaxDur (1.05 ms), or whose stack is past a process's first kMaxStack + 1
// (4,096) distinct stacks of grouped calls, stays an item of its own.
struct Grouped {
  static constexpr int kStackBits = 12;
  static constexpr uint32_t kMaxStack = (1u << kStackBits) - 1;
  static constexpr uint64_t kMaxDur = (uint64_t(1) << (32 - kStackBits)) - 1;
  uint32_t delta = 0;
  uint32_t packed = 0;  // duration << kStackBits | stack
  Grouped() = default;
  Grouped(uint32_t delta_ns, uint64_t dur_ns, uint32_t stack_index)
      : delta(delta_ns), packed(uint32_t(dur_ns) << kStackBits | stack_index) {}
  uint32_t dur() const { return packed >> kStackBits; }
  uint32_t stack() const { return packed & kMaxStack; }
};
// A group's calls, in its process's pool (Proc::group_pool).
using GroupList = std::pmr::vector<Grouped>;

// One call of an item.
struct Span {
  int64_t start = 0;
  uint64_t dur = 0;
  uint64_t stack = 0;
  int64_t end() const { return start + int64_t(dur); }
};

// A folded run's counts; its first start and last end are its item's start and end.
struct RunCounts {
  uint64_t calls = 0, sum_ns = 0, min_ns = 0, max_ns = 0;
};

std::unique_ptr<std::pmr::unsynchronized_pool_resource> new_group_pool();

struct Proc {
  uint32_t pid = 0;
  std::vector<Call> calls;  // top-level, start order
  std::vector<RunCounts> runs;
  // The groups' lists come from one pool of huge pages a process: as many lists as steps times
  // ops (366 K a rank at 100 M calls), each from malloc, faulted in 4 KB at a time, were most of
  // the collection's time (35 M grouped calls: 2.6 s on their own, 0.9 s from the pool).
  std::unique_ptr<std::pmr::unsynchronized_pool_resource> group_pool = new_group_pool();
  std::vector<GroupList> groups;
  // Per op (index into ops): its newest group, whose size sizes the next one's list. A
  // step's groups of an op are much alike (48 launches, step after step): grown by doubling
  // instead, they were allocated 7 times over and shrunk at the end, most of the collection's
  // time at 100 M calls.
  std::vector<uint32_t> newest_group;
  std::vector<uint64_t> stacks;  // the stacks of grouped calls, interned
  std::unordered_map<uint64_t, uint32_t> stack_index;
  // Recent look-ups of stack_index, by the stack's hash: (stack, index), index UINT32_MAX when
  // empty.
  std::array<std::pair<uint64_t, uint32_t>, 64> recent_stacks = [] {
    std::array<std::pair<uint64_t, uint32_t>, 64> a;
    a.fill({0, UINT32_MAX});
    return a;
  }();
  std::vector<TopLevelOp> ops;
  std::map<std::pair<const char*, const char*>, uint32_t> op_index;  // (op, api) storage
  struct Open {
    size_t last = SIZE_MAX, prev = SIZE_MAX;  // the thread's last item and the one before
  };
  std::map<uint32_t, Open> open;  // by tid, while collecting
  uint64_t dropped = 0;

  static bool grouped(const Call& c) { return c.run != kNoRun && (c.run & kGroupBit); }
  const GroupList& group(const Call& c) const { return groups[c.run & ~kGroupBit]; }
  uint64_t calls_in(const Call& c) const {
    return c.run == kNoRun ? 1 : grouped(c) ? group(c).size() : runs[c.run].calls;
  }
  RunShape run(const Call& c) const {
    const RunCounts& r = runs[c.run];
    RunShape s;
    s.ts_ns = c.start;
    s.span_ns = uint64_t(c.end - c.start);
    s.calls = r.calls;
    s.sum_ns = r.sum_ns;
    s.min_ns = r.min_ns;
    s.max_ns = r.max_ns;
    return s;
  }
  int64_t last_start(const Call& c) const {
    return c.run == kNoRun ? c.start
           : grouped(c)    ? c.start + int64_t(group(c).back().delta)
                           : run(c).last_start();
  }
  // Time inside the item's calls.
  uint64_t busy_ns(const Call& c) const {
    if (c.run == kNoRun) return uint64_t(c.end - c.start);
    if (!grouped(c)) return runs[c.run].sum_ns;
    uint64_t n = 0;
    for (const Grouped& g : group(c)) n += g.dur();
    return n;
  }
  // The item's first call, and call k + 1 after call k (`at`).
  Span first(const Call& c) const {
    if (c.run == kNoRun) return {c.start, uint64_t(c.end - c.start), c.stack};
    if (grouped(c)) return span_of(c, 0);
    return inside(c, {c.start, run(c).duration(0), c.stack});
  }
  Span next(const Call& c, uint64_t k, const Span& at) const {
    if (grouped(c)) return span_of(c, k + 1);
    RunShape r = run(c);
    return inside(c, {at.end() + int64_t(r.gap(k)), r.duration(k + 1), c.stack});
  }
  // The first call of item c starting at or after t, if any: found, not walked to (a run of
  // thousands of launches is searched once per preemption of its thread).
  std::optional<Span> span_from(const Call& c, int64_t t) const {
    if (c.run == kNoRun) return c.start >= t ? std::optional<Span>(first(c)) : std::nullopt;
    if (grouped(c)) {
      const GroupList& g = group(c);
      auto at = std::lower_bound(g.begin(), g.end(), t, [&](const Grouped& x, int64_t v) {
        return c.start + int64_t(x.delta) < v;
      });
      if (at == g.end()) return std::nullopt;
      return span_of(c, uint64_t(at - g.begin()));
    }
    RunShape r = run(c);
    uint64_t k = r.first_from(t);
    if (k == r.calls) return std::nullopt;
    return inside(c, {r.start(k), r.duration(k), c.stack});
  }
  // Each call of item c: fn(uint64_t k, const Span&).
  template <class Fn>
  void for_each_span(const Call& c, Fn&& fn) const {
    if (c.run != kNoRun && !grouped(c)) {  // a run spreads its calls itself
      run(c).for_each_span([&](uint64_t k, int64_t start, uint64_t dur) {
        fn(k, static_cast<const Span&>(inside(c, Span{start, dur, c.stack})));
      });
      return;
    }
    uint64_t n = calls_in(c);
    for (uint64_t k = 0; k < n; ++k)
      fn(k, static_cast<const Span&>(c.run == kNoRun ? first(c) : span_of(c, k)));
  }

 private:
  // A folded run's call kept within its run: calls seen at entry only spread at their op's
  // mean (engine/call_run.h), and one slow timed call can lift the mean so far that the spread
  // runs past the run's last end, over the thread's next calls (a sync would then not drain
  // the launches before it). No call of the run starts (RunShape) or ends after the run.
  static Span inside(const Call& c, Span s) {
    s.start = std::min(s.start, c.end);
    s.dur = std::min(s.dur, uint64_t(c.end - s.start));
    return s;
  }
  Span span_of(const Call& c, uint64_t k) const {
    const Grouped& g = group(c)[k];
    return {c.start + int64_t(g.delta), g.dur(), stacks[g.stack()]};
  }
};

// Call k of a run or group yet to start, for the walks that take them call by call: by start,
// then item, then k.
struct Pending {
  Span s;
  size_t item = 0;
  uint64_t k = 0;
  bool operator>(const Pending& o) const {
    return std::tie(s.start, item, k) > std::tie(o.s.start, o.item, o.k);
  }
};
using PendingQueue = MinQueue<Pending>;

// Every call of p.calls in start order, the calls of runs and groups one by one (they interleave
// with those of other threads): fn(const Span&, size_t item). Ties: the item listed first, then
// an item's earlier call.
template <class Fn>
void each_call(const Proc& p, Fn&& fn) {
  PendingQueue pending;
  size_t i = 0;
  while (i < p.calls.size() || !pending.empty()) {
    if (pending.empty() || (i < p.calls.size() && p.calls[i].start <= pending.top().s.start)) {
      const Call& c = p.calls[i];
      if (c.run == kNoRun)
        fn(p.first(c), i);
      else
        pending.push({p.first(c), i, 0});
      ++i;
      continue;
    }
    Pending n = pending.top();
    pending.pop();
    const Call& c = p.calls[n.item];
    fn(static_cast<const Span&>(n.s), n.item);
    if (n.k + 1 < p.calls_in(c)) pending.push({p.next(c, n.k, n.s), n.item, n.k + 1});
  }
}

// A blocking round trip: consecutive waits of one thread from one site.
struct RoundTrip {
  int64_t start = 0, end = 0;
  uint32_t tid = 0;
  uint32_t site = 0;  // index into Sites
  uint64_t stack = 0;
  bool d2h = false;
  uint64_t wait_ns = 0;
};

// A process's call sites: a stack's user frames, interned. The stack ids of one site differ
// where native unwinding differs (an unresolved frame); its Python lines do not. Each process
// modelled has its own (site numbers are the process's own, whatever order the threads modelling
// processes run in); their reads of stacks share the source, one at a time under `stacks_lock`.
class Sites {
 public:
  Sites(TraceSource& source, std::mutex& stacks_lock)
      : source_(source), lock_(stacks_lock), where_(source, &stacks_lock) {}
  uint32_t of(uint64_t stack, std::string_view op);
  const std::string& key(uint32_t site) const { return keys_[site]; }
  uint64_t stack(uint32_t site) const { return stacks_[site]; }
  // "function (file:line)" of the innermost user frame of a stack ("" without frames).
  const std::string& where(uint64_t stack) { return where_(stack); }

 private:
  std::vector<StackFrameInfo> frames(uint64_t stack);
  TraceSource& source_;
  std::mutex& lock_;
  std::map<uint64_t, uint32_t> by_stack_;
  std::map<std::string, uint32_t> by_key_;
  std::vector<std::string> keys_;
  std::vector<uint64_t> stacks_;
  CodeLocations where_;
};

Cat category(const hal::Event& e);
// A file of an installed package (site-packages, dist-packages, the standard library).
bool library_file(const std::string& f);
// A native module of the system or a vendor runtime (libc, the vDSO, libcuda, site-packages).
bool library_module(const std::string& m);
std::string basename(const std::string& f);
bool puts_work(hal::EventKind k);

// Where the steady steps' host gaps went, for the summary.
struct Tallies {
  std::map<uint64_t, uint64_t> samples;       // on-CPU sample stack -> samples
  std::map<uint64_t, uint64_t> after_ns;      // stack of the call ending a gap -> gap ns
  std::map<uint64_t, uint64_t> before_io_ns;  // stack of the call before an I/O gap -> io ns
  std::map<std::pair<uint32_t, std::string>, uint64_t> preemptor_ns;  // (pid, comm) -> ns
  // Who preempted GPU-feeding threads anywhere in steady steps: (pid, comm) -> ns.
  std::map<std::pair<uint32_t, std::string>, uint64_t> step_preemptor_ns;
  // Steady preempted time by the stack of the GPU call the thread made next: the code it was
  // running toward when it lost the CPU. (stack, op) -> ns, and the thread of the longest.
  std::map<std::pair<uint64_t, std::string>, uint64_t> preempted_before_ns;
  std::map<std::pair<uint64_t, std::string>, uint32_t> preempted_before_tid;
};

// steps_collect.cc: the top-level calls of every GPU process in `w`, in start order: calls
// nested in another call of their thread folded into it, folded runs and consecutive launches
// grouped into items, up to `max_bytes` (past it, calls are counted in Proc::dropped).
// `calls_per_pid` sizes each process's list once. Where the source's calls are in memory
// (TraceSource::concurrent_call_reads), the processes are collected on up to `threads` threads,
// each reading every call: the same processes as on one.
std::map<uint32_t, Proc> collect_calls(TraceSource& source, const Window& w, size_t max_bytes,
                                       const std::map<uint32_t, uint64_t>& calls_per_pid,
                                       unsigned threads = 1);

// steps_preemption.cc: the threads of `p` that feed the GPU (make GPU calls): tid -> its items.
// Empty where the trace has no off-CPU intervals of `p`, the only case that reads it. One pass
// over the calls, made once per process for both readers below.
using FeedingThreads = std::map<uint32_t, size_t>;
FeedingThreads feeding_threads(const Proc& p, const HostContext& host);

// steps_timeline.cc: fills the breakdown, counts and gaps of every step in `s`, from the calls
// and the step boundaries already in `s.steps`; stores at most `max_gaps` gaps (the others are
// counted in s.gaps_dropped and still add to every total).
void build_timeline(const Proc& p, const HostContext& host,
                    const std::map<uint32_t, std::vector<CpuSample>>& samples,
                    const FeedingThreads& feeding, StepSeries& s, Tallies& tally, size_t max_gaps);

// steps_preemption.cc: Step::preempted_ns of every step in `s`: the time at least one thread
// feeding the GPU was runnable but another task had its CPU. Before the warm-up is marked (a
// step slowed by a noisy neighbour is not warm-up).
void count_preempted(const Proc& p, const HostContext& host, const FeedingThreads& feeding,
                     StepSeries& s);

// steps_summary.cc
void count_sites(const Proc& p, Sites& sites, const std::vector<RoundTrip>& trips, StepSeries& s);
// The launch site issuing most of the steady steps' launches (summary.launch_*).
void count_launch_sites(const Proc& p, Sites& sites, StepSeries& s);
void summarize(StepSeries& s, Sites& sites, const Tallies& tally);
// steps_device.cc: Step::gpu_busy of the steps `device` covers, and the summary's measure.
void measure_steps(StepSeries& s, const DeviceBusy* device);
// Nearest-rank quantile of an unsorted vector (copied).
uint64_t quantile(std::vector<uint64_t> v, double q);

}  // namespace ingero::engine::steps_detail

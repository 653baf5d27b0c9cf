// The step model, part 2c: the threads that feed the GPU, and the CPU they lost to preemption
// in each step: how long, to whom, and before which call.
#include <algorithm>
#include <optional>

#include "engine/steps_timeline.h"

namespace ingero::engine::steps_detail {
namespace {

// Splits [a, b) at the boundaries of `s`'s steps: fn(step, lo, hi) for each piece inside them.
class StepSplitter {
 public:
  explicit StepSplitter(StepSeries& s) : s_(s) {
    starts_.reserve(s.steps.size());
    for (const Step& st : s.steps) starts_.push_back(st.start_ns);
  }
  int64_t first() const { return starts_.front(); }
  int64_t last() const { return s_.steps.back().end_ns; }
  template <class Fn>
  void operator()(int64_t a, int64_t b, Fn&& fn) {
    a = std::max(a, first());
    b = std::min(b, last());
    while (a < b) {
      size_t k = size_t(std::upper_bound(starts_.begin(), starts_.end(), a) - starts_.begin() - 1);
      int64_t end = std::min(b, s_.steps[k].end_ns);
      fn(s_.steps[k], a, end);
      a = end;
    }
  }

 private:
  StepSeries& s_;
  std::vector<int64_t> starts_;
};

}  // namespace

void count_preemptors(const Proc& p, const HostContext& host, const FeedingThreads& feeding,
                      StepSeries& s, Tallies& tally) {
  auto it = host.offcpu.find(p.pid);
  if (it == host.offcpu.end()) return;
  StepSplitter split(s);
  int64_t first = split.first(), last = split.last();
  // Each feeding thread's calls in start order, to find the call it made after a preemption:
  // the process's own list where one thread makes every call (a training loop's main thread),
  // else one list a thread, all made in one pass when a preemption first asks (a pass a
  // thread was 20,000 passes over 940,000 calls for a process of 20,000 threads).
  std::map<uint32_t, std::vector<const Call*>> by_tid;
  auto calls_of = [&](uint32_t tid) -> const std::vector<const Call*>& {
    if (by_tid.empty()) {
      for (const auto& [t, n] : feeding) by_tid[t].reserve(n);
      for (const Call& c : p.calls) by_tid[c.tid].push_back(&c);
    }
    return by_tid[tid];
  };
  // The first call of the thread starting at or after t: (its stack, its op), or none.
  auto next_call = [&](uint32_t tid, int64_t t) -> std::optional<std::pair<uint64_t, uint32_t>> {
    const Call* later = nullptr;   // its first item starting at or after t
    const Call* before = nullptr;  // the item before that
    if (feeding.size() == 1) {
      auto at = std::lower_bound(p.calls.begin(), p.calls.end(), t,
                                 [](const Call& c, int64_t x) { return c.start < x; });
      if (at != p.calls.end()) later = &*at;
      if (at != p.calls.begin()) before = &*std::prev(at);
    } else {
      const auto& v = calls_of(tid);
      auto at = std::lower_bound(v.begin(), v.end(), t,
                                 [](const Call* c, int64_t x) { return c->start < x; });
      if (at != v.end()) later = *at;
      if (at != v.begin()) before = *std::prev(at);
    }
    // A run or group started before t may have calls left after it.
    if (before && p.last_start(*before) >= t) {
      auto x = p.span_from(*before, t);
      if (!x) return std::nullopt;
      return std::make_pair(x->stack, before->op);
    }
    if (!later) return std::nullopt;
    return std::make_pair(p.first(*later).stack, later->op);
  };
  for (const OffCpuInterval& iv : it->second) {
    if (!iv.preempted || !feeding.count(iv.tid) || iv.end <= first || iv.start >= last) continue;
    auto next = next_call(iv.tid, iv.end);
    split(iv.start, iv.end, [&](Step& st, int64_t lo, int64_t hi) {
      if (st.warmup) return;
      if (next) {
        auto key = std::make_pair(next->first, p.ops[next->second].op);
        uint64_t& ns = tally.preempted_before_ns[key];
        ns += uint64_t(hi - lo);
        tally.preempted_before_tid.try_emplace(key, iv.tid);
      }
      if (!host.by_pid(iv)) return;
      tally.step_preemptor_ns[{host.by_pid(iv), host.comm_name(host.by_comm(iv))}] +=
          uint64_t(hi - lo);
    });
  }
}

FeedingThreads feeding_threads(const Proc& p, const HostContext& host) {
  FeedingThreads feeding;
  if (!host.offcpu.count(p.pid)) return feeding;
  for (const Call& c : p.calls) ++feeding[c.tid];
  return feeding;
}

void count_preempted(const Proc& p, const HostContext& host, const FeedingThreads& feeding,
                     StepSeries& s) {
  auto it = host.offcpu.find(p.pid);
  if (it == host.offcpu.end() || s.steps.empty()) return;
  StepSplitter split(s);
  int64_t reach = INT64_MIN;  // union over threads: intervals come in start order
  for (const OffCpuInterval& iv : it->second) {
    if (!iv.preempted || !feeding.count(iv.tid) || iv.end <= split.first() ||
        iv.start >= split.last())
      continue;
    int64_t from = std::max(iv.start, reach);
    if (iv.end > from)
      split(from, iv.end,
            [](Step& st, int64_t lo, int64_t hi) { st.preempted_ns += uint64_t(hi - lo); });
    reach = std::max(reach, iv.end);
  }
}

}  // namespace ingero::engine::steps_detail

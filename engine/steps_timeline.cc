// The step model, part 2: one sweep over a process's top-level calls (all threads) that
// splits each step into host categories, estimates when the GPU had no work, and cuts out
// the host gaps; each gap is then attributed to what its thread did.
#include <algorithm>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>

#include "engine/steps_internal.h"
#include "engine/thresholds_steps.h"

namespace ingero::engine::steps_detail {
namespace {

// Off-CPU intervals longer than this are not looked for before a gap's start.
constexpr int64_t kMaxLookbackNs = 60'000'000'000;

class Attributor {
 public:
  Attributor(uint32_t pid, const HostContext& host,
             const std::map<uint32_t, std::vector<CpuSample>>& samples)
      : host_(host), samples_(samples) {
    if (auto it = host.offcpu.find(pid); it != host.offcpu.end())
      for (const auto& iv : it->second) by_tid_[iv.tid].push_back(&iv);
    if (auto it = host.block_by_pid.find(pid); it != host.block_by_pid.end()) blocks_ = &it->second;
  }

  // `tally`: null for warm-up gaps, which the summary leaves out.
  void attribute(HostGap& g, Tallies* tally) {
    int64_t a = g.start_ns, b = g.end_ns;
    uint64_t off = 0;
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> by;  // preemptor (pid, comm) -> ns
    if (auto it = by_tid_.find(g.tid); it != by_tid_.end()) {
      const auto& v = it->second;
      // One thread's intervals do not overlap: ordered by start, they are ordered by end.
      auto k = std::lower_bound(v.begin(), v.end(), a,
                                [](const OffCpuInterval* x, int64_t t) { return x->end <= t; });
      for (; k != v.end() && (*k)->start < b; ++k) {
        const OffCpuInterval& x = **k;
        int64_t lo = std::max(x.start, a), hi = std::min(x.end, b);
        if (hi <= lo) continue;
        uint64_t d = uint64_t(hi - lo);
        off += d;
        if (x.preempted) {
          g.time.preempted_ns += d;
          if (x.by_pid) by[{x.by_pid, x.by_comm}] += d;
        } else if (x.state & 2) {
          g.time.io_ns += d;
        } else {
          g.time.sleep_ns += d;
        }
      }
    }
    uint64_t len = uint64_t(b - a);
    if (!host_.has_sched_events) {  // nothing says whether the thread ran
      g.time.unknown_ns = len;
      return;
    }
    g.time.on_cpu_ns = off >= len ? 0 : len - off;
    if (off > len) {  // rounding at the edges: keep the parts summing to the gap
      double f = double(len) / double(off);
      g.time.preempted_ns = uint64_t(double(g.time.preempted_ns) * f);
      g.time.io_ns = uint64_t(double(g.time.io_ns) * f);
      g.time.sleep_ns = len - g.time.preempted_ns - g.time.io_ns;
    }
    if (!by.empty()) {
      auto top = std::max_element(by.begin(), by.end(),
                                  [](auto& x, auto& y) { return x.second < y.second; });
      g.preemptor_pid = top->first.first;
      g.preemptor = host_.comm_name(top->first.second);
      if (tally)
        for (const auto& [key, ns] : by)
          tally->preemptor_ns[{key.first, host_.comm_name(key.second)}] += ns;
    }
    if (blocks_) {
      auto k = std::lower_bound(blocks_->begin(), blocks_->end(), a - kMaxLookbackNs,
                                [](const BlockRequest& x, int64_t t) { return x.start < t; });
      for (; k != blocks_->end() && k->start < b; ++k) {
        if (k->end <= a) continue;
        ++g.block_ios;
        if (k->write) g.block_write_bytes += k->bytes;
      }
    }
    if (auto it = samples_.find(g.tid); it != samples_.end()) {
      const auto& v = it->second;
      auto k = std::lower_bound(v.begin(), v.end(), a,
                                [](const CpuSample& x, int64_t t) { return x.ts_ns < t; });
      std::map<uint64_t, uint32_t> n;
      for (; k != v.end() && k->ts_ns < b; ++k) {
        ++n[k->stack_id];
        ++g.samples;
        if (tally) ++tally->samples[k->stack_id];
      }
      if (!n.empty())
        g.sample_stack = std::max_element(n.begin(), n.end(), [](auto& x, auto& y) {
                           return x.second < y.second;
                         })->first;
    }
  }

 private:
  const HostContext& host_;
  const std::map<uint32_t, std::vector<CpuSample>>& samples_;
  std::map<uint32_t, std::vector<const OffCpuInterval*>> by_tid_;
  const std::vector<BlockRequest>* blocks_ = nullptr;
};

struct StreamState {
  bool busy = false;
  int64_t last_work = 0;  // end of the last call that queued work on it
};

class Sweep {
 public:
  Sweep(const Proc& p, StepSeries& s, Attributor& attr, Tallies& tally, size_t max_gaps)
      : p_(p), s_(s), attr_(attr), tally_(tally), max_gaps_(max_gaps) {
    bounds_.reserve(s.steps.size() + 1);
    for (const Step& st : s.steps) bounds_.push_back(st.start_ns);
    bounds_.push_back(s.steps.back().end_ns);
    // Room for two gaps a step: a list of ~300 K gaps (200 bytes each, with their strings)
    // grown by doubling was copied, and its pages faulted in, again at every doubling.
    s.gaps.reserve(std::min(max_gaps, 2 * s.steps.size() + 16));
  }

  void run() {
    // Open calls by end: (end, item, stack).
    using End = std::tuple<int64_t, size_t, uint64_t>;
    std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
    PendingQueue pending;  // the next call of each run or group taken call by call
    const size_t n = p_.calls.size();
    size_t next = 0;
    int64_t now = p_.calls.front().start;
    while (next < n || !pending.empty() || !ends.empty()) {
      bool from_item =
          !pending.empty() && (next == n || pending.top().s.start < p_.calls[next].start);
      int64_t start = from_item  ? pending.top().s.start
                      : next < n ? p_.calls[next].start
                                 : INT64_MAX;
      // Calls that end close before calls that start at the same instant.
      bool close = !ends.empty() && std::get<0>(ends.top()) <= start;
      int64_t t = close ? std::get<0>(ends.top()) : start;
      account(now, t);
      now = t;
      if (close) {
        auto [end, i, stack] = ends.top();
        ends.pop();
        on_close(i, end, stack);
      } else if (from_item) {
        Pending x = pending.top();
        pending.pop();
        const Call& c = p_.calls[x.item];
        on_open(x.item, x.s.stack);
        ends.push({x.s.end(), x.item, x.s.stack});
        if (x.k + 1 < p_.calls_in(c)) pending.push({p_.next(c, x.k, x.s), x.item, x.k + 1});
      } else {
        size_t i = next++;
        const Call& c = p_.calls[i];
        if (c.run == kNoRun) {
          on_open(i, c.stack);
          ends.push({c.end, i, c.stack});
        } else if (ends.empty() && pending.empty() &&
                   (next == n || p_.calls[next].start >= c.end) && c.work &&
                   p_.busy_ns(c) <= uint64_t(c.end - c.start) && within_step(c.start, c.end)) {
          whole(i);
          now = c.end;
        } else {
          pending.push({p_.first(c), i, 0});  // opened in start order with the calls around it
        }
      }
      update_gap(now);
    }
    if (in_gap_) close_gap(now, SIZE_MAX, 0);
  }

 private:
  uint32_t step_of(int64_t t) const {
    auto it = std::upper_bound(bounds_.begin(), bounds_.end(), t);
    if (it == bounds_.begin() || it == bounds_.end()) return kNoStep;
    return uint32_t(it - bounds_.begin() - 1);
  }

  // [a, b) in the current state, split at step boundaries.
  void account(int64_t a, int64_t b) {
    bool idle = busy_streams_ == 0;
    int top = active_[kWait] ? kWait : active_[kEnqueue] ? kEnqueue : active_[kApi] ? kApi : 3;
    while (a < b) {
      uint32_t k = step_of(a);
      int64_t end = b;
      if (k != kNoStep)
        end = std::min(b, bounds_[k + 1]);
      else if (a < bounds_.front())
        end = std::min(b, bounds_.front());
      if (k != kNoStep) {
        Step& st = s_.steps[k];
        uint64_t d = uint64_t(end - a);
        (top == kWait      ? st.wait_ns
         : top == kEnqueue ? st.enqueue_ns
         : top == kApi     ? st.api_ns
                           : st.host_ns) += d;
        if (idle) st.gpu_idle_ns += d;
        if (idle && top == 3) st.host_gap_ns += d;
      }
      a = end;
    }
  }

  void on_open(size_t i, uint64_t stack) {
    ++active_[p_.calls[i].cat];
    last_open_ = i;
    last_open_stack_ = stack;
  }

  void on_close(size_t i, int64_t end, uint64_t stack) {
    const Call& c = p_.calls[i];
    --active_[c.cat];
    last_closed_ = i;
    last_closed_stack_ = stack;
    if (c.work) {
      StreamState& st = streams_[c.stream];
      st.last_work = std::max(st.last_work, end);
      if (!st.busy) {
        st.busy = true;
        ++busy_streams_;
      }
    }
    if (c.kind == hal::EventKind::kSync) {
      // The sync returned: the work queued before it started is done. A sync without a
      // stream (device, context, event) is taken to drain every stream.
      for (auto& [id, st] : streams_) {
        if (c.stream != kNoStream && id != c.stream) continue;
        if (st.busy && st.last_work <= c.start) {
          st.busy = false;
          --busy_streams_;
        }
      }
    }
  }

  // Whether [a, b) lies in one step (or wholly outside the steps).
  bool within_step(int64_t a, int64_t b) const {
    auto it = std::upper_bound(bounds_.begin(), bounds_.end(), a);
    return it == bounds_.end() || *it >= b;
  }

  // A run or group alone: no other call of the process open or starting before its end, and
  // no step boundary inside it. Its first call is taken as any call; after it the stream has
  // work and no sync comes before the item ends, so the GPU is busy, no gap opens, and the rest
  // of the item is its launches (enqueue) and the host time between them, exactly as call by
  // call.
  void whole(size_t i) {
    const Call& c = p_.calls[i];
    Span first = p_.first(c);
    on_open(i, first.stack);
    update_gap(c.start);
    account(c.start, first.end());
    on_close(i, first.end(), first.stack);
    update_gap(first.end());
    uint64_t rest = p_.busy_ns(c) - first.dur;
    if (uint32_t k = step_of(first.end()); k != kNoStep && c.end > first.end()) {
      Step& st = s_.steps[k];
      st.enqueue_ns += rest;
      st.host_ns += uint64_t(c.end - first.end()) - rest;
    }
    StreamState& st = streams_[c.stream];
    st.last_work = std::max(st.last_work, c.end);
    if (Proc::grouped(c)) last_closed_stack_ = p_.stacks[p_.group(c).back().stack()];
  }

  void update_gap(int64_t t) {
    bool gap = busy_streams_ == 0 && !active_[kWait] && !active_[kEnqueue] && !active_[kApi];
    if (gap && !in_gap_) {
      in_gap_ = true;
      gap_start_ = t;
      gap_before_ = last_closed_;
      gap_before_stack_ = last_closed_stack_;
    } else if (!gap && in_gap_) {
      close_gap(t, last_open_, last_open_stack_);
    }
  }

  void close_gap(int64_t t, size_t after, uint64_t after_stack) {
    in_gap_ = false;
    if (t <= gap_start_) return;
    const Call* before = gap_before_ == SIZE_MAX ? nullptr : &p_.calls[gap_before_];
    const Call* next = after == SIZE_MAX ? nullptr : &p_.calls[after];
    HostGap g;
    g.tid = next ? next->tid : before ? before->tid : 0;
    g.before_stack = before ? gap_before_stack_ : 0;
    if (next) {
      g.after_stack = after_stack;
      g.after_kind = next->kind;
      g.after_op = p_.ops[next->op].op;
      if (next->h2d) g.after_direction = uint64_t(hal::CopyDirection::kHostToDevice);
      if (next->d2h) g.after_direction = uint64_t(hal::CopyDirection::kDeviceToHost);
    }
    // One record per step the gap falls in.
    for (int64_t a = gap_start_; a < t;) {
      uint32_t k = step_of(a);
      int64_t end = t;
      if (k != kNoStep)
        end = std::min(t, bounds_[k + 1]);
      else if (a < bounds_.front())
        end = std::min(t, bounds_.front());
      if (k != kNoStep) {
        HostGap piece = g;
        piece.start_ns = a;
        piece.end_ns = end;
        piece.step = k;
        Step& st = s_.steps[k];
        bool steady = !st.warmup;
        attr_.attribute(piece, steady ? &tally_ : nullptr);
        st.gap += piece.time;
        if (steady) {
          tally_.after_ns[piece.after_stack] += piece.duration();
          if (piece.time.io_ns) tally_.before_io_ns[piece.before_stack] += piece.time.io_ns;
        }
        if (s_.gaps.size() < max_gaps_)
          s_.gaps.push_back(std::move(piece));
        else
          ++s_.gaps_dropped;
      }
      a = end;
    }
  }

  const Proc& p_;
  StepSeries& s_;
  Attributor& attr_;
  Tallies& tally_;
  size_t max_gaps_;
  std::vector<int64_t> bounds_;
  int active_[3] = {0, 0, 0};
  std::unordered_map<uint64_t, StreamState> streams_;
  int busy_streams_ = 0;
  bool in_gap_ = false;
  int64_t gap_start_ = 0;
  size_t gap_before_ = SIZE_MAX, last_closed_ = SIZE_MAX, last_open_ = SIZE_MAX;
  // The stacks of those calls (the calls of a group have their own).
  uint64_t gap_before_stack_ = 0, last_closed_stack_ = 0, last_open_stack_ = 0;
};

// Adds n calls of item c, `ns` inside them, to step st.
void add_calls(Step& st, const Call& c, uint32_t n, uint64_t ns) {
  using K = hal::EventKind;
  switch (c.kind) {
    case K::kLaunch:
    case K::kGraphLaunch:
      st.launches += n;
      break;
    case K::kMemcpy:
      st.copies += n;
      if (c.h2d) st.h2d_bytes += n * c.bytes;
      if (c.d2h) st.d2h_bytes += n * c.bytes;
      break;
    case K::kSync:
      st.syncs += n;
      break;
    case K::kAlloc:
      st.allocs += n;
      st.alloc_free_ns += ns;
      break;
    case K::kFree:
      st.frees += n;
      st.alloc_free_ns += ns;
      break;
    case K::kCollective:
      st.collectives += n;
      break;
    default:
      break;
  }
}

void count_calls(const Proc& p, StepSeries& s) {
  std::vector<int64_t> starts;
  for (const Step& st : s.steps) starts.push_back(st.start_ns);
  int64_t last = s.steps.back().end_ns;
  auto step_of = [&](int64_t t) -> Step* {
    if (t < starts.front() || t >= last) return nullptr;
    return &s.steps[size_t(std::upper_bound(starts.begin(), starts.end(), t) - starts.begin() - 1)];
  };
  for (const Call& c : p.calls) {
    Step* st = step_of(c.start);
    if (c.run == kNoRun || (st && st == step_of(p.last_start(c)))) {  // all in one step
      if (st) add_calls(*st, c, uint32_t(p.calls_in(c)), p.busy_ns(c));
      continue;
    }
    p.for_each_span(c, [&](uint64_t, const Span& x) {
      if (Step* in = step_of(x.start)) add_calls(*in, c, 1, x.dur);
    });
  }
}

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

// Who took the CPU of the threads that feed the GPU in steady steps, and which call each
// preemption delayed.
void count_preemptors(const Proc& p, const HostContext& host, const FeedingThreads& feeding,
                      StepSeries& s, Tallies& tally) {
  auto it = host.offcpu.find(p.pid);
  if (it == host.offcpu.end()) return;
  StepSplitter split(s);
  int64_t first = split.first(), last = split.last();
  // Each feeding thread's calls in start order, to find the call it made after a preemption:
  // the process's own list where one thread makes every call (a training loop's main thread),
  // else one list a thread, made when a preemption asks for it.
  std::map<uint32_t, std::vector<const Call*>> by_tid;
  auto calls_of = [&](uint32_t tid) -> const std::vector<const Call*>& {
    auto [it, fresh] = by_tid.try_emplace(tid);
    if (fresh) {
      it->second.reserve(feeding.at(tid));
      for (const Call& c : p.calls)
        if (c.tid == tid) it->second.push_back(&c);
    }
    return it->second;
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
      const Call& c = *before;
      std::optional<std::pair<uint64_t, uint32_t>> found;
      p.for_each_span(c, [&](uint64_t, const Span& x) {
        if (!found && x.start >= t) found.emplace(x.stack, c.op);
      });
      return found;
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
      if (!iv.by_pid) return;
      tally.step_preemptor_ns[{iv.by_pid, host.comm_name(iv.by_comm)}] += uint64_t(hi - lo);
    });
  }
}

}  // namespace

FeedingThreads feeding_threads(const Proc& p, const HostContext& host) {
  FeedingThreads feeding;
  if (!host.offcpu.count(p.pid)) return feeding;
  for (const Call& c : p.calls) ++feeding[c.tid];
  return feeding;
}

void build_timeline(const Proc& p, const HostContext& host,
                    const std::map<uint32_t, std::vector<CpuSample>>& samples,
                    const FeedingThreads& feeding, StepSeries& s, Tallies& tally, size_t max_gaps) {
  if (s.steps.empty() || p.calls.empty()) return;
  count_calls(p, s);
  Attributor attr(p.pid, host, samples);
  Sweep(p, s, attr, tally, max_gaps).run();
  count_preemptors(p, host, feeding, s, tally);
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

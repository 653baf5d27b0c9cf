// The step model, part 2: one sweep over a process's top-level calls (all threads) that
// splits each step into host categories, estimates when the GPU had no work, and cuts out
// the host gaps; each gap is then attributed to what its thread did.
// The attribution is in steps_gap_attribution.cc, the preemption of the threads feeding the GPU
// in steps_preemption.cc.
#include "engine/steps_timeline.h"

#include <algorithm>
#include <unordered_map>

#include "engine/steps_internal.h"
#include "engine/thresholds_steps.h"

namespace ingero::engine::steps_detail {
namespace {

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
    MinQueue<End> ends;
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
        if (top == 3) st.host_time += attr_.host_spent(a, end);
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
      uint64_t host = uint64_t(c.end - first.end()) - rest;
      st.host_ns += host;
      st.host_time += run_host_time(first.end(), c.end, host);
    }
    StreamState& st = streams_[c.stream];
    st.last_work = std::max(st.last_work, c.end);
    if (Proc::grouped(c)) last_closed_stack_ = p_.stacks[p_.group(c).back().stack()];
  }

  // How the host time between a run's launches was spent: the host's time off its CPU over
  // the run, all of it taken as host time (a launch rarely leaves the CPU, and an untimed one's
  // length is not known), the rest on CPU.
  GapTime run_host_time(int64_t a, int64_t b, uint64_t host) {
    GapTime t = attr_.host_spent(a, b);
    if (t.unknown_ns) return GapTime{.unknown_ns = host};
    t.fit(host);
    return t;
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

}  // namespace

void build_timeline(const Proc& p, const HostContext& host,
                    const std::map<uint32_t, std::vector<CpuSample>>& samples,
                    const FeedingThreads& feeding, StepSeries& s, Tallies& tally, size_t max_gaps) {
  if (s.steps.empty() || p.calls.empty()) return;
  count_calls(p, s);
  Attributor attr(p, host, samples);
  Sweep(p, s, attr, tally, max_gaps).run();
  count_preemptors(p, host, feeding, s, tally);
}

}  // namespace ingero::engine::steps_detail

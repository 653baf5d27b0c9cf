// The step model, part 2b: each host gap attributed to what its thread did meanwhile: on CPU,
// preempted (and by whom), in I/O or asleep, the block requests in flight, the on-CPU samples.
#include <algorithm>

#include "engine/steps_timeline.h"

namespace ingero::engine::steps_detail {
namespace {

// Off-CPU intervals longer than this are not looked for before a gap's start.
constexpr int64_t kMaxLookbackNs = 60'000'000'000;

}  // namespace

Attributor::Attributor(const Proc& p, const HostContext& host,
                       const std::map<uint32_t, std::vector<CpuSample>>& samples)
    : host_(host), samples_(samples) {
  if (auto it = host.block_by_pid.find(p.pid); it != host.block_by_pid.end()) blocks_ = &it->second;
  if (auto it = host.offcpu.find(p.pid); it != host.offcpu.end() && !it->second.empty())
    place_intervals(it->second);
  // The threads making GPU calls, each with the span of its calls and its intervals.
  std::map<uint32_t, Feeder> feeders;
  for (const Call& c : p.calls) {
    auto [it, fresh] = feeders.try_emplace(c.tid, Feeder{c.start, c.end});
    if (!fresh) it->second.to = std::max(it->second.to, c.end);  // calls come in start order
  }
  feeders_.reserve(feeders.size());
  place_.resize(feeders.size());
  for (auto& [tid, f] : feeders) {
    if (auto it = by_tid_.find(tid); it != by_tid_.end()) {
      f.next = it->second.first;
      f.last = it->second.second;
    }
    feeders_.push_back(f);
  }
  std::sort(feeders_.begin(), feeders_.end(),
            [](const Feeder& x, const Feeder& y) { return x.from < y.from; });
}

void Attributor::place_intervals(const PodVector<OffCpuInterval>& v) {
  offcpu_ = &v;
  // Counted by thread, then placed: the process's order (start) is each thread's.
  auto range = by_tid_.end();
  for (const OffCpuInterval& iv : v) {
    if (range == by_tid_.end() || range->first != iv.tid) range = by_tid_.try_emplace(iv.tid).first;
    ++range->second.second;
  }
  uint32_t at = 0;
  for (auto& [tid, r] : by_tid_) {
    r.first = at;
    at += r.second;
    r.second = r.first;  // the next to place; its end once all are
  }
  order_.resize(v.size());
  range = by_tid_.end();
  for (uint32_t i = 0; i < uint32_t(v.size()); ++i) {
    if (range == by_tid_.end() || range->first != v[i].tid) range = by_tid_.find(v[i].tid);
    order_[range->second.second++] = i;
  }
}

void Attributor::attribute(HostGap& g, Tallies* tally) {
  int64_t a = g.start_ns, b = g.end_ns;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> by;  // preemptor (pid, comm) -> ns
  if (auto it = by_tid_.find(g.tid); it != by_tid_.end()) {
    const PodVector<OffCpuInterval>& v = *offcpu_;
    auto first = order_.begin() + it->second.first, last = order_.begin() + it->second.second;
    // One thread's intervals do not overlap: ordered by start, they are ordered by end.
    auto k = std::lower_bound(first, last, a, [&](uint32_t x, int64_t t) { return v[x].end <= t; });
    for (; k != last && v[*k].start < b; ++k) {
      const OffCpuInterval& x = v[*k];
      int64_t lo = std::max(x.start, a), hi = std::min(x.end, b);
      if (hi <= lo) continue;
      uint64_t d = uint64_t(hi - lo);
      if (x.preempted) {
        g.time.preempted_ns += d;
        if (uint32_t pid = host_.by_pid(x)) by[{pid, host_.by_comm(x)}] += d;
      } else if (x.io) {
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
  g.time.fit(len);
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

GapTime Attributor::host_spent(int64_t a, int64_t b) {
  GapTime t;
  if (b <= a) return t;
  uint64_t len = uint64_t(b - a);
  if (!host_.has_sched_events) {
    t.unknown_ns = len;
    return t;
  }
  // The threads whose calls' span meets [a, b): the others are asleep throughout, which
  // changes nothing below. Spans come in time order, so the set moves forward with them.
  // A thread leaves the set when its span ends, found by a heap of the ends: a pass over the set
  // at every span was 78% of explain for a process of 20,000 threads that all launch
  // throughout (the set is every thread).
  while (started_ < feeders_.size() && feeders_[started_].from < b) {
    uint32_t i = uint32_t(started_++);
    place_[i] = uint32_t(active_.size());
    active_.push_back(i);
    ends_.push({feeders_[i].to, i});
  }
  while (!ends_.empty() && ends_.top().first <= a) {
    uint32_t i = ends_.top().second, at = place_[i];
    ends_.pop();
    active_[at] = active_.back();
    place_[active_[at]] = at;
    active_.pop_back();
  }
  if (active_.empty()) {
    t.sleep_ns = len;
    return t;
  }
  // Each thread's time off its CPU in [a, b) as edges: its intervals there, and the time
  // outside the span of its calls (taken as asleep). A thread with none ran throughout.
  edges_.clear();
  for (uint32_t i : active_) {
    Feeder& f = feeders_[i];
    size_t before = edges_.size();
    auto off = [&](int64_t lo, int64_t hi, uint8_t what) {
      lo = std::max(lo, a);
      hi = std::min(hi, b);
      if (hi <= lo) return;
      edges_.push_back({lo, 1, what});
      edges_.push_back({hi, -1, what});
    };
    off(INT64_MIN, f.from, 0);
    if (offcpu_) {
      const PodVector<OffCpuInterval>& v = *offcpu_;
      while (f.next < f.last && v[order_[f.next]].end <= a) ++f.next;
      for (uint32_t j = f.next; j < f.last && v[order_[j]].start < b; ++j) {
        const OffCpuInterval& x = v[order_[j]];
        off(x.start, x.end, x.preempted ? 2 : x.io ? 1 : 0);
      }
    }
    off(f.to, INT64_MAX, 0);
    if (edges_.size() == before) {  // on its CPU all along: so was the host
      t.on_cpu_ns = len;
      return t;
    }
  }
  // Where every thread was off its CPU, the host was too: preempted if any of them was, else
  // in I/O if any was, else asleep.
  std::sort(edges_.begin(), edges_.end(), [](const Edge& x, const Edge& y) { return x.t < y.t; });
  int n = int(active_.size()), out = 0, by[3] = {0, 0, 0};
  int64_t at = a;
  auto until = [&](int64_t end) {  // [at, end) in the state the edges so far leave
    if (out == n && end > at)
      (by[2] ? t.preempted_ns : by[1] ? t.io_ns : t.sleep_ns) += uint64_t(end - at);
    at = std::max(at, end);
  };
  for (const Edge& e : edges_) {
    until(e.t);
    out += e.step;
    by[e.what] += e.step;
  }
  until(b);
  t.fit(len);
  return t;
}

}  // namespace ingero::engine::steps_detail

// The step model, part 2b: each host gap attributed to what its thread did meanwhile: on CPU,
// preempted (and by whom), in I/O or asleep, the block requests in flight, the on-CPU samples.
#include <algorithm>

#include "engine/steps_timeline.h"

namespace ingero::engine::steps_detail {
namespace {

// Off-CPU intervals longer than this are not looked for before a gap's start.
constexpr int64_t kMaxLookbackNs = 60'000'000'000;

}  // namespace

Attributor::Attributor(uint32_t pid, const HostContext& host,
                       const std::map<uint32_t, std::vector<CpuSample>>& samples)
    : host_(host), samples_(samples) {
  if (auto it = host.block_by_pid.find(pid); it != host.block_by_pid.end()) blocks_ = &it->second;
  auto it = host.offcpu.find(pid);
  if (it == host.offcpu.end() || it->second.empty()) return;
  offcpu_ = &it->second;
  const PodVector<OffCpuInterval>& v = *offcpu_;
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
  uint64_t off = 0;
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
      off += d;
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

}  // namespace ingero::engine::steps_detail

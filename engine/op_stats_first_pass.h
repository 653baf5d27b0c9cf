// What the op statistics' first pass keeps so that it is their only pass over the calls
// (docs/engine.md, "The op statistics in one read"): every whole call's duration, 2 or 4
// bytes each, for the exact quantiles' further passes; the calls that may be in their op's tail,
// for the tail pass and stack attribution. Each has a cap; past it, it holds nothing and the pass
// it stands for reads the calls again, as before.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hal/event.h"

namespace ingero::engine::op_stats_detail {

// A list appended to and read in order, in chunks that double from 1,024 items (those of
// 2 MiB and more in huge pages, hal/memory.h): no item is copied as it grows.
template <class T>
class ChunkList {
 public:
  ChunkList() = default;
  ChunkList(const ChunkList&) = delete;
  ChunkList& operator=(const ChunkList&) = delete;
  ChunkList(ChunkList&& o) noexcept { *this = std::move(o); }
  ChunkList& operator=(ChunkList&& o) noexcept {
    std::swap(chunks_, o.chunks_);
    std::swap(last_, o.last_);
    std::swap(size_, o.size_);
    return *this;
  }
  ~ChunkList() { clear(); }

  void push_back(const T& x) {
    if (chunks_.empty() || last_ == chunks_.back().second) grow();
    chunks_.back().first[last_++] = x;
    ++size_;
  }
  size_t size() const { return size_; }
  void clear();
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      size_t n = c + 1 == chunks_.size() ? last_ : chunks_[c].second;
      for (size_t i = 0; i < n; ++i) fn(chunks_[c].first[i]);
    }
  }

 private:
  void grow();
  std::vector<std::pair<T*, size_t>> chunks_;  // storage, capacity
  size_t last_ = 0;                            // items in the last chunk
  size_t size_ = 0;
};

// Every duration of the whole calls, by the call's per-process group; the overall group's
// values are its processes' values. Those under 65.5 us (launches) take 2 bytes, others 4 (8
// over 4.29 s). At most `max_values`, else none (`complete()` false).
class HeldDurations {
 public:
  explicit HeldDurations(size_t max_values) : max_(max_values) {}
  void add(size_t group, uint64_t v) {
    if (!ok_) return;
    if (++held_ > max_) return drop();
    if (group >= groups_.size()) groups_.resize(group + 1);
    if (v <= UINT16_MAX)
      groups_[group].short_.push_back(uint16_t(v));
    else if (v <= UINT32_MAX)
      groups_[group].long_.push_back(uint32_t(v));
    else
      wide_.push_back({group, v});
  }
  bool complete() const { return ok_; }
  // fn(group, value) for every value held, a group's values together (not in the order added).
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (size_t g = 0; g < groups_.size(); ++g) {
      groups_[g].short_.for_each([&](uint16_t v) { fn(g, uint64_t(v)); });
      groups_[g].long_.for_each([&](uint32_t v) { fn(g, uint64_t(v)); });
    }
    for (auto [g, v] : wide_) fn(g, v);
  }

 private:
  void drop();
  struct Group {
    ChunkList<uint16_t> short_;
    ChunkList<uint32_t> long_;
  };
  std::vector<Group> groups_;
  std::vector<std::pair<size_t, uint64_t>> wide_;  // over 4.29 s
  size_t held_ = 0, max_;
  bool ok_ = true;
};

// What the tail pass reads of a call.
struct TailCall {
  int64_t ts = 0;
  uint64_t dur = 0, off_cpu = 0;
  uint64_t peer_pid = 0;  // 0: none
  uint64_t stack = 0;
  uint32_t tid = 0, preempts = 0;
  uint32_t group = 0;  // its per-process group
};

inline TailCall tail_call_of(const hal::Event& e, size_t group) {
  TailCall c;
  c.ts = int64_t(e.ts_ns);
  c.dur = e.dur_ns;
  c.off_cpu = e.off_cpu_ns;
  c.tid = e.tid;
  c.preempts = e.preempts;
  c.group = uint32_t(group);
  c.stack = e.stack_id;
  if (auto pid = e.get(hal::Field::kPeerPid)) c.peer_pid = *pid;
  return c;
}

// The calls that may be in their op's tail (duration >= p95), caught as the first pass reads
// them: a call at or above its per-process or its overall group's floor is kept; of the
// others, only the longest duration of each group. Once every group's p95 is known, the kept
// calls hold every group's tail exactly when no group missed a call at or above its p95
// (`complete`); the floors only decide how many calls are kept. At most `max_calls`, else none.
class TailCatch {
 public:
  explicit TailCatch(size_t max_calls) : max_(max_calls) {}
  void set_floor(size_t group, uint64_t floor) {
    fit(group);
    floor_[group] = floor;
  }
  void offer(const hal::Event& e, size_t a, size_t b) {
    fit(std::max(a, b));
    if (e.dur_ns >= floor_[a] || e.dur_ns >= floor_[b]) return keep(e, a);
    missed_[a] = std::max(missed_[a], e.dur_ns + 1);
    missed_[b] = std::max(missed_[b], e.dur_ns + 1);
  }
  // Whether a call of `group` as long as `dur` would be kept.
  bool wants(size_t group, uint64_t dur) const {
    return group >= floor_.size() || dur >= floor_[group];
  }
  // Calls of `group` none longer than `dur`, none kept.
  void miss(size_t group, uint64_t dur) {
    fit(group);
    missed_[group] = std::max(missed_[group], dur + 1);
  }
  // Whether every call at or above `p95(group)` of a group with `count(group)` >= 2 was kept.
  template <class P95, class Count>
  bool complete(size_t groups, P95&& p95, Count&& count) const {
    if (!ok_) return false;
    for (size_t g = 0; g < groups && g < missed_.size(); ++g)
      if (count(g) >= 2 && missed_[g] > p95(g)) return false;  // missed one >= p95
    return true;
  }
  // fn(const TailCall&, std::string_view peer_comm) for every call kept, in order.
  template <class Fn>
  void for_each(Fn&& fn) const {
    calls_.for_each([&](const Kept& k) {
      TailCall c;
      c.ts = k.ts;
      c.dur = k.dur;
      c.tid = k.tid;
      c.group = k.group;
      c.stack = k.stack;
      if (!k.more) return fn(c, std::string_view());
      const More& m = more_[k.more - 1];
      c.dur = m.dur;
      c.off_cpu = m.off_cpu;
      c.peer_pid = m.peer_pid;
      c.preempts = m.preempts;
      fn(c, c.peer_pid ? std::string_view(names_[m.peer_comm]) : std::string_view());
    });
  }
  size_t size() const { return calls_.size(); }
  bool ok() const { return ok_; }
  // 1 + the longest call of `group` not kept; 0: none.
  uint64_t missed(size_t group) const { return group < missed_.size() ? missed_[group] : 0; }

 private:
  void fit(size_t group) {
    if (group >= floor_.size()) {
      floor_.resize(group + 1, 0);
      missed_.resize(group + 1, 0);
    }
  }
  void keep(const hal::Event& e, size_t a);
  // A call kept: 32 bytes, and what few calls have beside (off-CPU, a peer, a duration over
  // 4.29 s) in `more_`.
  struct Kept {
    int64_t ts;
    uint64_t stack;
    uint32_t dur, group, tid;
    uint32_t more;  // 1 + its index in more_; 0: none
  };
  struct More {
    uint64_t dur, off_cpu, peer_pid;
    uint32_t preempts, peer_comm;  // peer_comm: index in names_
  };
  ChunkList<Kept> calls_;
  std::vector<More> more_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> name_index_;
  std::vector<uint64_t> floor_;
  std::vector<uint64_t> missed_;  // 1 + the longest call not kept; 0: none
  size_t max_;
  bool ok_ = true;
};

}  // namespace ingero::engine::op_stats_detail

#include "engine/exact_quantiles.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

namespace ingero::engine {

namespace {

// Pass 1's log-scale buckets: values under 64 each their own, then 64 to an octave, so a
// bucket spans at most 1/64 of its values (HDR-histogram-like; 3,776 buckets for 64 bits).
constexpr int kSubBits = 6;
constexpr uint64_t kSub = uint64_t(1) << kSubBits;

size_t log_bucket(uint64_t v) {
  if (v < kSub) return size_t(v);
  int octave = 63 - std::countl_zero(v);  // >= kSubBits
  int shift = octave - kSubBits;
  return size_t(kSub + uint64_t(shift) * kSub + ((v >> shift) & (kSub - 1)));
}

// The values bucket `b` holds: [lo, hi].
std::pair<uint64_t, uint64_t> log_bucket_range(size_t b) {
  if (b < kSub) return {b, b};
  uint64_t shift = (b - kSub) / kSub, sub = (b - kSub) % kSub;
  uint64_t lo = (kSub + sub) << shift;
  return {lo, lo + ((uint64_t(1) << shift) - 1)};
}

constexpr size_t kLogBuckets = kSub + (64 - kSubBits) * kSub;

}  // namespace

void ExactQuantiles::add(size_t group, uint64_t value) {
  if (group >= groups_.size()) groups_.resize(group + 1);
  Group& g = groups_[group];
  ++g.n;
  g.min = std::min(g.min, value);
  g.max = std::max(g.max, value);
  if (g.log_hist.empty()) {
    if (g.few.size() < kFewValues) {
      g.few.push_back(value);
      return;
    }
    g.log_hist.assign(kLogBuckets, 0);
    for (uint64_t v : g.few) ++g.log_hist[log_bucket(v)];
    g.few = {};
  }
  ++g.log_hist[log_bucket(value)];
}

uint64_t ExactQuantiles::floor_of(size_t group, double q) const {
  if (group >= groups_.size() || groups_[group].n == 0) return 0;
  const Group& g = groups_[group];
  uint64_t rank = std::clamp<uint64_t>(uint64_t(std::ceil(q * double(g.n))), 1, g.n);
  if (g.log_hist.empty()) {  // the values themselves: the bucket of the rank's value
    std::vector<uint64_t> v = g.few;
    std::nth_element(v.begin(), v.begin() + long(rank - 1), v.end());
    return log_bucket_range(log_bucket(v[rank - 1])).first;
  }
  // Down from the largest value's bucket: the rank is in the first bucket with fewer values
  // below it than the rank.
  uint64_t from_top = 0;
  for (size_t b = log_bucket(g.max) + 1; b-- > 0;) {
    from_top += g.log_hist[b];
    if (g.n - from_top < rank) return log_bucket_range(b).first;
  }
  return 0;
}

std::pair<uint64_t, uint64_t> ExactQuantiles::open_range(size_t group) const {
  std::pair<uint64_t, uint64_t> r{UINT64_MAX, 0};
  if (group >= groups_.size()) return r;
  for (const Target& t : groups_[group].targets) {
    if (t.done) continue;
    r.first = std::min(r.first, t.lo);
    r.second = std::max(r.second, t.hi);
  }
  return r;
}

uint64_t ExactQuantiles::value(size_t group, size_t qi) const {
  if (group >= groups_.size() || qi >= groups_[group].targets.size()) return 0;
  return groups_[group].targets[qi].value;
}

// Pass 1's buckets narrow each target's range to the log bucket holding its rank; a bucket of
// one value resolves it already.
void ExactQuantiles::aim_from_pass1(const Group& g, double q, Target& t) {
  if (g.n == 0) {
    t.done = true;
    return;
  }
  double r = std::ceil(q * double(g.n));
  t.rank = std::clamp<uint64_t>(uint64_t(r), 1, g.n);
  t.lo = g.min;
  t.hi = g.max;
  t.inside = g.n;
  uint64_t seen = 0;
  for (size_t b = 0; b < g.log_hist.size(); ++b) {
    if (seen + g.log_hist[b] >= t.rank) {
      auto [lo, hi] = log_bucket_range(b);
      t.lo = std::max(lo, g.min);
      t.hi = std::min(hi, g.max);
      t.below = seen;
      t.inside = g.log_hist[b];
      break;
    }
    seen += g.log_hist[b];
  }
  if (t.lo == t.hi) {
    t.done = true;
    t.value = t.lo;
  }
}

// A group that kept its values: each rank's value read off them.
void ExactQuantiles::settle_few(std::vector<uint64_t>& few, double q, Target& t) {
  t.rank = std::clamp<uint64_t>(uint64_t(std::ceil(q * double(few.size()))), 1, few.size());
  t.value = few[t.rank - 1];
  t.lo = t.hi = t.value;
  t.done = true;
}

void ExactQuantiles::start_targets() {
  for (Group& g : groups_) {
    g.targets.assign(qs_.size(), Target{});
    if (g.n && g.log_hist.empty()) {
      std::sort(g.few.begin(), g.few.end());
      for (size_t i = 0; i < qs_.size(); ++i) settle_few(g.few, qs_[i], g.targets[i]);
      g.few = {};
      continue;
    }
    for (size_t i = 0; i < qs_.size(); ++i) aim_from_pass1(g, qs_[i], g.targets[i]);
    g.log_hist = {};
  }
}

bool ExactQuantiles::unresolved() const {
  for (const Group& g : groups_)
    for (const Target& t : g.targets)
      if (!t.done) return true;
  return false;
}

// Before a pass, each open target either collects its range's values (few enough) or
// histograms them.
void ExactQuantiles::prepare_pass() {
  for (Group& g : groups_) {
    for (Target& t : g.targets) {
      if (t.done) continue;
      t.collected.clear();
      t.hist.clear();
      if (t.inside <= kCollectMax)
        t.collected.reserve(t.inside);
      else
        t.hist.assign(kBuckets, 0);
    }
  }
}

// One replayed value, to every open target of its group whose range holds it.
void ExactQuantiles::take(size_t group, uint64_t v) {
  if (group >= groups_.size()) return;
  for (Target& t : groups_[group].targets) {
    if (t.done || v < t.lo || v > t.hi) continue;
    if (!t.hist.empty()) {
      uint64_t width = (t.hi - t.lo) / kBuckets + 1;
      ++t.hist[(v - t.lo) / width];
    } else if (t.collected.size() < t.inside) {
      t.collected.push_back(v);
    }
  }
}

// A collected range: the rank's value is read off the sorted values, and the target is done.
void ExactQuantiles::settle_collected(Target& t) {
  std::sort(t.collected.begin(), t.collected.end());
  uint64_t idx = t.rank - t.below - 1;
  t.value = idx < t.collected.size() ? t.collected[idx] : t.hi;
  t.done = true;
  t.collected = {};
}

// A histogrammed range: narrowed to the bucket holding the rank; done where that is one value.
void ExactQuantiles::narrow_to_bucket(Target& t) {
  uint64_t width = (t.hi - t.lo) / kBuckets + 1;
  uint64_t seen = t.below;
  for (size_t b = 0; b < kBuckets; ++b) {
    if (seen + t.hist[b] >= t.rank) {
      uint64_t new_lo = t.lo + b * width;
      t.hi = std::min(t.hi, new_lo + width - 1);
      t.lo = new_lo;
      t.below = seen;
      t.inside = t.hist[b];
      break;
    }
    seen += t.hist[b];
  }
  if (t.lo == t.hi) {
    t.value = t.lo;
    t.done = true;
  }
  t.hist = {};
}

void ExactQuantiles::finish_pass() {
  for (Group& g : groups_) {
    for (Target& t : g.targets) {
      if (t.done) continue;
      if (t.hist.empty())
        settle_collected(t);
      else
        narrow_to_bucket(t);
    }
  }
}

void ExactQuantiles::resolve(const std::function<void(const Sink&)>& replay) {
  start_targets();
  while (unresolved()) {
    ++passes_;
    prepare_pass();
    replay([&](size_t group, uint64_t v) { take(group, v); });
    finish_pass();
  }
}

}  // namespace ingero::engine

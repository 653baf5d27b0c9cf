#include "engine/exact_quantiles.h"

#include <algorithm>
#include <cmath>

namespace ingero::engine {

void ExactQuantiles::add(size_t group, uint64_t value) {
  if (group >= groups_.size()) groups_.resize(group + 1);
  Group& g = groups_[group];
  ++g.n;
  g.min = std::min(g.min, value);
  g.max = std::max(g.max, value);
}

uint64_t ExactQuantiles::value(size_t group, size_t qi) const {
  if (group >= groups_.size() || qi >= groups_[group].targets.size()) return 0;
  return groups_[group].targets[qi].value;
}

void ExactQuantiles::resolve(const std::function<void(const Sink&)>& replay) {
  // Initialise targets from pass 1.
  for (Group& g : groups_) {
    g.targets.assign(qs_.size(), Target{});
    for (size_t i = 0; i < qs_.size(); ++i) {
      Target& t = g.targets[i];
      if (g.n == 0) {
        t.done = true;
        continue;
      }
      double r = std::ceil(qs_[i] * double(g.n));
      t.rank = std::clamp<uint64_t>(uint64_t(r), 1, g.n);
      t.lo = g.min;
      t.hi = g.max;
      t.inside = g.n;
      if (g.min == g.max) {
        t.done = true;
        t.value = g.min;
      }
    }
  }
  auto unresolved = [&] {
    for (const Group& g : groups_)
      for (const Target& t : g.targets)
        if (!t.done) return true;
    return false;
  };
  while (unresolved()) {
    ++passes_;
    // Prepare this pass: collect small ranges, histogram large ones.
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
    replay([&](size_t group, uint64_t v) {
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
    });
    for (Group& g : groups_) {
      for (Target& t : g.targets) {
        if (t.done) continue;
        if (t.hist.empty()) {
          std::sort(t.collected.begin(), t.collected.end());
          uint64_t idx = t.rank - t.below - 1;
          t.value = idx < t.collected.size() ? t.collected[idx] : t.hi;
          t.done = true;
          t.collected = {};
          continue;
        }
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
    }
  }
}

}  // namespace ingero::engine

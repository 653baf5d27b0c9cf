// Exact nearest-rank quantiles over a stream that can be replayed, in bounded memory.
//
// Definition (docs/engine.md): for n values sorted ascending v[1..n], the q-quantile is
// v[ceil(q * n)] (nearest rank; q = 0.5 of {1,2,3,4} is 2). Always an observed value.
//
// Algorithm: pass 1 counts each group, its min/max, and a log-scale histogram of it (64
// buckets an octave: the bucket holding a target rank spans at most 1/64 of its values).
// Each further pass narrows, for every unresolved (group, q), the value range known to hold
// the target rank: a 4096-bucket histogram over the range, or — once at most kCollectMax
// values remain in it — collecting and sorting them. Durations are integers, so each
// histogram pass shrinks the range 4096x: one further pass for durations under ~524 us (the
// log bucket is then at most 4096 ns wide), or where the rank's bucket holds at most
// kCollectMax values; two otherwise. Memory O(groups x (3,776 + quantiles x 4096)) plus at
// most kCollectMax values per target. No pass holds all values.
//
// A group of at most kFewValues values keeps them instead of the histogram (its 30 KB): its
// quantiles are read off them after pass 1, with no further pass. A trace of thousands of
// short-lived GPU processes has a group per process and op, most of them small (5,000
// processes held 498 MB of histograms).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace ingero::engine {

class ExactQuantiles {
 public:
  static constexpr size_t kBuckets = 4096;
  static constexpr size_t kCollectMax = 65536;
  static constexpr size_t kFewValues = 256;

  explicit ExactQuantiles(std::vector<double> quantiles) : qs_(std::move(quantiles)) {}

  // Pass 1: every value of every group.
  void add(size_t group, uint64_t value);
  // Further passes: `replay(sink)` must call sink(group, value) for every value again.
  using Sink = std::function<void(size_t, uint64_t)>;
  void resolve(const std::function<void(const Sink&)>& replay);

  uint64_t count(size_t group) const { return group < groups_.size() ? groups_[group].n : 0; }
  // During pass 1: the least value of the log-scale bucket that holds rank ceil(q * n) of the
  // values added so far (0 for an empty group). The q-quantile so far is at least this.
  uint64_t floor_of(size_t group, double q) const;
  // During a further pass (inside `replay`): the least and greatest value of `group` it still
  // looks at; lo > hi where none. A replay may leave out the values outside.
  std::pair<uint64_t, uint64_t> open_range(size_t group) const;
  // The resolved quantile `qi` of `group` (0 for an empty group).
  uint64_t value(size_t group, size_t qi) const;
  int passes() const { return passes_; }

 private:
  struct Target {
    uint64_t rank = 0;  // 1-based
    uint64_t lo = 0, hi = 0;
    uint64_t below = 0;   // values < lo
    uint64_t inside = 0;  // values in [lo, hi]
    bool done = false;
    uint64_t value = 0;
    std::vector<uint32_t> hist;
    std::vector<uint64_t> collected;
  };
  struct Group {
    uint64_t n = 0, min = UINT64_MAX, max = 0;
    std::vector<uint64_t> log_hist;  // pass 1, past kFewValues values
    std::vector<uint64_t> few;       // pass 1, up to kFewValues values: the values themselves
    std::vector<Target> targets;
  };
  // resolve(), by step: targets from pass 1, then per further pass prepare, take the replayed
  // values, and narrow or settle each open target.
  static void aim_from_pass1(const Group& g, double q, Target& t);
  static void settle_few(std::vector<uint64_t>& few, double q, Target& t);
  static void settle_collected(Target& t);
  static void narrow_to_bucket(Target& t);
  void start_targets();
  bool unresolved() const;
  void prepare_pass();
  void take(size_t group, uint64_t v);
  void finish_pass();

  std::vector<double> qs_;
  std::vector<Group> groups_;
  int passes_ = 1;
};

}  // namespace ingero::engine

// A mergeable quantile sketch with relative accuracy (DDSketch-style), for per-second call
// summaries that are merged across seconds, threads and hosts.
//
// Values are non-negative integers (nanoseconds). Value 0 has its own bucket; a value v >= 1
// goes into bucket i = ceil(log_gamma(v)), gamma = (1 + a) / (1 - a), a =
// kSketchRelativeError, so bucket i holds the integers in (gamma^(i-1), gamma^i]. The bucket
// bounds are the exact floor(gamma^i), computed at compile time with integer arithmetic, not
// libm: every build on every machine files a value in the same bucket, so sketches written
// anywhere merge bucket for bucket.
//
// Quantiles use the engine's rank definition (engine/exact_quantiles.h): for n values sorted
// ascending v[1..n], the q-quantile is v[ceil(q * n)], rank at least 1. quantile(q) returns
// the representative of the bucket holding that rank, 2 * gamma^i / (gamma + 1) rounded to the
// nearest integer, clamped to [min, max].
//
// Guarantee: with `exact` the exact nearest-rank q-quantile and `est` = quantile(q),
//   |est - exact| <= a * exact + 1/2        for every q in [0, 1]
// q = 0 gives min and q = 1 gives max exactly, and a quantile below 50 ns is exact. The 1/2 is
// the rounding to whole nanoseconds and cannot be avoided: bucket {58, 59} needs an answer
// within 0.58 of 58 and 0.59 of 59, and no integer is. The real-valued representative meets
// |rep - exact| <= a * exact exactly.
//
// count, min and max are exact. Merging is exact: a sketch merged from sketches of the parts
// equals (operator==, serialize()) the sketch of the whole, in any merge order.
//
// Cost: add() is a logarithm and an array increment; memory is one 8-byte counter per bucket
// between the lowest and highest bucket used, at most kMaxIndex + 1 (17.8 KB) whatever the
// input. Not thread-safe: one sketch per writer, merged afterwards.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ingero::engine {

// The relative accuracy `a` above.
inline constexpr double kSketchRelativeError = 0.01;

class QuantileSketch {
 public:
  // The bucket of UINT64_MAX: indexes run 0..kMaxIndex.
  static constexpr int kMaxIndex = 2218;
  // count() never exceeds this (the SQL functions return it as an INTEGER): add() and merge()
  // require that the total stays within it, deserialize() rejects a larger count.
  static constexpr uint64_t kMaxCount = uint64_t(INT64_MAX);
  // serialize()'s format version, its first byte.
  static constexpr uint8_t kFormatVersion = 1;

  // Bucket geometry, for tests and for readers that explain an estimate.
  // The bucket of v >= 1: the smallest i with bucket_upper(i) >= v.
  static int bucket_index(uint64_t v);
  // floor(gamma^i) (UINT64_MAX for kMaxIndex): the largest integer in bucket i. Bucket i is
  // empty when bucket_upper(i - 1) == bucket_upper(i) (small i only: below 50 every bucket
  // holds at most one integer).
  static uint64_t bucket_upper(int i);
  // The estimate bucket i answers with, before clamping to [min, max]:
  // round(2 * gamma^i / (gamma + 1)).
  static uint64_t bucket_value(int i);

  // Adds `n` copies of `v`; n = 0 changes nothing.
  void add(uint64_t v, uint64_t n = 1);
  // Adds every value of `other`.
  void merge(const QuantileSketch& other);

  uint64_t count() const { return count_; }
  // 0 for an empty sketch.
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return count_ ? max_ : 0; }
  bool empty() const { return count_ == 0; }
  // How many values were 0.
  uint64_t zero_count() const { return zero_; }

  // The q-quantile estimate described above; 0 for an empty sketch. q below 0 (or NaN) reads
  // as 0 and q above 1 as 1; the SQL function rejects them before they get here.
  uint64_t quantile(double q) const;

  // A compact, canonical blob (equal sketches give equal bytes): the version byte, then
  // LEB128 varints: count, min, max, zero count, number of non-empty buckets, and for each
  // bucket in ascending order its index minus the previous one (the first: minus 0) as a
  // zigzag varint, then its count. An empty sketch has count, min and max 0.
  std::string serialize() const;
  // The sketch of a blob serialize() wrote; nullopt for anything else: another version,
  // truncation, trailing bytes, overlong varints, a count above kMaxCount, bucket counts of 0
  // or that do not add up to count, indexes not increasing or outside 0..kMaxIndex, min >
  // max, min or max outside the lowest or highest non-empty bucket. Never allocates more than
  // kMaxIndex + 1 counters, whatever the input.
  static std::optional<QuantileSketch> deserialize(std::string_view blob);

  bool operator==(const QuantileSketch&) const = default;

 private:
  uint64_t count_ = 0;
  uint64_t min_ = 0, max_ = 0;  // meaningful only when count_ > 0
  uint64_t zero_ = 0;
  // counts_[k] is bucket offset_ + k. Empty, or its first and last counters are non-zero, so
  // equal sketches have equal members.
  int offset_ = 0;
  std::vector<uint64_t> counts_;
};

}  // namespace ingero::engine

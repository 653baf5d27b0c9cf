// Quantile sketch: its error bound against exact nearest-rank quantiles, exact merging, the
// blob format and its validation. The SQL functions: sketch_sql_test.cc.
#include "engine/quantile_sketch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace ingero::engine {
namespace {

__extension__ typedef unsigned __int128 u128;

const std::vector<double> kQs = {0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1};

// The engine's definition (engine/exact_quantiles.h), on values sorted ascending.
uint64_t nearest_rank(const std::vector<uint64_t>& sorted, double q) {
  double r = std::ceil(q * double(sorted.size()));
  return sorted[std::clamp<uint64_t>(uint64_t(r), 1, sorted.size()) - 1];
}

// The documented bound |est - exact| <= 0.01 * exact + 1/2, in integers.
bool within_bound(uint64_t est, uint64_t exact) {
  u128 d = est > exact ? est - exact : exact - est;
  return u128(100) * d <= u128(exact) + 50;
}

QuantileSketch sketch_of(const std::vector<uint64_t>& values) {
  QuantileSketch s;
  for (uint64_t v : values) s.add(v);
  return s;
}

// Every q in `qs` is within the bound; q = 0 and q = 1 are min and max exactly.
void expect_bound(std::vector<uint64_t> values, const std::vector<double>& qs = kQs) {
  QuantileSketch s = sketch_of(values);
  std::sort(values.begin(), values.end());
  ASSERT_EQ(s.count(), values.size());
  EXPECT_EQ(s.min(), values.front());
  EXPECT_EQ(s.max(), values.back());
  for (double q : qs) {
    uint64_t exact = nearest_rank(values, q), est = s.quantile(q);
    EXPECT_TRUE(within_bound(est, exact)) << "q=" << q << " exact=" << exact << " est=" << est;
  }
  EXPECT_EQ(s.quantile(0), values.front());
  EXPECT_EQ(s.quantile(1), values.back());
}

std::vector<uint64_t> lognormal(size_t n, uint64_t seed, double median_ns = 5000,
                                double sigma = 1.0) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> d(std::log(median_ns), sigma);
  std::vector<uint64_t> v(n);
  for (auto& x : v) x = uint64_t(std::llround(d(rng)));
  return v;
}

TEST(QuantileSketch, BoundHoldsOnLognormal) {
  expect_bound(lognormal(200000, 11));
  // Every q, not just the listed ones.
  std::vector<double> sweep;
  for (int k = 0; k <= 1000; ++k) sweep.push_back(k / 1000.0);
  expect_bound(lognormal(50000, 12), sweep);
}

TEST(QuantileSketch, BoundHoldsOnBimodal) {
  std::mt19937_64 rng(21);
  std::normal_distribution<double> fast(3000, 150), slow(2'000'000, 100'000);
  std::bernoulli_distribution pick_slow(0.3);
  std::vector<uint64_t> v(200000);
  for (auto& x : v) x = uint64_t(std::max(1.0, pick_slow(rng) ? slow(rng) : fast(rng)));
  expect_bound(v);
}

TEST(QuantileSketch, ConstantIsExact) {
  std::vector<uint64_t> v(100000, 410000);
  QuantileSketch s = sketch_of(v);
  for (double q : kQs) EXPECT_EQ(s.quantile(q), 410000u) << "q=" << q;
}

TEST(QuantileSketch, BoundHoldsOnUniformToTerasecond) {
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<uint64_t> d(1, 1'000'000'000'000);
  std::vector<uint64_t> v(200000);
  for (auto& x : v) x = d(rng);
  expect_bound(v);
}

TEST(QuantileSketch, BoundHoldsOnParetoTail) {
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<uint64_t> v(200000);
  // Shape 1.1: the mean barely exists, p99.9 is ~500x the median.
  for (auto& x : v) x = uint64_t(1000.0 / std::pow(1.0 - u(rng), 1.0 / 1.1));
  expect_bound(v);
}

TEST(QuantileSketch, ZerosHaveTheirOwnBucket) {
  std::vector<uint64_t> v = lognormal(70000, 51);
  v.insert(v.end(), 30000, 0);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(52));
  expect_bound(v);
  QuantileSketch s = sketch_of(v);
  EXPECT_EQ(s.zero_count(), 30000u);
  EXPECT_EQ(s.quantile(0.29), 0u);  // rank 29000 of 30000 zeros
  EXPECT_NE(s.quantile(0.31), 0u);  // rank 31000: past them
}

TEST(QuantileSketch, SingleValueIsExact) {
  for (uint64_t v : {uint64_t(0), uint64_t(1), uint64_t(12345), UINT64_MAX}) {
    QuantileSketch s;
    s.add(v);
    EXPECT_EQ(s.count(), 1u);
    for (double q : kQs) EXPECT_EQ(s.quantile(q), v) << "v=" << v << " q=" << q;
  }
  QuantileSketch empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.quantile(0.5), 0u);
  EXPECT_EQ(empty.min(), 0u);
  EXPECT_EQ(empty.max(), 0u);
}

TEST(QuantileSketch, BelowFiftyNanosecondsIsExact) {
  // Every bucket below 50 holds one integer, and the rounding lands on it.
  std::vector<uint64_t> v;
  for (uint64_t x = 0; x < 50; ++x) v.insert(v.end(), x + 1, x);
  QuantileSketch s = sketch_of(v);
  for (int k = 0; k <= 200; ++k) {
    double q = k / 200.0;
    EXPECT_EQ(s.quantile(q), nearest_rank(v, q)) << "q=" << q;
  }
}

TEST(QuantileSketch, BucketBoundsAreFloorOfGammaPowers) {
  // floor((101/99)^i), computed with exact rational arithmetic.
  EXPECT_EQ(QuantileSketch::bucket_upper(0), 1u);
  EXPECT_EQ(QuantileSketch::bucket_upper(34), 1u);
  EXPECT_EQ(QuantileSketch::bucket_upper(35), 2u);
  EXPECT_EQ(QuantileSketch::bucket_upper(100), 7u);
  EXPECT_EQ(QuantileSketch::bucket_upper(204), 59u);
  EXPECT_EQ(QuantileSketch::bucket_upper(1000), 485488766u);
  EXPECT_EQ(QuantileSketch::bucket_upper(1500), 10697167043000u);
  EXPECT_EQ(QuantileSketch::bucket_upper(2000), 235699342041133927u);
  EXPECT_EQ(QuantileSketch::bucket_upper(2217), 18082532459060787290u);
  EXPECT_EQ(QuantileSketch::bucket_upper(QuantileSketch::kMaxIndex), UINT64_MAX);
  // round(0.99 * (101/99)^i), the same way.
  EXPECT_EQ(QuantileSketch::bucket_value(1000), 480633878u);
  EXPECT_EQ(QuantileSketch::bucket_value(2000), 233342348620722589u);
  EXPECT_EQ(QuantileSketch::bucket_index(1), 0);
  EXPECT_EQ(QuantileSketch::bucket_index(2), 35);
  EXPECT_EQ(QuantileSketch::bucket_index(UINT64_MAX), QuantileSketch::kMaxIndex);
}

TEST(QuantileSketch, EveryBucketMeetsTheBound) {
  // The error |value - v| - 0.01 v is convex in v, so checking each bucket's smallest and
  // largest integer proves the bound for every 64-bit value; the index of each bucket's first
  // and last integer proves bucket_index() files every value by the table.
  int buckets = 0;
  uint64_t lower = 1;
  for (int i = 0; i <= QuantileSketch::kMaxIndex; ++i) {
    uint64_t upper = QuantileSketch::bucket_upper(i);
    if (upper < lower) continue;  // no integer in (gamma^(i-1), gamma^i]
    ++buckets;
    uint64_t value = QuantileSketch::bucket_value(i);
    ASSERT_EQ(QuantileSketch::bucket_index(lower), i);
    ASSERT_EQ(QuantileSketch::bucket_index(upper), i);
    ASSERT_TRUE(within_bound(value, lower)) << "bucket " << i;
    ASSERT_TRUE(within_bound(value, upper)) << "bucket " << i;
    if (upper == UINT64_MAX) break;
    lower = upper + 1;
  }
  EXPECT_EQ(buckets, 2219 - 147);  // 147 of the small buckets hold no integer
}

TEST(QuantileSketch, AddWithMultiplicityEqualsRepeatedAdds) {
  QuantileSketch a, b;
  a.add(777, 5);
  a.add(0, 2);
  a.add(9, 0);  // adds nothing
  for (int i = 0; i < 5; ++i) b.add(777);
  b.add(0);
  b.add(0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.count(), 7u);
  EXPECT_EQ(a.max(), 777u);
}

TEST(QuantileSketch, MergeOfPartsEqualsWhole) {
  std::vector<uint64_t> all = lognormal(60000, 61);
  all.insert(all.end(), 500, 0);
  all.push_back(UINT64_MAX);
  all.push_back(1);
  std::shuffle(all.begin(), all.end(), std::mt19937_64(62));
  QuantileSketch whole = sketch_of(all);
  // Uneven parts, an empty one, and one of zeros only.
  std::vector<QuantileSketch> parts(6);
  size_t cuts[] = {0, 10, 20000, 20000, 45000, all.size()};
  for (size_t p = 0; p + 1 < std::size(cuts); ++p)
    for (size_t i = cuts[p]; i < cuts[p + 1]; ++i) parts[p].add(all[i]);
  parts[5].add(0, 3);
  whole.add(0, 3);

  QuantileSketch forward, backward;
  for (const auto& p : parts) forward.merge(p);
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) backward.merge(*it);
  EXPECT_EQ(forward, whole);
  EXPECT_EQ(backward, whole);
  EXPECT_EQ(forward.serialize(), whole.serialize());
  for (double q : kQs) EXPECT_EQ(forward.quantile(q), whole.quantile(q)) << "q=" << q;

  QuantileSketch doubled = whole, twice = whole;
  doubled.merge(doubled);
  twice.merge(whole);
  EXPECT_EQ(doubled, twice);
  EXPECT_EQ(doubled.count(), 2 * whole.count());
}

TEST(QuantileSketch, SerializeRoundTripIsExact) {
  QuantileSketch zeros, wide;
  zeros.add(0, 9);
  wide.add(1);
  wide.add(UINT64_MAX, 4);
  wide.add(0);
  for (const QuantileSketch& s :
       {QuantileSketch(), zeros, wide, sketch_of(lognormal(1000, 71)), sketch_of({5})}) {
    std::string blob = s.serialize();
    auto back = QuantileSketch::deserialize(blob);
    ASSERT_TRUE(back.has_value()) << s.count();
    EXPECT_EQ(*back, s);
    EXPECT_EQ(back->serialize(), blob);
    for (double q : kQs) EXPECT_EQ(back->quantile(q), s.quantile(q));
  }
  // Layout: version, count, min, max, zero count, buckets, (delta, count)...
  QuantileSketch two;
  two.add(2);
  two.add(0, 3);
  EXPECT_EQ(two.serialize(), std::string("\x01\x04\x00\x02\x03\x01\x46\x01", 8));
}

TEST(QuantileSketch, EveryTruncationAndTrailingByteIsRejected) {
  std::string blob = sketch_of(lognormal(1000, 81)).serialize();
  for (size_t n = 0; n < blob.size(); ++n)
    EXPECT_FALSE(QuantileSketch::deserialize(blob.substr(0, n))) << "prefix " << n;
  for (int c = 0; c < 256; ++c)
    EXPECT_FALSE(QuantileSketch::deserialize(blob + char(c))) << "trailing " << c;
}

// Blobs written field by field, to damage one field at a time.
struct Blob {
  std::string b;
  Blob& byte(uint8_t c) {
    b.push_back(char(c));
    return *this;
  }
  Blob& var(uint64_t v) {
    for (; v >= 0x80; v >>= 7) b.push_back(char(uint8_t(v) | 0x80));
    b.push_back(char(v));
    return *this;
  }
  Blob& zig(int64_t v) { return var((uint64_t(v) << 1) ^ uint64_t(v >> 63)); }
  // A header: version 1, count, min, max, zero count, bucket count.
  static Blob head(uint64_t count, uint64_t min, uint64_t max, uint64_t zero, uint64_t used) {
    Blob x;
    x.byte(1).var(count).var(min).var(max).var(zero).var(used);
    return x;
  }
};

std::optional<QuantileSketch> read(const Blob& x) { return QuantileSketch::deserialize(x.b); }

TEST(QuantileSketch, DamagedFieldsAreRejected) {
  // Valid: 1000 and 1010 (bucket 346, 993..1012) and 5000, no zeros.
  const int lo = QuantileSketch::bucket_index(1000), hi = QuantileSketch::bucket_index(5000);
  ASSERT_EQ(lo, 346);
  ASSERT_EQ(QuantileSketch::bucket_index(1010), lo);
  auto body = [&](uint64_t min, uint64_t max) {
    return Blob::head(3, min, max, 0, 2).zig(lo).var(2).zig(hi - lo);
  };
  auto s = read(body(1000, 5000).var(1));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->count(), 3u);
  EXPECT_EQ(s->quantile(0.5), 1002u);  // bucket 346's value
  EXPECT_EQ(s->quantile(1), 5000u);

  EXPECT_FALSE(read(Blob())) << "empty blob";
  for (uint8_t version : {0, 2, 255}) {
    Blob x = body(1000, 5000).var(1);
    x.b[0] = char(version);
    EXPECT_FALSE(read(x)) << "version " << int(version);
  }
  EXPECT_FALSE(read(body(1000, 5000).var(2))) << "counts add up to 4, count says 3";
  EXPECT_FALSE(read(body(1000, 5000))) << "truncated before the last count";
  EXPECT_FALSE(read(Blob::head(3, 1000, 5000, 0, 2).zig(lo).var(3).zig(hi - lo).var(0)))
      << "a bucket count of 0";
  EXPECT_FALSE(read(Blob::head(3, 1000, 1010, 0, 2).zig(lo).var(2).zig(0).var(1)))
      << "index repeated";
  EXPECT_FALSE(read(Blob::head(3, 1000, 5000, 0, 2).zig(hi).var(1).zig(lo - hi).var(2)))
      << "index decreasing";
  EXPECT_FALSE(read(Blob::head(1, 1, 1, 0, 1).zig(-1).var(1))) << "negative first index";
  EXPECT_FALSE(read(Blob::head(1, 1, 1, 0, 1).zig(QuantileSketch::kMaxIndex + 1).var(1)))
      << "index past kMaxIndex";
  EXPECT_FALSE(read(Blob::head(2, 1000, 1000, 0, 2).zig(lo).var(1).zig(INT64_MAX).var(1)))
      << "index delta overflowing";
  EXPECT_FALSE(read(body(5000, 1000).var(1))) << "min > max";
  EXPECT_FALSE(read(body(1020, 5000).var(1))) << "min outside the first bucket";
  EXPECT_FALSE(read(body(1000, 6000).var(1))) << "max outside the last bucket";
  EXPECT_FALSE(read(Blob::head(4, 1000, 5000, 1, 2).zig(lo).var(2).zig(hi - lo).var(1)))
      << "zeros counted but min is not 0";
  EXPECT_FALSE(read(body(0, 5000).var(1))) << "min 0 without zeros";
  EXPECT_FALSE(read(Blob::head(2, 0, 5, 2, 0))) << "max 5 without buckets";
  EXPECT_TRUE(read(Blob::head(0, 0, 0, 0, 0))) << "the empty sketch";
  EXPECT_FALSE(read(Blob::head(0, 0, 0, 0, 0).byte(0))) << "empty sketch with a trailing byte";
  EXPECT_FALSE(read(Blob::head(0, 7, 7, 0, 0))) << "empty sketch with a min";
  const uint64_t most = QuantileSketch::kMaxCount;
  EXPECT_TRUE(read(Blob::head(most, 0, 0, most, 0))) << "count at kMaxCount";
  EXPECT_FALSE(read(Blob::head(most + 1, 0, 0, most + 1, 0))) << "count above kMaxCount";
  EXPECT_FALSE(read(Blob::head(UINT64_MAX, 0, 0, UINT64_MAX, 0))) << "count 2^64 - 1";
  EXPECT_FALSE(read(Blob::head(2, 0, 0, 3, 0))) << "zero count above count";
  EXPECT_FALSE(read(Blob::head(3, 1000, 5000, 0, uint64_t(1) << 60).zig(lo).var(2)))
      << "2^60 buckets in a short blob";
  EXPECT_FALSE(read(Blob::head(3, 1000, 5000, 0, 3000).zig(lo).var(2)))
      << "more buckets than there are";
  // Count 3 written as 0x83 0x00: the same number, a second encoding.
  Blob overlong;
  overlong.byte(1)
      .byte(0x83)
      .byte(0)
      .var(1000)
      .var(5000)
      .var(0)
      .var(2)
      .zig(lo)
      .var(2)
      .zig(hi - lo)
      .var(1);
  EXPECT_FALSE(read(overlong)) << "overlong varint";
  Blob eleven;
  eleven.byte(1);
  for (int i = 0; i < 10; ++i) eleven.byte(0xff);
  eleven.byte(0x01);
  EXPECT_FALSE(read(eleven)) << "varint of 11 bytes";
  Blob bit64;
  bit64.byte(1);
  for (int i = 0; i < 9; ++i) bit64.byte(0xff);
  bit64.byte(0x02);
  EXPECT_FALSE(read(bit64)) << "varint of 65 bits";
}

TEST(QuantileSketch, MutatedBlobsAreRejectedOrCanonical) {
  // A flipped bit can still spell a valid sketch (a min moved within its bucket); what is
  // accepted must then be exactly what it says: it serializes back to the same bytes.
  std::string blob = sketch_of(lognormal(1000, 91)).serialize();
  int rejected = 0, accepted = 0;
  for (size_t i = 0; i < blob.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string m = blob;
      m[i] = char(m[i] ^ (1 << bit));
      auto s = QuantileSketch::deserialize(m);
      if (!s) {
        ++rejected;
        continue;
      }
      ++accepted;
      EXPECT_EQ(s->serialize(), m) << "byte " << i << " bit " << bit;
    }
  EXPECT_EQ(rejected + accepted, int(blob.size() * 8));
  for (int bit = 0; bit < 8; ++bit) {
    std::string m = blob;
    m[0] = char(m[0] ^ (1 << bit));
    EXPECT_FALSE(QuantileSketch::deserialize(m)) << "version bit " << bit;
  }
  // Random bytes and random rewrites of a valid blob.
  std::mt19937_64 rng(92);
  for (int n = 0; n < 20000; ++n) {
    std::string m = blob;
    if (n % 2) {
      m.resize(1 + rng() % 64);
      for (char& c : m) c = char(rng());
      m[0] = char(QuantileSketch::kFormatVersion);
    } else {
      for (int k = 0; k < 4; ++k) m[rng() % m.size()] = char(rng());
    }
    if (auto s = QuantileSketch::deserialize(m)) {
      EXPECT_EQ(s->serialize(), m);
    }
  }
}

}  // namespace
}  // namespace ingero::engine

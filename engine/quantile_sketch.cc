#include "engine/quantile_sketch.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "hal/varint.h"

namespace ingero::engine {

namespace {

__extension__ typedef unsigned __int128 u128;

// a = 1 / kAccuracyDen, so gamma = (den + 1) / (den - 1) and the representative
// 2 * gamma^i / (gamma + 1) = gamma^i * (den - 1) / den: all rational, so the tables below are
// exact integer arithmetic.
constexpr uint64_t kAccuracyDen = 100;
static_assert(kSketchRelativeError == 1.0 / double(kAccuracyDen));
constexpr int kBuckets = QuantileSketch::kMaxIndex + 1;

// A non-negative fixed-point number: w[3]:w[2] the integer part, w[1]:w[0] 128 fraction bits.
// Each step of gamma^i truncates less than 2^-128; summed and grown over 2218 steps that stays
// below 2^-58, far inside the gap between gamma^i and the nearest integer.
struct Fixed {
  std::array<uint64_t, 4> w{};

  constexpr void mul(uint64_t k) {
    u128 carry = 0;
    for (uint64_t& limb : w) {
      u128 p = u128(limb) * k + carry;
      limb = uint64_t(p);
      carry = p >> 64;
    }
  }
  constexpr void div(uint64_t d) {
    u128 rem = 0;
    for (int j = 3; j >= 0; --j) {
      u128 cur = (rem << 64) | w[size_t(j)];
      w[size_t(j)] = uint64_t(cur / d);
      rem = cur % d;
    }
  }
  constexpr uint64_t floor_saturated() const { return w[3] ? UINT64_MAX : w[2]; }
  constexpr uint64_t round_saturated() const {
    Fixed r = *this;
    u128 low = u128(r.w[1]) + (u128(1) << 63);
    r.w[1] = uint64_t(low);
    u128 mid = u128(r.w[2]) + (low >> 64);
    r.w[2] = uint64_t(mid);
    r.w[3] += uint64_t(mid >> 64);
    return r.floor_saturated();
  }
};

struct Tables {
  std::array<uint64_t, kBuckets> upper{};  // floor(gamma^i)
  std::array<uint64_t, kBuckets> value{};  // round(gamma^i * (den - 1) / den)
};

constexpr Tables make_tables() {
  Tables t;
  Fixed g;
  g.w[2] = 1;  // gamma^0
  for (int i = 0; i < kBuckets; ++i) {
    t.upper[size_t(i)] = g.floor_saturated();
    Fixed rep = g;
    rep.mul(kAccuracyDen - 1);
    rep.div(kAccuracyDen);
    t.value[size_t(i)] = rep.round_saturated();
    g.mul(kAccuracyDen + 1);
    g.div(kAccuracyDen - 1);
  }
  return t;
}

constexpr Tables kTables = make_tables();
// kMaxIndex is the bucket of UINT64_MAX, and no bucket beyond it is needed.
static_assert(kTables.upper[kBuckets - 1] == UINT64_MAX);
static_assert(kTables.upper[kBuckets - 2] < UINT64_MAX);
static_assert(kTables.upper[35] == 2 && kTables.upper[34] == 1);

// 1 / ln(gamma): only a first guess at the index, which the table then corrects.
constexpr double kInvLogGamma = 49.99833328888678;

// LEB128, as in the header.
using hal::put_varint;
using hal::unzigzag;
using hal::zigzag;

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  size_t left() const { return b_.size() - pos_; }
  bool byte(uint8_t& out) {
    if (pos_ >= b_.size()) return false;
    out = uint8_t(b_[pos_++]);
    return true;
  }
  // hal::get_varint: false for truncation, more than 64 bits, or an overlong encoding.
  bool varint(uint64_t& out) {
    std::string_view rest = b_.substr(pos_);
    bool ok = hal::get_varint(rest, out);
    pos_ = b_.size() - rest.size();
    return ok;
  }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

// log2(v) within ~0.005 (v > 1): the exponent of the double nearest v, and a quadratic in its
// mantissa m in [1, 2). A log() call a duration was a few percent of the tracer's CPU (every
// timed call lands in its second's sketch); bucket_index corrects the guess against the exact
// bounds, so the guess only needs to land near.
double approx_log2(uint64_t v) {
  uint64_t b = std::bit_cast<uint64_t>(double(v));
  double e = double(int((b >> 52) & 0x7ff) - 1023);
  double m = std::bit_cast<double>((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
  return e + (-0.34484843 * m + 2.02466578) * m - 1.67487759;
}

}  // namespace

int QuantileSketch::bucket_index(uint64_t v) {
  if (v <= 1) return 0;
  constexpr double kLn2 = 0.6931471805599453;
  int i = int(std::ceil(approx_log2(v) * (kLn2 * kInvLogGamma)));
  i = std::clamp(i, 0, kMaxIndex);
  while (v > kTables.upper[size_t(i)]) ++i;
  while (i > 0 && v <= kTables.upper[size_t(i - 1)]) --i;
  return i;
}

uint64_t QuantileSketch::bucket_upper(int i) {
  return kTables.upper[size_t(std::clamp(i, 0, kMaxIndex))];
}

uint64_t QuantileSketch::bucket_value(int i) {
  return kTables.value[size_t(std::clamp(i, 0, kMaxIndex))];
}

void QuantileSketch::add(uint64_t v, uint64_t n) {
  if (n == 0) return;
  if (count_ == 0) {
    min_ = max_ = v;
  } else {
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
  }
  count_ += n;
  if (v == 0) {
    zero_ += n;
    return;
  }
  int i = bucket_index(v);
  size_t k = size_t(unsigned(i - offset_));
  if (k < counts_.size()) {
    counts_[k] += n;
    return;
  }
  if (counts_.empty()) {
    offset_ = i;
    counts_.assign(1, n);
  } else if (i < offset_) {
    counts_.insert(counts_.begin(), size_t(offset_ - i), 0);
    offset_ = i;
    counts_[0] = n;
  } else {
    counts_.resize(k + 1, 0);
    counts_[k] = n;
  }
}

void QuantileSketch::merge(const QuantileSketch& other) {
  if (&other == this) {
    QuantileSketch copy = other;
    merge(copy);
    return;
  }
  if (other.count_ == 0) return;
  if (count_ == 0) {
    *this = other;
    return;
  }
  count_ += other.count_;
  zero_ += other.zero_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  if (other.counts_.empty()) return;
  if (counts_.empty()) {
    offset_ = other.offset_;
    counts_ = other.counts_;
    return;
  }
  if (other.offset_ < offset_) {
    counts_.insert(counts_.begin(), size_t(offset_ - other.offset_), 0);
    offset_ = other.offset_;
  }
  size_t from = size_t(other.offset_ - offset_);
  if (from + other.counts_.size() > counts_.size()) counts_.resize(from + other.counts_.size(), 0);
  for (size_t k = 0; k < other.counts_.size(); ++k) counts_[from + k] += other.counts_[k];
}

uint64_t QuantileSketch::quantile(double q) const {
  if (count_ == 0) return 0;
  if (!(q > 0)) return min_;
  if (q >= 1) return max_;
  // The engine's rank, computed the same way (engine/exact_quantiles.cc).
  double r = std::ceil(q * double(count_));
  uint64_t rank = std::clamp<uint64_t>(uint64_t(r), 1, count_);
  if (rank <= zero_) return 0;
  uint64_t seen = zero_;
  for (size_t k = 0; k < counts_.size(); ++k) {
    seen += counts_[k];
    if (seen >= rank) return std::clamp(bucket_value(offset_ + int(k)), min_, max_);
  }
  return max_;  // unreachable: the buckets hold count_ - zero_ values
}

std::string QuantileSketch::serialize() const {
  std::string out;
  out.reserve(16 + 4 * counts_.size());
  out.push_back(char(kFormatVersion));
  put_varint(out, count_);
  put_varint(out, min());
  put_varint(out, max());
  put_varint(out, zero_);
  size_t used = size_t(std::count_if(counts_.begin(), counts_.end(), [](uint64_t c) { return c; }));
  put_varint(out, used);
  int prev = 0;
  for (size_t k = 0; k < counts_.size(); ++k) {
    if (!counts_[k]) continue;
    int index = offset_ + int(k);
    put_varint(out, zigzag(index - prev));
    put_varint(out, counts_[k]);
    prev = index;
  }
  return out;
}

std::optional<QuantileSketch> QuantileSketch::deserialize(std::string_view blob) {
  Reader in(blob);
  uint8_t version;
  uint64_t count, min, max, zero, used;
  if (!in.byte(version) || version != kFormatVersion) return std::nullopt;
  if (!in.varint(count) || !in.varint(min) || !in.varint(max) || !in.varint(zero) ||
      !in.varint(used))
    return std::nullopt;
  if (count > kMaxCount || zero > count || min > max) return std::nullopt;
  // Each bucket takes at least two bytes.
  if (used > uint64_t(kBuckets) || used > in.left() / 2) return std::nullopt;
  QuantileSketch s;
  if (count == 0) {
    if (min || max || zero || used || in.left()) return std::nullopt;
    return s;
  }
  // A zero bucket exactly when the smallest value is 0; buckets exactly when the largest is not.
  if ((zero > 0) != (min == 0) || (used > 0) != (max > 0)) return std::nullopt;
  s.count_ = count;
  s.min_ = min;
  s.max_ = max;
  s.zero_ = zero;
  uint64_t total = zero;
  int64_t prev = 0;
  for (uint64_t b = 0; b < used; ++b) {
    uint64_t z, n;
    if (!in.varint(z) || !in.varint(n)) return std::nullopt;
    int64_t delta = unzigzag(z);
    if (delta < (b == 0 ? 0 : 1) || delta > kMaxIndex - prev) return std::nullopt;
    int64_t index = prev + delta;
    if (n == 0 || n > count - total) return std::nullopt;
    total += n;
    if (b == 0) s.offset_ = int(index);
    // Bounded: indexes increase within 0..kMaxIndex, so at most kBuckets counters.
    s.counts_.resize(size_t(index - s.offset_) + 1, 0);
    s.counts_.back() = n;
    prev = index;
  }
  if (total != count || in.left()) return std::nullopt;
  if (used > 0) {
    if (bucket_index(max) != int(prev)) return std::nullopt;
    if (zero == 0 && bucket_index(min) != s.offset_) return std::nullopt;
  }
  return s;
}

}  // namespace ingero::engine

#include "serve/report/call_pass.h"

#include <array>
#include <bit>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "engine/call_run.h"

namespace ingero::serve::report {

size_t latency_bin(uint64_t ns) {
  if (ns < 8) return size_t(ns);
  unsigned e = 63u - unsigned(std::countl_zero(ns));  // ns in [2^e, 2^(e+1))
  return size_t(4 * e + ((ns >> (e - 2)) & 3) - 4);
}

uint64_t bin_lower_edge(size_t bin) {
  if (bin < 8) return bin;
  if (bin >= kLatencyBins) return UINT64_MAX;
  size_t e = (bin + 4) / 4, q = (bin + 4) % 4;
  return uint64_t(4 + q) << (e - 2);
}

int64_t bucket_width_ns(int64_t span_ns, size_t max_buckets) {
  static constexpr int64_t kSteps[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600};
  if (max_buckets == 0) max_buckets = 1;
  for (int64_t s : kSteps) {
    int64_t w = s * 1'000'000'000LL;
    if (span_ns / w < int64_t(max_buckets)) return w;
  }
  int64_t hours = span_ns / (3600'000'000'000LL * int64_t(max_buckets)) + 1;
  return hours * 3600'000'000'000LL;
}

double hist_quantile(const uint32_t* bins, size_t n_bins, double q) {
  uint64_t n = 0;
  for (size_t i = 0; i < n_bins; ++i) n += bins[i];
  if (n == 0) return -1;
  uint64_t rank = uint64_t(std::ceil(q * double(n)));
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < n_bins; ++i) {
    seen += bins[i];
    if (seen >= rank) {
      if (i < 8) return double(i);
      return (double(bin_lower_edge(i)) + double(bin_lower_edge(i + 1))) / 2;
    }
  }
  return -1;
}

namespace {

// Finds an op's index from its vendor, api and op. The engine's strings live in interned
// storage: the last op's addresses answer most calls without hashing.
class OpIndex {
 public:
  explicit OpIndex(const std::vector<PassOp>& ops) {
    for (size_t i = 0; i < ops.size(); ++i)
      index_.emplace(key(ops[i].vendor, ops[i].api, ops[i].op), i);
  }
  // SIZE_MAX when unknown.
  size_t find(std::string_view vendor, std::string_view api, std::string_view op) {
    if (vendor.data() == last_[0] && api.data() == last_[1] && op.data() == last_[2])
      return last_index_;
    auto it = index_.find(key(vendor, api, op));
    last_index_ = it == index_.end() ? SIZE_MAX : it->second;
    last_ = {vendor.data(), api.data(), op.data()};
    return last_index_;
  }

 private:
  static std::string key(std::string_view v, std::string_view a, std::string_view o) {
    std::string k;
    k.reserve(v.size() + a.size() + o.size() + 3);
    k.append(v).append(1, '\x1f').append(a).append(1, '\x1f').append(o).append(1, '\x1f');
    return k;
  }
  std::unordered_map<std::string, size_t> index_;
  std::array<const char*, 3> last_{};
  size_t last_index_ = SIZE_MAX;
};

class Pass {
 public:
  Pass(const CallPassInput& in, CallPassResult& out) : in_(in), out_(out), index_(in.ops) {}

  void call(const hal::Event& e) {
    size_t i = index_.find(e.vendor, e.api, e.op);
    if (i == SIZE_MAX) {
      ++out_.other_calls;
      return;
    }
    size_t bin = latency_bin(e.dur_ns);
    OpAccum& a = out_.ops[i];
    size_t b = bucket(int64_t(e.ts_ns));
    ++a.calls;
    ++a.hist[bin];
    ++a.buckets[b];
    if (!a.bucket_hist.empty()) ++a.bucket_hist[b * kLatencyBins + bin];
    const PassOp& op = in_.ops[i];
    if (op.count >= 2 && e.timed && e.dur_ns >= op.p95) {
      SlowAgg& g = out_.slow[{e.stack_id, i}];
      ++g.calls;
      g.sum_ns += e.dur_ns;
      ++out_.slow_calls;
    }
  }

  // Launches folded into runs by tiered retention (store/tiers.h): counted in their op's rate
  // bucket (a run lasts milliseconds: the bucket of its start) and histogram at the durations
  // its calls read back with (engine/call_run.h). Folded calls were below their op's p95 when
  // folded: none is a slow call.
  void run(const engine::CallRun& r) {
    size_t i = index_.find(r.vendor, r.api, r.op);
    if (i == SIZE_MAX) {
      out_.other_calls += r.calls;
      return;
    }
    OpAccum& a = out_.ops[i];
    size_t b = bucket(r.ts_ns);
    a.calls += r.calls;
    a.buckets[b] += r.calls;
    // Equal durations in a row (the middle of a run) go into their bin together.
    uint64_t last = UINT64_MAX, same = 0;
    auto flush = [&] {
      if (!same) return;
      size_t bin = latency_bin(last);
      a.hist[bin] += same;
      if (!a.bucket_hist.empty()) a.bucket_hist[b * kLatencyBins + bin] += uint32_t(same);
    };
    r.for_each_span([&](uint64_t, int64_t, uint64_t dur) {
      if (dur != last) {
        flush();
        last = dur;
        same = 0;
      }
      ++same;
    });
    flush();
  }

 private:
  size_t bucket(int64_t ts) const {
    int64_t rel = ts - out_.t0;
    return rel <= 0 ? 0 : std::min(out_.buckets - 1, size_t(rel / out_.bucket_ns));
  }

  const CallPassInput& in_;
  CallPassResult& out_;
  OpIndex index_;
};

}  // namespace

CallPassResult run_call_pass(engine::TraceSource& source, const CallPassInput& in) {
  CallPassResult out;
  out.t0 = in.first_ns;
  out.bucket_ns = bucket_width_ns(std::max<int64_t>(0, in.last_ns - in.first_ns), in.max_buckets);
  // No op in the window, so no call: no bucket (one at time 0 was a rate at 1970, -1.8e9 s from
  // the window's start in report --json).
  out.buckets = in.ops.empty()             ? 0
                : in.last_ns > in.first_ns ? size_t((in.last_ns - in.first_ns) / out.bucket_ns) + 1
                                           : 1;
  out.ops.resize(in.ops.size());
  for (size_t i = 0; i < in.ops.size(); ++i) {
    out.ops[i].buckets.assign(out.buckets, 0);
    if (in.ops[i].rated) out.ops[i].bucket_hist.assign(out.buckets * kLatencyBins, 0);
  }
  Pass pass(in, out);
  for (const auto& w : in.windows)
    source.call_runs(
        w, [&](const hal::Event& e) { pass.call(e); },
        [&](const engine::CallRun& r) { pass.run(r); });
  return out;
}

}  // namespace ingero::serve::report

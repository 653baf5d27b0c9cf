#include "serve/report/call_pass.h"

#include <bit>
#include <cmath>
#include <unordered_map>

#include "serve/report/report_sql.h"

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

// Finds an op's index from the three text columns without allocating per row.
class OpIndex {
 public:
  explicit OpIndex(const std::vector<PassOp>& ops) {
    for (size_t i = 0; i < ops.size(); ++i)
      index_.emplace(key(ops[i].vendor, ops[i].api, ops[i].op), i);
  }
  // SIZE_MAX when unknown.
  size_t find(const unsigned char* vendor, const unsigned char* api, const unsigned char* op) {
    buf_.clear();
    append(vendor);
    append(api);
    append(op);
    auto it = index_.find(buf_);
    return it == index_.end() ? SIZE_MAX : it->second;
  }

 private:
  static std::string key(const std::string& v, const std::string& a, const std::string& o) {
    return v + '\x1f' + a + '\x1f' + o + '\x1f';
  }
  void append(const unsigned char* s) {
    if (s) buf_ += reinterpret_cast<const char*>(s);
    buf_ += '\x1f';
  }
  std::unordered_map<std::string, size_t> index_;
  std::string buf_;
};

// Launches folded into runs by tiered retention (store/tiers.h): counted in their op's rate
// bucket (a run lasts milliseconds: the bucket of its start) and histogram, the run's minimum
// and maximum in their bins and the rest at the run's mean. Folded calls were below their op's
// p95 when folded: none is a slow call.
Status add_folded_calls(store::Db& db, const CallPassInput& in, OpIndex& index,
                        CallPassResult& out) {
  if (!db.table_exists("call_runs")) return {};
  const std::string what = "aggregating folded calls";
  auto st = db.prepare(
      "SELECT s.vendor, s.api, o.name, r.timestamp, r.calls, r.sum_ns, r.min_ns, r.max_ns "
      "FROM call_runs r JOIN sources s ON s.id = r.source "
      "JOIN ops o ON o.source_id = r.source AND o.op_id = r.op" +
      window_where(in.window, "r.timestamp"));
  if (!st) return make_error(what + ": " + st.error().message);
  sqlite3_stmt* s = st->get();
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    uint64_t n = uint64_t(std::max<int64_t>(0, sqlite3_column_int64(s, 4)));
    size_t i =
        index.find(sqlite3_column_text(s, 0), sqlite3_column_text(s, 1), sqlite3_column_text(s, 2));
    if (i == SIZE_MAX) {
      out.other_calls += n;
      continue;
    }
    if (n == 0) continue;
    uint64_t sum = uint64_t(std::max<int64_t>(0, sqlite3_column_int64(s, 5)));
    uint64_t mn = uint64_t(std::max<int64_t>(0, sqlite3_column_int64(s, 6)));
    uint64_t mx = uint64_t(std::max<int64_t>(0, sqlite3_column_int64(s, 7)));
    OpAccum& a = out.ops[i];
    int64_t rel = sqlite3_column_int64(s, 3) - out.t0;
    size_t b = rel <= 0 ? 0 : std::min(out.buckets - 1, size_t(rel / out.bucket_ns));
    auto add = [&](uint64_t dur, uint64_t count) {
      if (!count) return;
      size_t bin = latency_bin(dur);
      a.hist[bin] += count;
      if (!a.bucket_hist.empty()) a.bucket_hist[b * kLatencyBins + bin] += uint32_t(count);
    };
    if (n == 1) {
      add(sum, 1);
    } else {
      add(mn, 1);
      add(mx, 1);
      uint64_t rest = sum >= mn + mx ? sum - mn - mx : 0;
      if (n > 2) add(rest / (n - 2), n - 2);
    }
    a.calls += n;
    a.buckets[b] += n;
  }
  if (rc != SQLITE_DONE) return make_error(what + ": " + db.last_error("step").message);
  return {};
}

}  // namespace

Result<CallPassResult> run_call_pass(store::Db& db, const CallPassInput& in) {
  CallPassResult out;
  out.t0 = in.first_ns;
  out.bucket_ns = bucket_width_ns(std::max<int64_t>(0, in.last_ns - in.first_ns), in.max_buckets);
  out.buckets =
      in.last_ns > in.first_ns ? size_t((in.last_ns - in.first_ns) / out.bucket_ns) + 1 : 1;
  out.ops.resize(in.ops.size());
  for (size_t i = 0; i < in.ops.size(); ++i) {
    out.ops[i].buckets.assign(out.buckets, 0);
    if (in.ops[i].rated) out.ops[i].bucket_hist.assign(out.buckets * kLatencyBins, 0);
  }
  OpIndex index(in.ops);
  const std::string what = "aggregating calls";
  auto st = db.prepare("SELECT vendor, api, op, ts_ns, dur_ns, coalesce(stack_hash, 0) FROM calls" +
                       window_where(in.window, "ts_ns"));
  if (!st) return make_error(what + ": " + st.error().message);
  sqlite3_stmt* s = st->get();
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    size_t i =
        index.find(sqlite3_column_text(s, 0), sqlite3_column_text(s, 1), sqlite3_column_text(s, 2));
    if (i == SIZE_MAX) {
      ++out.other_calls;
      continue;
    }
    int64_t ts = sqlite3_column_int64(s, 3);
    uint64_t dur = uint64_t(std::max<int64_t>(0, sqlite3_column_int64(s, 4)));
    size_t bin = latency_bin(dur);
    OpAccum& a = out.ops[i];
    ++a.calls;
    ++a.hist[bin];
    int64_t rel = ts - out.t0;
    size_t b = rel <= 0 ? 0 : std::min(out.buckets - 1, size_t(rel / out.bucket_ns));
    ++a.buckets[b];
    if (!a.bucket_hist.empty()) ++a.bucket_hist[b * kLatencyBins + bin];
    const PassOp& op = in.ops[i];
    if (op.count >= 2 && dur >= op.p95) {
      SlowAgg& g = out.slow[{uint64_t(sqlite3_column_int64(s, 5)), i}];
      ++g.calls;
      g.sum_ns += dur;
      ++out.slow_calls;
    }
  }
  if (rc != SQLITE_DONE) return make_error(what + ": " + db.last_error("step").message);
  if (auto st = add_folded_calls(db, in, index, out); !st) return st.error();
  return out;
}

}  // namespace ingero::serve::report

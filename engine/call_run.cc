#include "engine/call_run.h"

namespace ingero::engine {

uint64_t RunShape::duration(uint64_t k) const {
  const Timed t = timed_shape();
  if (k >= t.calls) return untimed_ns;
  if (t.calls == 1) return t.sum;
  if (k == 0) return t.min;
  if (k == t.calls - 1) return t.max;
  uint64_t rest = t.sum - t.min - t.max, middle = t.calls - 2;
  return rest / middle + (k - 1 < rest % middle ? 1 : 0);
}

uint64_t RunShape::gap(uint64_t k) const {
  if (calls < 2) return 0;
  uint64_t idle = span_ns > sum_ns ? span_ns - sum_ns : 0;
  uint64_t gaps = calls - 1;
  return idle / gaps + (k < idle % gaps ? 1 : 0);
}

int64_t RunShape::last_start() const {
  // Every call but the last with its gap: the total less the last call, and all the idle time.
  uint64_t idle = span_ns > sum_ns ? span_ns - sum_ns : 0;
  return std::min(ts_ns + int64_t(sum_ns - duration(calls - 1) + (calls > 1 ? idle : 0)),
                  ts_ns + int64_t(span_ns));
}

uint64_t RunShape::durations_before(uint64_t k) const {
  const Timed t = timed_shape();
  uint64_t m = std::min(k, t.calls);
  uint64_t sum = (k - m) * untimed_ns;  // calls seen at entry only come after the timed ones
  if (m == 0) return sum;
  if (t.calls == 1) return sum + t.sum;
  sum += t.min;  // call 0; calls 1 .. t.calls - 2 share the rest; the last is the maximum
  if (uint64_t mid = std::min(m, t.calls - 1) - 1) {
    uint64_t rest = t.sum - t.min - t.max, middle = t.calls - 2;
    sum += mid * (rest / middle) + std::min(mid, rest % middle);
  }
  if (m == t.calls) sum += t.max;
  return sum;
}

uint64_t RunShape::gaps_before(uint64_t k) const {
  if (calls < 2) return 0;
  uint64_t idle = span_ns > sum_ns ? span_ns - sum_ns : 0;
  uint64_t gaps = calls - 1;
  return k * (idle / gaps) + std::min(k, idle % gaps);
}

int64_t RunShape::start(uint64_t k) const {
  return std::min(ts_ns + int64_t(durations_before(k) + gaps_before(k)), ts_ns + int64_t(span_ns));
}

uint64_t RunShape::first_from(int64_t t) const {
  uint64_t lo = 0, hi = calls;  // starts never decrease with k
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (start(mid) >= t)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

bool CallRun::kernel_counts_fit() const {
  uint64_t total = 0;
  bool counts = true;
  bool whole = parse_funcs([&](uint64_t, uint64_t n) {
    if (n == 0 || n > calls - total)
      counts = false;
    else
      total += n;
  });
  return whole && counts && total == calls;
}

void CallRun::call(uint64_t k, int64_t ts, hal::Event& e) const {
  // Reset, not a fresh Event: that costs more than the rest of the expansion.
  e.reset();
  e.ts_ns = uint64_t(ts);
  e.dur_ns = duration(k);
  e.pid = pid;
  e.tid = tid;
  e.cgroup_id = cgroup_id;
  e.comm = comm;
  e.vendor = vendor;
  e.api = api;
  e.kind = kind;
  e.op = op;
  e.library = library;
  e.timed = k < timed();
  e.has_ret = e.timed;  // a call seen at entry only has no return, as its row has none
  e.stack_id = stack_id;
  e.stack_of_site = k > 0;  // the run's first stack stands for its site
  e.nested = uint32_t(nested / calls + (k < nested % calls ? 1 : 0));
  if (stream) e.set(hal::Field::kStream, *stream);
  if (device) e.set(hal::Field::kDevice, *device);
  if (func) e.set(hal::Field::kFunc, *func);
}

}  // namespace ingero::engine

// The step model, part 1: the cadence, the steps and the warm-up phase.
#include "engine/steps.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/chain.h"
#include "engine/steps_internal.h"
#include "engine/thresholds_steps.h"
#include "hal/memory.h"

namespace ingero::engine {

const char* cadence_name(Cadence c) {
  switch (c) {
    case Cadence::kSync:
      return "sync";
    case Cadence::kBursts:
      return "bursts";
    case Cadence::kWindows:
      return "windows";
    case Cadence::kNone:
      break;
  }
  return "none";
}

namespace steps_detail {

uint64_t quantile(std::vector<uint64_t> v, double q) {
  if (v.empty()) return 0;
  size_t rank = size_t(std::max(1.0, std::ceil(q * double(v.size()))));
  std::nth_element(v.begin(), v.begin() + long(rank - 1), v.end());
  return v[rank - 1];
}

}  // namespace steps_detail

using namespace steps_detail;

namespace {

// Consecutive waits of one thread from one site are one round trip (a D2H copy and its sync).
std::vector<RoundTrip> round_trips(const Proc& p, Sites& sites) {
  std::vector<RoundTrip> out;
  std::map<uint32_t, size_t> open;  // tid -> its round trip, while its last call was a wait
  for (const Call& c : p.calls) {
    if (c.cat != kWait) {
      open.erase(c.tid);
      continue;
    }
    uint32_t site = sites.of(c.stack, p.ops[c.op].op);
    uint64_t d = uint64_t(c.end - c.start);
    if (auto it = open.find(c.tid); it != open.end() && out[it->second].site == site) {
      RoundTrip& r = out[it->second];
      r.end = std::max(r.end, c.end);
      r.d2h = r.d2h || c.d2h;
      r.wait_ns += d;
      continue;
    }
    open[c.tid] = out.size();
    out.push_back({c.start, c.end, c.tid, site, c.stack, c.d2h, d});
  }
  return out;
}

struct Periodicity {
  bool periodic = false;
  int64_t median = 0;
  double count_share = 0, time_share = 0;
  size_t cycle = 1, phase = 0;  // every cycle-th time from the phase-th (cycle_times)
};

// Is this series of times (ascending) a cadence, its intervals within [lo, hi] x their median?
// See thresholds_steps.h.
Periodicity periodicity(const std::vector<int64_t>& t, double lo = kRegularLo,
                        double hi = kRegularHi, double count_share = kRegularCountShare) {
  Periodicity r;
  if (t.size() < kMinCadenceIntervals + 1) return r;
  std::vector<uint64_t> d;
  for (size_t i = 1; i < t.size(); ++i) d.push_back(uint64_t(t[i] - t[i - 1]));
  r.median = int64_t(quantile(d, 0.5));
  if (r.median <= 0) return r;
  uint64_t regular = 0, regular_ns = 0, total = 0;
  for (uint64_t x : d) {
    total += x;
    if (double(x) >= lo * double(r.median) && double(x) <= hi * double(r.median)) {
      ++regular;
      regular_ns += x;
    }
  }
  r.count_share = double(regular) / double(d.size());
  r.time_share = total ? double(regular_ns) / double(total) : 0;
  r.periodic = r.count_share >= count_share && r.time_share >= kRegularTimeShare;
  return r;
}

// Every `cycle`-th of `t` from the `phase`-th.
std::vector<int64_t> cycle_times(const std::vector<int64_t>& t, size_t cycle, size_t phase) {
  std::vector<int64_t> out;
  for (size_t i = phase; i < t.size(); i += cycle) out.push_back(t[i]);
  return out;
}

// A cadence of `t` itself, else of every k-th time for the smallest k (2..kMaxCycle) at which
// one is, at the phase whose intervals are most regular by time (thresholds_steps.h).
Periodicity cycle_periodicity(const std::vector<int64_t>& t) {
  Periodicity r = periodicity(t);
  if (r.periodic) return r;
  for (size_t k = 2; k <= kMaxCycle && t.size() >= k * (kMinCadenceIntervals + 1); ++k) {
    Periodicity best;
    for (size_t phase = 0; phase < k; ++phase) {
      Periodicity x = periodicity(cycle_times(t, k, phase), 1 - kCycleTolerance,
                                  1 + kCycleTolerance, kCycleCountShare);
      if (x.periodic && (!best.periodic || x.time_share > best.time_share)) {
        best = x;
        best.cycle = k;
        best.phase = phase;
      }
    }
    if (best.periodic) return best;
  }
  return r;
}

// Whether the times `a` (a finer periodic site) are an inner loop of `b`: several per b-period,
// and in most periods one interval far longer than the rest (the rest of the step). A sync
// per row repeats inside each step; a sync per step under a log line every 10 steps does not
// (its intervals stay the same size across the coarser period).
bool inner_loop(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() < 2 * b.size() || b.size() < 2) return false;
  std::vector<uint64_t> d;
  for (size_t i = 1; i < a.size(); ++i) d.push_back(uint64_t(a[i] - a[i - 1]));
  double median = double(quantile(d, 0.5));
  size_t periods = 0, with_long = 0, j = 1;
  for (size_t k = 1; k < b.size(); ++k) {
    uint64_t longest = 0, n = 0;
    for (; j < a.size() && a[j] <= b[k]; ++j) {
      if (a[j] <= b[k - 1]) continue;
      longest = std::max(longest, uint64_t(a[j] - a[j - 1]));
      ++n;
    }
    if (n < 2) continue;
    ++periods;
    if (double(longest) > kRegularHi * median) ++with_long;
  }
  return periods && double(with_long) >= kEveryPeriodShare * double(periods);
}

// The round-trip site that marks steps; false when none is periodic. Among periodic sites the
// training loop is the one that runs longest; among those spanning about as long, the finest
// (a sync every 10 steps for logging is periodic too); among the same count, the one that
// reads data back.
bool find_sync_cadence(const Proc& p, const std::vector<RoundTrip>& trips, Sites& sites,
                       StepSeries& s, std::vector<int64_t>& bounds, std::string& why) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<size_t>> groups;  // (tid, site) -> trips
  for (size_t i = 0; i < trips.size(); ++i) groups[{trips[i].tid, trips[i].site}].push_back(i);
  struct Cand {
    std::pair<uint32_t, uint32_t> key;
    size_t n = 0;
    int64_t span = 0;
    bool d2h = false;
    uint64_t wait = 0;
    std::vector<int64_t> t;  // the step ends: every cycle-th round trip's
    size_t cycle = 1, phase = 0;
  };
  std::vector<Cand> periodic;
  size_t considered = 0;
  for (const auto& [key, idx] : groups) {
    if (idx.size() < kMinCadenceIntervals + 1) continue;
    ++considered;
    Cand c{key, idx.size(), 0, false, 0, {}};
    for (size_t i : idx) {
      c.t.push_back(trips[i].end);
      c.d2h = c.d2h || trips[i].d2h;
      c.wait += trips[i].wait_ns;
    }
    c.span = c.t.back() - c.t.front();
    Periodicity pr = cycle_periodicity(c.t);
    if (!pr.periodic) continue;
    if (pr.cycle > 1) {
      c.cycle = pr.cycle;
      c.phase = pr.phase;
      c.t = cycle_times(c.t, c.cycle, c.phase);
      c.n = c.t.size();
    }
    periodic.push_back(std::move(c));
  }
  if (periodic.empty()) {
    why = considered ? std::to_string(considered) + " repeating round-trip site(s), none periodic"
                     : "no call site blocks for the GPU repeatedly";
    return false;
  }
  int64_t longest = 0;
  for (const Cand& c : periodic) longest = std::max(longest, c.span);
  auto inner = [&](const Cand& c) {
    for (const Cand& o : periodic)
      if (&o != &c && o.n < c.n && double(o.span) >= kSameLoopSpan * double(longest) &&
          inner_loop(c.t, o.t))
        return true;
    return false;
  };
  const Cand* best = nullptr;
  for (const Cand& c : periodic) {
    if (double(c.span) < kSameLoopSpan * double(longest) || inner(c)) continue;
    if (!best) {
      best = &c;
      continue;
    }
    double lo = double(std::min(c.n, best->n)), hi = double(std::max(c.n, best->n));
    bool same = hi - lo <= kSameCadenceCount * hi;
    if (same ? std::tie(c.d2h, c.wait) > std::tie(best->d2h, best->wait) : c.n > best->n) best = &c;
  }
  const auto& idx = groups[best->key];
  for (size_t i = best->phase; i < idx.size(); i += best->cycle)
    bounds.push_back(trips[idx[i]].end);
  const RoundTrip& first = trips[idx.front()];
  s.cadence = Cadence::kSync;
  s.anchor_tid = best->key.first;
  s.anchor_stack = first.stack;
  s.anchor_site = sites.key(best->key.second);
  std::string where = sites.where(first.stack);
  std::string op;
  for (const Call& c : p.calls)
    if (c.tid == first.tid && c.start == first.start) op = p.ops[c.op].op;
  const std::string site =
      op + (where.empty() ? "" : " at " + where) + ", thread " + std::to_string(first.tid);
  if (best->cycle == 1)
    s.cadence_note = "one blocking round trip per step (" + site +
                     "): " + std::to_string(idx.size()) + " round trips";
  else
    s.cadence_note = "one step per " + std::to_string(best->cycle) + " blocking round trips (" +
                     site + "): their times repeat in a cycle of " + std::to_string(best->cycle) +
                     ", not one by one (" + std::to_string(idx.size()) + " round trips)";
  s.cycle = uint32_t(best->cycle);
  return true;
}

// Bursts of GPU calls separated by host gaps; false when they are not periodic.
bool find_burst_cadence(const Proc& p, StepSeries& s, std::vector<int64_t>& bounds) {
  if (p.calls.empty() || (p.calls.size() == 1 && p.calls.front().run == kNoRun)) return false;
  // The idle time before each call (after the first), from the furthest end before it.
  // Reserved exactly: grown by doubling, a million calls' gaps peaked at 24 MB (the old and
  // the new storage at once), the largest block of the session's analysis at full rate.
  std::vector<uint64_t> gaps;
  size_t ncalls = 0;
  for (const Call& c : p.calls) ncalls += p.calls_in(c);
  gaps.reserve(ncalls);
  int64_t reach = INT64_MIN;
  each_call(p, [&](const Span& c, size_t) {
    if (reach != INT64_MIN) gaps.push_back(uint64_t(std::max<int64_t>(0, c.start - reach)));
    reach = std::max(reach, c.end());
  });
  // The gaps are given up to their median (not copied: a million calls are 8 MB) and taken
  // again in the second walk.
  double threshold =
      std::max(double(kBurstGapMinNs), kBurstGapFactor * double(quantile(std::move(gaps), 0.5)));
  std::vector<int64_t> starts;
  reach = INT64_MIN;
  each_call(p, [&](const Span& c, size_t) {
    if (reach == INT64_MIN || double(std::max<int64_t>(0, c.start - reach)) >= threshold)
      starts.push_back(c.start);
    reach = std::max(reach, c.end());
  });
  if (!periodicity(starts).periodic) return false;
  bounds = starts;
  s.cadence = Cadence::kBursts;
  s.cadence_note = "no round trip marks the steps; " + std::to_string(starts.size()) +
                   " periodic bursts of GPU calls separated by host gaps of at least " +
                   format_duration(uint64_t(threshold));
  return true;
}

// A step's own time: its duration less the time another task held the CPU of a thread feeding
// the GPU. Warm-up is the process's own slowness (autotuning, lazy init); a neighbour that
// slows the first steps is contention, and the rules must see it.
uint64_t own_time(const Step& st) {
  return st.duration() - std::min(st.duration(), st.preempted_ns);
}

void mark_warmup(StepSeries& s) {
  s.warmup_end_ns = s.steps.empty() ? s.last_call_ns : s.steps.front().start_ns;
  if (s.cadence == Cadence::kWindows || s.steps.empty()) return;
  std::vector<uint64_t> d;
  d.reserve(s.steps.size());
  for (const Step& st : s.steps) d.push_back(own_time(st));
  double median = double(quantile(std::move(d), 0.5));
  for (Step& st : s.steps) {
    if (double(own_time(st)) <= kWarmupStepFactor * median) break;
    st.warmup = true;
  }
  for (const Step& st : s.steps)
    if (!st.warmup) {
      s.warmup_end_ns = st.start_ns;
      break;
    }
}

// The bounds of kFallbackWindowNs windows from `first` to `last`. More than kMaxEmptyWindows
// whole windows in which no call starts are one step with the window before them: at most
// kMaxEmptyWindows + 1 bounds a call, whatever the span.
void fallback_windows(const Proc& p, int64_t first, int64_t last, std::vector<int64_t>& bounds) {
  constexpr int64_t kW = kFallbackWindowNs;
  bounds.push_back(first);
  size_t i = 0;
  int64_t t = first;  // the current window's start
  while (t < last) {
    int64_t end = t > std::numeric_limits<int64_t>::max() - kW ? last : t + kW;
    while (i < p.calls.size() && p.calls[i].start < end) ++i;
    if (end >= last) break;
    int64_t next = i < p.calls.size() ? p.calls[i].start : last;  // the next call's start
    int64_t skip_to = first + (next - first) / kW * kW;           // its window
    t = (skip_to - end) / kW > kMaxEmptyWindows ? skip_to : end;
    bounds.push_back(t);
  }
  bounds.push_back(last);
}

StepSeries model_process(const Proc& p, Sites& sites, const HostContext& host, size_t max_gaps,
                         const std::map<uint32_t, std::vector<CpuSample>>& samples,
                         const DeviceBusy* device) {
  StepSeries s;
  s.pid = p.pid;
  s.calls_dropped = p.dropped;
  s.ops = p.ops;
  std::sort(s.ops.begin(), s.ops.end(), [](const TopLevelOp& x, const TopLevelOp& y) {
    return x.calls != y.calls ? x.calls > y.calls : x.op < y.op;
  });
  if (p.calls.empty()) return s;
  // A process that only waited for fabric events (verbs) has no GPU to be idle, nor steps.
  if (std::none_of(p.calls.begin(), p.calls.end(),
                   [](const Call& c) { return c.kind != hal::EventKind::kRdmaAsyncEvent; })) {
    s.cadence_note = "no GPU calls: fabric events only";
    return s;
  }
  s.first_call_ns = p.calls.front().start;
  for (const Call& c : p.calls) s.last_call_ns = std::max(s.last_call_ns, c.end);
  std::vector<RoundTrip> trips = round_trips(p, sites);
  std::vector<int64_t> bounds;
  std::string why;
  if (!find_sync_cadence(p, trips, sites, s, bounds, why) && !find_burst_cadence(p, s, bounds)) {
    s.cadence = Cadence::kWindows;
    s.cadence_note = "no periodic step: " + why + ", and GPU calls come in no periodic bursts; " +
                     format_duration(uint64_t(kFallbackWindowNs)) + " windows";
    fallback_windows(p, s.first_call_ns, s.last_call_ns, bounds);
  }
  s.steps.reserve(bounds.size());  // ~150 K steps a rank in an hour: grown, each was copied
  for (size_t i = 0; i + 1 < bounds.size(); ++i)
    if (bounds[i + 1] > bounds[i]) {
      Step st;
      st.start_ns = bounds[i];
      st.end_ns = bounds[i + 1];
      s.steps.push_back(st);
    }
  // A second loop at another site, after the one that marks the steps: its calls are in no
  // step (half a trace was left out without a word), counted and said.
  if (s.cadence == Cadence::kSync && !s.steps.empty())
    for (const Call& c : p.calls)
      if (c.start >= s.steps.back().end_ns) s.calls_after_steps += p.calls_in(c);
  FeedingThreads feeding = feeding_threads(p, host);
  count_preempted(p, host, feeding, s);
  mark_warmup(s);
  Tallies tally;
  build_timeline(p, host, samples, feeding, s, tally, max_gaps);
  count_sites(p, sites, trips, s);
  count_launch_sites(p, sites, s);
  measure_steps(s, device);
  summarize(s, sites, tally);
  return s;
}

}  // namespace

size_t default_model_bytes() {
  return hal::memory_share(hal::read_memory_info(), kMinModelledBytes, kMaxModelledBytes);
}

CpuSamples read_cpu_samples(TraceSource& source, const Window& w) {
  CpuSamples out;
  out.present = source.has_cpu_samples();
  if (out.present) source.cpu_samples(w, [&](const CpuSample& cs) { out.all.push_back(cs); });
  return out;
}

StepModel compute_steps(TraceSource& source, const Window& w, const HostContext& host,
                        size_t max_bytes, const std::map<uint32_t, uint64_t>& calls_per_pid,
                        const CpuSamples* ahead, unsigned threads, std::mutex* stacks_lock,
                        const std::function<void()>& collected, const DeviceBusy* device) {
  StepModel m;
  if (!threads) threads = std::max(1u, std::thread::hardware_concurrency());
  std::map<uint32_t, Proc> procs = collect_calls(source, w, max_bytes, calls_per_pid, threads);
  if (collected) collected();
  size_t max_gaps = std::min(kMaxStoredGaps, max_bytes / 4 / sizeof(HostGap));
  std::map<uint32_t, std::map<uint32_t, std::vector<CpuSample>>> samples;  // pid -> tid -> samples
  CpuSamples read_here;
  if (!ahead) ahead = &(read_here = read_cpu_samples(source, w));
  m.cpu_samples = ahead->present;
  for (const CpuSample& cs : ahead->all)
    if (procs.count(cs.pid)) samples[cs.pid][cs.tid].push_back(cs);
  // Each process on its own: on several threads where there are several processes (ranks), the
  // stacks' reads taking turns on the source. The model comes out the same whatever the order.
  std::vector<std::pair<const Proc*, const std::map<uint32_t, std::vector<CpuSample>>*>> work;
  for (auto& [pid, p] : procs) {
    auto& of_pid = samples[pid];
    for (auto& [tid, v] : of_pid)
      std::sort(v.begin(), v.end(),
                [](const CpuSample& x, const CpuSample& y) { return x.ts_ns < y.ts_ns; });
    work.emplace_back(&p, &of_pid);
  }
  m.processes.resize(work.size());
  std::mutex own_lock;
  std::mutex& lock = stacks_lock ? *stacks_lock : own_lock;
  std::atomic<size_t> next{0};
  auto model_some = [&] {
    for (size_t i; (i = next++) < work.size();) {
      Sites sites(source, lock);
      m.processes[i] =
          model_process(*work[i].first, sites, host, max_gaps, *work[i].second, device);
    }
  };
  size_t workers = std::min<size_t>(work.size(), threads);
  std::vector<std::future<void>> others;
  for (size_t t = 1; t < workers; ++t) others.push_back(std::async(std::launch::async, model_some));
  model_some();
  for (auto& f : others) f.get();
  return m;
}

}  // namespace ingero::engine

// The step model, part 1: top-level calls, the cadence, the steps and the warm-up phase.
#include "engine/steps.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/chain.h"
#include "engine/steps_internal.h"
#include "engine/thresholds_steps.h"

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

Cat category(const hal::Event& e) {
  using K = hal::EventKind;
  switch (e.kind) {
    case K::kSync:
      return kWait;
    case K::kMemcpy:
      // The host needs the data: a device-to-host copy waits for the work queued before it.
      return e.get_or(hal::Field::kDirection, 99) == uint64_t(hal::CopyDirection::kDeviceToHost)
                 ? kWait
                 : kEnqueue;
    case K::kLaunch:
    case K::kGraphLaunch:
    case K::kMemset:
    case K::kCollective:
    case K::kP2P:
    case K::kStreamWait:
    case K::kGroup:
      return kEnqueue;
    default:
      return kApi;
  }
}

bool puts_work(hal::EventKind k) {
  using K = hal::EventKind;
  return k == K::kLaunch || k == K::kGraphLaunch || k == K::kMemcpy || k == K::kMemset ||
         k == K::kCollective || k == K::kP2P;
}

uint64_t quantile(std::vector<uint64_t> v, double q) {
  if (v.empty()) return 0;
  size_t rank = size_t(std::max(1.0, std::ceil(q * double(v.size()))));
  std::nth_element(v.begin(), v.begin() + long(rank - 1), v.end());
  return v[rank - 1];
}

}  // namespace steps_detail

using namespace steps_detail;

namespace {

Call make_call(const hal::Event& e, uint32_t op) {
  Call c;
  c.start = int64_t(e.ts_ns);
  c.end = c.start + int64_t(e.dur_ns);
  c.tid = e.tid;
  c.op = op;
  c.kind = e.kind;
  c.cat = category(e);
  uint64_t dir = e.get_or(hal::Field::kDirection, 99);
  c.d2h = e.kind == hal::EventKind::kMemcpy && dir == uint64_t(hal::CopyDirection::kDeviceToHost);
  // A device-to-host copy is the host waiting for data, not work left running: whether it is
  // synchronous is not visible, so it neither keeps its stream busy nor drains it.
  c.work = puts_work(e.kind) && !c.d2h;
  c.h2d = e.kind == hal::EventKind::kMemcpy && dir == uint64_t(hal::CopyDirection::kHostToDevice);
  // Work without a stream argument goes to the default stream.
  c.stream = e.get_or(hal::Field::kStream, c.work ? 0 : kNoStream);
  c.stack = e.stack_id;
  c.bytes = e.get_or(hal::Field::kBytes, 0);
  return c;
}

// Room for n calls. A list of millions is first touched page by page as it fills; asking for
// huge pages where the kernel gives them on request (transparent_hugepage=madvise) takes one
// fault per 2 MiB instead of per 4 KiB: explain at 10 M folded events 7.4-7.7 s -> 6.6-6.8 s
// on the 2-vCPU VM.
void reserve_calls(std::vector<Call>& v, size_t n) {
  v.reserve(n);
  size_t bytes = v.capacity() * sizeof(Call);
  if (bytes < (size_t(4) << 20)) return;
  uintptr_t begin = uintptr_t(v.data()), page = (begin + 4095) & ~uintptr_t(4095);
  (void)madvise(reinterpret_cast<void*>(page), bytes - (page - begin), MADV_HUGEPAGE);
}

// What the model may still hold, in bytes: an item takes 56, a grouped call 16 (and a group 24
// for its list), a folded run's counts 32 more. Once it is spent
// the model stops at that point in time: every later call is dropped, so what is modelled is a
// prefix of the trace.
struct Budget {
  size_t bytes = 0;
  bool full = false;
  bool take(size_t n) {
    if (full || bytes < n) return !(full = true);
    bytes -= n;
    return true;
  }
  bool take_item() { return take(sizeof(Call)); }
  bool take_grouped(size_t n) { return take(n * sizeof(Grouped)); }
};

uint32_t op_of(Proc& p, std::string_view op, std::string_view api, hal::EventKind kind) {
  auto [it, fresh] = p.op_index.try_emplace({op.data(), api.data()}, uint32_t(p.ops.size()));
  if (fresh) {
    TopLevelOp o;
    o.op = std::string(op);
    o.api = std::string(api);
    o.kind = kind;
    p.ops.push_back(std::move(o));
  }
  return it->second;
}

// Whether launch c may join `last`, the thread's previous item, as its next call: the same op
// on the same stream, after it ends, its start and duration within 32 bits of the item's.
bool joins(const Proc& p, const Call& last, const Call& c) {
  if (!group_launches || c.kind != hal::EventKind::kLaunch || !c.work || last.kind != c.kind ||
      last.op != c.op || last.stream != c.stream || last.bytes != c.bytes || last.cat != c.cat ||
      c.start < last.end)
    return false;
  if (last.run != kNoRun && !Proc::grouped(last)) return false;  // a folded run stays as read
  return uint64_t(c.start - last.start) <= UINT32_MAX && uint64_t(c.end - c.start) <= UINT32_MAX &&
         uint64_t(p.first(last).dur) <= UINT32_MAX;
}

// Adds top-level launch c to the thread's previous item: a group of exact calls.
bool join(Proc& p, Call& last, const Call& c, Budget& b) {
  if (last.run == kNoRun) {
    if (p.groups.size() >= kGroupBit || !b.take(2 * sizeof(Grouped) + sizeof(std::vector<Grouped>)))
      return false;
    p.groups.push_back({{0, uint32_t(last.end - last.start), last.stack}});
    last.run = kGroupBit | uint32_t(p.groups.size() - 1);
  } else if (!b.take_grouped(1)) {
    return false;
  }
  p.groups[last.run & ~kGroupBit].push_back(
      {uint32_t(c.start - last.start), uint32_t(c.end - c.start), c.stack});
  last.end = c.end;
  return true;
}

// A caller recorded after its callee (same start, longer): the callee, the last call of the
// thread's item, is part of the caller.
void drop_last(Proc& p, Call& item) {
  TopLevelOp& was = p.ops[item.op];
  --was.calls;
  ++was.nested;
  if (!Proc::grouped(item)) {
    was.sum_ns -= uint64_t(item.end - item.start);
    return;
  }
  auto& g = p.groups[item.run & ~kGroupBit];  // two calls or more: one stays
  was.sum_ns -= g.back().dur;
  g.pop_back();
  item.end = item.start + int64_t(g.back().delta) + int64_t(g.back().dur);
}

// A call nested in time inside another call of the same thread (a runtime call's driver call,
// a collective's internal copies) is part of it: only the outermost call is modelled.
// Consecutive launches of one op on a thread are grouped into one item.
void collect(const hal::Event& e, Proc& p, Budget& b) {
  uint32_t op = op_of(p, e.op, e.api, e.kind);
  Call c = make_call(e, op);
  auto open = p.open.find(e.tid);
  if (open != p.open.end()) {
    Call& outer = p.calls[open->second.last];
    bool folded = outer.run != kNoRun && !Proc::grouped(outer);
    int64_t last = p.last_start(outer);
    if (c.start == last && c.end > outer.end && !folded) {
      // Same start and longer: this is the caller, recorded after its callee.
      drop_last(p, outer);
      if (outer.run == kNoRun) {
        if (b.full || open->second.last + 1 != p.calls.size()) {  // in its place
          outer = c;
          ++p.ops[op].calls;
          p.ops[op].sum_ns += e.dur_ns;
          return;
        }
        // The callee is the newest item: out, so that the caller can join the item before it.
        p.calls.pop_back();
        b.bytes += sizeof(Call);
        open->second = {open->second.prev, SIZE_MAX};
        if (open->second.last == SIZE_MAX) {
          p.open.erase(open);
          open = p.open.end();
        }
      }
    } else if (c.start < outer.end || (c.start == last && c.end <= outer.end)) {
      ++p.ops[op].nested;
      return;
    }
  }
  if (b.full) {
    ++p.dropped;
    return;
  }
  if (open != p.open.end() && joins(p, p.calls[open->second.last], c)) {
    if (!join(p, p.calls[open->second.last], c, b)) {
      ++p.dropped;
      return;
    }
  } else {
    if (!b.take_item()) {
      ++p.dropped;
      return;
    }
    size_t prev = open != p.open.end() ? open->second.last : SIZE_MAX;
    p.open[e.tid] = {p.calls.size(), prev};
    p.calls.push_back(c);
  }
  ++p.ops[op].calls;
  p.ops[op].sum_ns += e.dur_ns;
}

// A folded run: its calls are top-level launches (folding takes no nested call), kept as one
// item. A run of one call is that call.
void collect_run(const CallRun& r, Proc& p, Budget& b, hal::Event& scratch) {
  r.call(0, r.ts_ns, scratch);
  if (r.calls == 1) {
    collect(scratch, p, b);
    return;
  }
  if (!b.take(sizeof(Call) + sizeof(RunCounts))) {
    p.dropped += r.calls;
    return;
  }
  Call c = make_call(scratch, op_of(p, r.op, r.api, r.kind));
  c.end = r.ts_ns + int64_t(r.span_ns);
  c.run = uint32_t(p.runs.size());
  p.runs.push_back({r.calls, r.sum_ns, r.min_ns, r.max_ns});
  auto open = p.open.find(r.tid);
  p.open[r.tid] = {p.calls.size(), open != p.open.end() ? open->second.last : SIZE_MAX};
  p.calls.push_back(c);
  p.ops[c.op].calls += r.calls;
  p.ops[c.op].sum_ns += r.sum_ns;
}

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
};

// Is this series of times (ascending) a cadence? See thresholds_steps.h.
Periodicity periodicity(const std::vector<int64_t>& t) {
  Periodicity r;
  if (t.size() < kMinCadenceIntervals + 1) return r;
  std::vector<uint64_t> d;
  for (size_t i = 1; i < t.size(); ++i) d.push_back(uint64_t(t[i] - t[i - 1]));
  r.median = int64_t(quantile(d, 0.5));
  if (r.median <= 0) return r;
  uint64_t regular = 0, regular_ns = 0, total = 0;
  for (uint64_t x : d) {
    total += x;
    if (double(x) >= kRegularLo * double(r.median) && double(x) <= kRegularHi * double(r.median)) {
      ++regular;
      regular_ns += x;
    }
  }
  r.count_share = double(regular) / double(d.size());
  r.time_share = total ? double(regular_ns) / double(total) : 0;
  r.periodic = r.count_share >= kRegularCountShare && r.time_share >= kRegularTimeShare;
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
    std::vector<int64_t> t;
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
    if (periodicity(c.t).periodic) periodic.push_back(std::move(c));
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
  for (size_t i : idx) bounds.push_back(trips[i].end);
  const RoundTrip& first = trips[idx.front()];
  s.cadence = Cadence::kSync;
  s.anchor_tid = best->key.first;
  s.anchor_stack = first.stack;
  s.anchor_site = sites.key(best->key.second);
  std::string where = sites.where(first.stack);
  std::string op;
  for (const Call& c : p.calls)
    if (c.tid == first.tid && c.start == first.start) op = p.ops[c.op].op;
  s.cadence_note = "one blocking round trip per step (" + op +
                   (where.empty() ? "" : " at " + where) + ", thread " + std::to_string(first.tid) +
                   "): " + std::to_string(idx.size()) + " round trips";
  return true;
}

// Bursts of GPU calls separated by host gaps; false when they are not periodic.
bool find_burst_cadence(const Proc& p, StepSeries& s, std::vector<int64_t>& bounds) {
  if (p.calls.empty() || (p.calls.size() == 1 && p.calls.front().run == kNoRun)) return false;
  // The idle time before each call (after the first), from the furthest end before it.
  std::vector<uint64_t> gaps;
  int64_t reach = INT64_MIN;
  each_call(p, [&](const Span& c, size_t) {
    if (reach != INT64_MIN) gaps.push_back(uint64_t(std::max<int64_t>(0, c.start - reach)));
    reach = std::max(reach, c.end());
  });
  double threshold =
      std::max(double(kBurstGapMinNs), kBurstGapFactor * double(quantile(gaps, 0.5)));
  std::vector<int64_t> starts;
  size_t i = 0;
  each_call(p, [&](const Span& c, size_t) {
    if (i == 0 || double(gaps[i - 1]) >= threshold) starts.push_back(c.start);
    ++i;
  });
  if (!periodicity(starts).periodic) return false;
  bounds = starts;
  s.cadence = Cadence::kBursts;
  s.cadence_note = "no round trip marks the steps; " + std::to_string(starts.size()) +
                   " periodic bursts of GPU calls separated by host gaps of at least " +
                   format_duration(uint64_t(threshold));
  return true;
}

void mark_warmup(StepSeries& s) {
  s.warmup_end_ns = s.steps.empty() ? s.last_call_ns : s.steps.front().start_ns;
  if (s.cadence == Cadence::kWindows || s.steps.empty()) return;
  std::vector<uint64_t> d;
  for (const Step& st : s.steps) d.push_back(st.duration());
  double median = double(quantile(d, 0.5));
  for (Step& st : s.steps) {
    if (double(st.duration()) <= kWarmupStepFactor * median) break;
    st.warmup = true;
  }
  for (const Step& st : s.steps)
    if (!st.warmup) {
      s.warmup_end_ns = st.start_ns;
      break;
    }
}

StepSeries model_process(const Proc& p, Sites& sites, const HostContext& host,
                         const std::map<uint32_t, std::vector<CpuSample>>& samples) {
  StepSeries s;
  s.pid = p.pid;
  s.calls_dropped = p.dropped;
  s.ops = p.ops;
  std::sort(s.ops.begin(), s.ops.end(), [](const TopLevelOp& x, const TopLevelOp& y) {
    return x.calls != y.calls ? x.calls > y.calls : x.op < y.op;
  });
  if (p.calls.empty()) return s;
  s.first_call_ns = p.calls.front().start;
  for (const Call& c : p.calls) s.last_call_ns = std::max(s.last_call_ns, c.end);
  std::vector<RoundTrip> trips = round_trips(p, sites);
  std::vector<int64_t> bounds;
  std::string why;
  if (!find_sync_cadence(p, trips, sites, s, bounds, why) && !find_burst_cadence(p, s, bounds)) {
    s.cadence = Cadence::kWindows;
    s.cadence_note = "no periodic step: " + why + ", and GPU calls come in no periodic bursts; " +
                     format_duration(uint64_t(kFallbackWindowNs)) + " windows";
    for (int64_t t = s.first_call_ns; t < s.last_call_ns; t += kFallbackWindowNs)
      bounds.push_back(t);
    bounds.push_back(s.last_call_ns);
  }
  for (size_t i = 0; i + 1 < bounds.size(); ++i)
    if (bounds[i + 1] > bounds[i]) {
      Step st;
      st.start_ns = bounds[i];
      st.end_ns = bounds[i + 1];
      s.steps.push_back(st);
    }
  mark_warmup(s);
  Tallies tally;
  build_timeline(p, host, samples, s, tally);
  count_sites(p, sites, trips, s);
  summarize(s, sites, tally);
  return s;
}

}  // namespace

StepModel compute_steps(TraceSource& source, const Window& w, const HostContext& host,
                        size_t max_bytes, const std::map<uint32_t, uint64_t>& calls_per_pid) {
  StepModel m;
  std::map<uint32_t, Proc> procs;
  Budget budget{max_bytes};
  for (const auto& [pid, n] : calls_per_pid)
    reserve_calls(procs[pid].calls, size_t(std::min<uint64_t>(n, max_bytes / sizeof(Call))));
  auto on_call = [&](const hal::Event& e) {
    if (hal::is_host_kind(e.kind)) return;
    Proc& p = procs[e.pid];
    p.pid = e.pid;
    collect(e, p, budget);
  };
  hal::Event scratch;
  source.call_runs(w, on_call, [&](const CallRun& r) {
    Proc& p = procs[r.pid];
    p.pid = r.pid;
    collect_run(r, p, budget, scratch);
  });
  std::erase_if(procs, [](const auto& kv) { return kv.second.pid == 0; });  // hinted, no calls
  for (auto& [pid, p] : procs)
    for (auto& g : p.groups) g.shrink_to_fit();
  // Start order, whatever order the source gave rows and runs in.
  for (auto& [pid, p] : procs) {
    auto by_start = [](const Call& x, const Call& y) { return x.start < y.start; };
    if (!std::is_sorted(p.calls.begin(), p.calls.end(), by_start))
      std::stable_sort(p.calls.begin(), p.calls.end(), by_start);
  }
  std::map<uint32_t, std::map<uint32_t, std::vector<CpuSample>>> samples;  // pid -> tid -> samples
  m.cpu_samples = source.has_cpu_samples();
  if (m.cpu_samples)
    source.cpu_samples(w, [&](const CpuSample& cs) {
      if (procs.count(cs.pid)) samples[cs.pid][cs.tid].push_back(cs);
    });
  Sites sites(source);
  for (auto& [pid, p] : procs) {
    for (auto& [tid, v] : samples[pid])
      std::sort(v.begin(), v.end(),
                [](const CpuSample& x, const CpuSample& y) { return x.ts_ns < y.ts_ns; });
    m.processes.push_back(model_process(p, sites, host, samples[pid]));
  }
  return m;
}

}  // namespace ingero::engine

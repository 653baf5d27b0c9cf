#include "engine/op_stats.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "engine/exact_quantiles.h"
#include "engine/op_stats_first_pass.h"
#include "hal/call_failure.h"
#include "hal/memory.h"

namespace ingero::engine {
namespace {

using op_stats_detail::HeldDurations;
using op_stats_detail::TailCall;
using op_stats_detail::TailCatch;

// Where the quantiles are exact, a group's tail floor is the least value of the log bucket of
// its p90 so far, renewed every 2,048 calls of it (0 before: every call kept).
constexpr double kFloorQuantile = 0.90;
constexpr uint64_t kFloorEvery = 2048;

using SketchKey = std::tuple<uint32_t, std::string_view, std::string_view, std::string_view>;
using MergedSketches = std::map<SketchKey, QuantileSketch>;

struct FastKey {
  uint32_t pid;
  const char* api;
  const char* op;
  bool operator==(const FastKey&) const = default;
};
struct FastKeyHash {
  size_t operator()(const FastKey& k) const {
    return std::hash<const void*>()(k.op) * 31 ^ std::hash<const void*>()(k.api) ^ k.pid;
  }
};

struct Grouper {
  std::map<OpKey, size_t> index;
  std::vector<OpStats> stats;
  // TraceSource strings live as long as the source, so their addresses identify them.
  std::unordered_map<FastKey, std::pair<size_t, size_t>, FastKeyHash> fast;
  std::vector<size_t> overall;  // a group's all-processes group
  // A group's last call's process and thread: a loop's calls come a thread at a time, and
  // those already in its sets are not looked up again.
  std::vector<std::pair<uint32_t, uint32_t>> last_seen;
  std::function<void(size_t)> fresh_group;  // each group when first made
  // The last call's key and groups: a loop's calls of one op come in a row (a step's launches),
  // and the table's look-up (a hash and a division) was a tenth of the first pass.
  FastKey last_key{};
  std::pair<size_t, size_t> last_groups;
  bool has_last = false;

  // Group ids of an event: its (pid, op) group and its all-processes group.
  std::pair<size_t, size_t> groups_of(const hal::Event& e) {
    return groups_of(e.pid, e.vendor, e.api, e.op, e.kind);
  }
  std::pair<size_t, size_t> groups_of(uint32_t pid, std::string_view vendor, std::string_view api,
                                      std::string_view op, hal::EventKind kind) {
    FastKey fk{pid, api.data(), op.data()};
    if (has_last && fk == last_key) return last_groups;
    if (auto it = fast.find(fk); it != fast.end()) {
      last_key = fk;
      has_last = true;
      return last_groups = it->second;
    }
    OpKey k{pid, std::string(vendor), std::string(api), std::string(op), kind};
    size_t a = intern(k);
    k.pid = 0;
    size_t b = intern(k);
    overall.resize(stats.size());
    last_seen.resize(stats.size(), {UINT32_MAX, UINT32_MAX});
    overall[a] = b;
    overall[b] = b;
    fast.emplace(fk, std::make_pair(a, b));
    return {a, b};
  }
  size_t intern(const OpKey& k) {
    auto [it, fresh] = index.try_emplace(k, stats.size());
    if (fresh) {
      stats.emplace_back();
      stats.back().key = k;
      if (fresh_group) fresh_group(stats.size() - 1);
    }
    return it->second;
  }
};

// Where calls were folded (tiered retention), their durations are approximate: the quantiles
// come from the per-second sketches of every call instead, within the sketch's relative error.
// The ops are the same (vendor, api, op names); per-process groups take their process's
// sketches, the all-processes group every process's.
MergedSketches merge_sketches(const std::vector<CallSketch>& sketches) {
  MergedSketches merged;
  for (const CallSketch& c : sketches) {
    merged[{c.pid, c.vendor, c.api, c.op}].merge(c.sketch);
    merged[{0, c.vendor, c.api, c.op}].merge(c.sketch);
  }
  return merged;
}

const QuantileSketch* sketch_of(const MergedSketches& merged, const OpKey& k) {
  auto it = merged.find({k.pid, k.vendor, k.api, k.op});
  return it == merged.end() || it->second.empty() ? nullptr : &it->second;
}

void quantiles_from_sketches(std::vector<OpStats>& stats, const MergedSketches& merged) {
  for (OpStats& s : stats) {
    const QuantileSketch* sk = sketch_of(merged, s.key);
    if (!sk) continue;
    // Clamped to the extremes of the calls in the window (the sketches cover whole seconds).
    auto at = [&](double q) { return std::clamp<uint64_t>(sk->quantile(q), s.min_ns, s.max_ns); };
    s.p50 = at(0.50);
    s.p95 = at(0.95);
    s.p99 = at(0.99);
  }
}

// What the first pass fills besides the statistics.
struct FirstPass {
  ExactQuantiles* q = nullptr;  // null: the quantiles come from sketches
  HeldDurations* durations = nullptr;
  TailCatch* tail = nullptr;
  const CallRider* rider = nullptr;
};

// A call's preemptor into `list` (the tasks that took one op's CPU: a handful), with the
// call's preemptions (at least one) and off-CPU time.
void add_preemptor(std::vector<Preemptor>& list, uint32_t pid, std::string_view comm,
                   uint64_t preempts, uint64_t off_ns) {
  auto it = std::find_if(list.begin(), list.end(),
                         [&](const Preemptor& p) { return p.pid == pid && p.comm == comm; });
  if (it == list.end()) {
    list.push_back({pid, std::string(comm), 0, 0, 0});
    it = std::prev(list.end());
  }
  it->count += preempts ? preempts : 1;
  it->off_ns += off_ns;
}

// By off-CPU time, then preemptions, then who (a defined order whatever the calls' order).
void sort_preemptors(std::vector<Preemptor>& list) {
  std::sort(list.begin(), list.end(), [](const Preemptor& a, const Preemptor& b) {
    return std::tie(b.off_ns, b.count, a.pid, a.comm) < std::tie(a.off_ns, a.count, b.pid, b.comm);
  });
}

// First pass: counts, totals, extremes, spans, errors, off-CPU; where the quantiles are exact
// (no sketches), every duration into `q` and `durations`; the calls that may be in a tail;
// the rider, every call and run.
void add_calls(TraceSource& source, const Window& w, Grouper& g, const FirstPass& f) {
  auto first_seen = [](OpStats& s, int64_t first, int64_t last, uint64_t min, uint64_t cgroup) {
    if (s.count == 0) {
      s.min_ns = min;
      s.cgroup_id = cgroup;
      s.first_ts = first;
      s.last_ts = last;
    }
    s.first_ts = std::min(s.first_ts, first);  // a run's calls can come after later calls
    s.last_ts = std::max(s.last_ts, last);
  };
  ExactQuantiles* q = f.q;
  TailCatch& tail = *f.tail;
  auto add = [&](const hal::Event& e) {
    auto [a, b] = g.groups_of(e);
    for (size_t gi : {a, b}) {
      OpStats& s = g.stats[gi];
      first_seen(s, int64_t(e.ts_ns), int64_t(e.ts_ns), e.dur_ns, e.cgroup_id);
      ++s.count;
      s.sum_ns += e.dur_ns;
      s.min_ns = std::min<uint64_t>(s.min_ns, e.dur_ns);
      s.max_ns = std::max<uint64_t>(s.max_ns, e.dur_ns);
      if (e.unfinished)
        ++s.unfinished;
      else if (hal::is_failure(e))
        ++s.errors;  // a query's "not ready" is an answer, not an error
      if (e.get_or(hal::Field::kErrClass, 0) == uint64_t(hal::ErrorClass::kOutOfMemory))
        ++s.oom_errors;
      s.bytes += e.get_or(hal::Field::kBytes, 0);
      s.off_cpu_ns += e.off_cpu_ns;
      s.preempts += e.preempts;
      if (e.preempts) {
        ++s.preempted_calls;
        s.preempted_sum_ns += e.dur_ns;
        s.preempted_off_cpu_ns += e.off_cpu_ns;
      }
      if (e.off_cpu_ns || e.switches || e.preempts) s.per_call_off_cpu = true;
      if (e.preempts)
        if (auto peer = e.get(hal::Field::kPeerPid); peer && *peer)
          add_preemptor(s.all_preemptors, uint32_t(*peer), e.peer_comm_view(), e.preempts,
                        e.off_cpu_ns);
      auto& [pid, tid] = g.last_seen[gi];
      if (e.pid != pid || s.count == 1) s.pids.insert(pid = e.pid);
      if (e.tid != tid || s.count == 1) {
        if (s.tids.size() < 4096) s.tids.insert(e.tid);
        tid = e.tid;
      }
      if (q) {
        if (e.timed) q->add(gi, e.dur_ns);
        if (s.count % kFloorEvery == 0) tail.set_floor(gi, q->floor_of(gi, kFloorQuantile));
      }
    }
    // A call seen at entry only reads back with its op's mean duration (store/
    // untimed_durations.h): it counts in the totals, but it is no latency, so neither the
    // quantiles nor the tails see it (as the sketches of folded calls hold timed calls only).
    // Offered to the tail, a launch loop's untimed launches were all kept: their mean was at
    // the floor the timed ones set.
    if (!e.timed) return;
    if (q) f.durations->add(a, e.dur_ns);
    tail.offer(e, a, b);
  };
  auto call = [&](const hal::Event& e) {
    add(e);
    if (f.rider) f.rider->call(e);
  };
  // A run's calls all succeeded on one thread, on the CPU, with no bytes: its totals suffice,
  // and its calls are looked at only where its slowest may be in a tail.
  auto add_run = [&](const CallRun& r) {
    if (f.rider) f.rider->run(r);
    if (q) {  // exact quantiles need every duration
      r.for_each_call(add);
      return;
    }
    auto [a, b] = g.groups_of(r.pid, r.vendor, r.api, r.op, r.kind);
    for (size_t gi : {a, b}) {
      OpStats& s = g.stats[gi];
      first_seen(s, r.ts_ns, r.last_start(), r.min_ns, r.cgroup_id);
      s.count += r.calls;
      s.sum_ns += r.sum_ns;
      s.min_ns = std::min(s.min_ns, r.min_ns);
      s.max_ns = std::max(s.max_ns, r.max_ns);
      s.pids.insert(r.pid);
      if (s.tids.size() < 4096) s.tids.insert(r.tid);
    }
    // Its calls seen at entry only are no latency (as in `add`): only its timed calls may be
    // in a tail. Offered, a launch loop's estimates were all kept where slow timed launches
    // lifted their mean above the floor (960 K calls kept instead of 2 K at 1 M calls).
    if (r.timed() == 0) return;
    uint64_t slowest = r.timed_max();
    if (tail.wants(a, slowest) || tail.wants(b, slowest)) {
      r.for_each_timed_call([&](const hal::Event& e) { tail.offer(e, a, b); });
    } else {
      tail.miss(a, slowest);
      tail.miss(b, slowest);
    }
  };
  source.call_runs(w, call, add_run);
}

// The exact quantiles' further passes read the durations the first pass held, or else the
// calls again.
void resolve_exact(TraceSource& source, const Window& w, Grouper& g, ExactQuantiles& q,
                   const HeldDurations& held) {
  q.resolve([&](const ExactQuantiles::Sink& sink) {
    if (held.complete()) {
      // Only the values a target still looks at go to the sink.
      std::vector<std::pair<uint64_t, uint64_t>> open(g.stats.size());
      for (size_t i = 0; i < open.size(); ++i) open[i] = q.open_range(i);
      held.for_each([&](size_t a, uint64_t v) {
        if (v >= open[a].first && v <= open[a].second) sink(a, v);
        size_t b = g.overall[a];
        if (v >= open[b].first && v <= open[b].second) sink(b, v);
      });
      return;
    }
    source.calls(w, [&](const hal::Event& e) {
      if (!e.timed) return;  // as in the first pass
      auto [a, b] = g.groups_of(e);
      sink(a, e.dur_ns);
      sink(b, e.dur_ns);
    });
  });
  for (size_t i = 0; i < g.stats.size(); ++i) {
    g.stats[i].p50 = q.value(i, 0);
    g.stats[i].p95 = q.value(i, 1);
    g.stats[i].p99 = q.value(i, 2);
  }
}

// Tail pass: the slowest 5%, who was off-CPU and who took the CPU. It reads the calls the
// first pass kept where they hold every tail, or else the calls again.
void add_tails(TraceSource& source, const Window& w, Grouper& g, const TailCatch& caught) {
  auto tail = [&](const TailCall& c, std::string_view peer_comm) {
    for (size_t gi : {size_t(c.group), g.overall[c.group]}) {
      OpStats& s = g.stats[gi];
      if (c.dur < s.p95 || s.count < 2) continue;
      ++s.tail_count;
      s.tail_dur_ns += c.dur;
      s.tail_off_cpu_ns += c.off_cpu;
      s.tail_preempts += c.preempts;
      if (c.peer_pid)
        add_preemptor(s.preemptors, uint32_t(c.peer_pid), peer_comm, c.preempts, c.off_cpu);
      if (s.tail_windows.size() < kMaxTailWindowsPerOp)
        s.tail_windows.push_back({c.ts, int64_t(uint64_t(c.ts) + c.dur), c.tid});
      else
        ++s.tail_windows_dropped;
    }
  };
  auto event = [&](const hal::Event& e) {
    if (!e.timed) return;  // no latency, no tail (as in the first pass)
    tail(op_stats_detail::tail_call_of(e, g.groups_of(e).first), e.peer_comm_view());
  };
  if (caught.complete(
          g.stats.size(), [&](size_t i) { return g.stats[i].p95; },
          [&](size_t i) { return g.stats[i].count; })) {
    caught.for_each(tail);
  } else {
    source.call_runs(w, event, [&](const CallRun& r) {
      // Only a run whose slowest call reaches an op's p95 has calls in a tail.
      auto [a, b] = g.groups_of(r.pid, r.vendor, r.api, r.op, r.kind);
      const OpStats &x = g.stats[a], &y = g.stats[b];
      uint64_t slowest = r.timed_max();
      if ((slowest >= x.p95 && x.count >= 2) || (slowest >= y.p95 && y.count >= 2))
        r.for_each_timed_call(event);
    });
  }
  for (size_t i = 0; i < g.stats.size(); ++i) {
    OpStats& s = g.stats[i];
    // Runs' calls may come after later calls.
    std::sort(s.tail_windows.begin(), s.tail_windows.end(),
              [](const TailWindow& x, const TailWindow& y) { return x.start < y.start; });
    sort_preemptors(s.preemptors);
    sort_preemptors(s.all_preemptors);
  }
}

// The calls kept, for stack attribution, named by their groups' process and op.
struct Kept {
  explicit Kept(size_t max_calls) : calls(max_calls) {}
  TailCatch calls;
  std::vector<std::pair<uint32_t, std::string>> keys;  // a group's pid and op
};

std::shared_ptr<const KeptCalls> kept_calls(std::shared_ptr<Kept> kept,
                                            const std::vector<OpStats>& groups) {
  for (const OpStats& s : groups) kept->keys.emplace_back(s.key.pid, s.key.op);
  auto out = std::make_shared<KeptCalls>();
  out->for_each = [kept](const std::function<void(const KeptCall&)>& fn) {
    kept->calls.for_each([&](const TailCall& c, std::string_view) {
      const auto& [pid, op] = kept->keys[c.group];
      fn(KeptCall{c.ts, c.dur, c.stack, pid, c.tid, op});
    });
  };
  out->missed = [kept](std::string_view op, uint32_t pid) {
    uint64_t m = 0;
    for (size_t i = 0; i < kept->keys.size(); ++i)
      if (kept->keys[i].second == op && (pid == 0 || kept->keys[i].first == pid))
        m = std::max(m, kept->calls.missed(i));
    return m;
  };
  return out;
}

}  // namespace

FirstPassLimits FirstPassLimits::for_this_machine() {
  size_t share = hal::memory_share(hal::read_memory_info(), size_t(64) << 20, size_t(1) << 30);
  // A duration takes 4 bytes at most; a kept call 32, and 40 more for the few with more to keep.
  return {share / 2 / 4, share / 2 / 40};
}

OpStatsSet compute_op_stats(TraceSource& source, const Window& w,
                            const std::function<void(const std::vector<OpStats>&)>& counted,
                            const CallRider* rider, const FirstPassLimits& limits) {
  Grouper g;
  ExactQuantiles q({0.50, 0.95, 0.99});
  HeldDurations held(limits.durations);
  auto kept = std::make_shared<Kept>(limits.tail_calls);
  TailCatch& caught = kept->calls;
  // Group ids are re-derived per call rather than cached per event (that would hold every
  // event). Where calls were folded, the quantiles come from the sketches, and so a group's
  // tail floor is its sketch's p95 (the p95 is that, clamped to the calls' extremes).
  auto sketches = source.folded_call_sketches(w);
  MergedSketches merged;
  if (sketches) {
    merged = merge_sketches(*sketches);
    g.fresh_group = [&](size_t i) {
      const QuantileSketch* sk = sketch_of(merged, g.stats[i].key);
      caught.set_floor(i, sk ? sk->quantile(0.95) : 0);
    };
  }
  add_calls(source, w, g, {sketches ? nullptr : &q, &held, &caught, rider});
  // Before the quantiles: what waits for the counts (the step model) then runs beside the
  // rest too.
  if (counted) counted(g.stats);
  if (sketches)
    quantiles_from_sketches(g.stats, merged);
  else
    resolve_exact(source, w, g, q, held);
  add_tails(source, w, g, caught);
  OpStatsSet out;
  out.sketch_quantiles = sketches.has_value();
  if (caught.ok()) out.kept = kept_calls(std::move(kept), g.stats);
  for (OpStats& s : g.stats) (s.key.pid ? out.per_process : out.overall).push_back(std::move(s));
  return out;
}

Chain chain_for_op(std::string rule, const OpStats& s) {
  Chain c = new_chain(std::move(rule), s.key.vendor, s.key.api, s.key.op, {s.key.pid}, s.first_ts,
                      s.last_ts);
  c.p50_ns = s.p50;
  c.p99_ns = s.p99;
  c.tail_ratio = s.tail_ratio();
  return c;
}

}  // namespace ingero::engine

#include "engine/op_stats.h"

#include <algorithm>
#include <unordered_map>

#include "engine/exact_quantiles.h"

namespace ingero::engine {
namespace {

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

  // Group ids of an event: its (pid, op) group and its all-processes group.
  std::pair<size_t, size_t> groups_of(const hal::Event& e) {
    return groups_of(e.pid, e.vendor, e.api, e.op, e.kind);
  }
  std::pair<size_t, size_t> groups_of(uint32_t pid, std::string_view vendor, std::string_view api,
                                      std::string_view op, hal::EventKind kind) {
    FastKey fk{pid, api.data(), op.data()};
    if (auto it = fast.find(fk); it != fast.end()) return it->second;
    OpKey k{pid, std::string(vendor), std::string(api), std::string(op), kind};
    size_t a = intern(k);
    k.pid = 0;
    size_t b = intern(k);
    fast.emplace(fk, std::make_pair(a, b));
    return {a, b};
  }
  size_t intern(const OpKey& k) {
    auto [it, fresh] = index.try_emplace(k, stats.size());
    if (fresh) {
      stats.emplace_back();
      stats.back().key = k;
    }
    return it->second;
  }
};

// Where calls were folded (tiered retention), their durations are approximate: the quantiles
// come from the per-second sketches of every call instead, within the sketch's relative error.
// The ops are the same (vendor, api, op names); per-process groups take their process's
// sketches, the all-processes group every process's.
void quantiles_from_sketches(std::vector<OpStats>& stats, const std::vector<CallSketch>& sketches) {
  std::map<std::tuple<uint32_t, std::string_view, std::string_view, std::string_view>,
           QuantileSketch>
      merged;
  for (const CallSketch& c : sketches) {
    merged[{c.pid, c.vendor, c.api, c.op}].merge(c.sketch);
    merged[{0, c.vendor, c.api, c.op}].merge(c.sketch);
  }
  for (OpStats& s : stats) {
    auto it = merged.find({s.key.pid, s.key.vendor, s.key.api, s.key.op});
    if (it == merged.end() || it->second.empty()) continue;
    // Clamped to the extremes of the calls in the window (the sketches cover whole seconds).
    auto at = [&](double q) {
      return std::clamp<uint64_t>(it->second.quantile(q), s.min_ns, s.max_ns);
    };
    s.p50 = at(0.50);
    s.p95 = at(0.95);
    s.p99 = at(0.99);
  }
}

// First pass: counts, totals, extremes, spans, errors, off-CPU; every duration into `q` when
// the quantiles are exact (no sketches).
void add_calls(TraceSource& source, const Window& w, Grouper& g, ExactQuantiles* q) {
  auto first_seen = [](OpStats& s, int64_t first, int64_t last, uint64_t min) {
    if (s.count == 0) {
      s.min_ns = min;
      s.first_ts = first;
      s.last_ts = last;
    }
    s.first_ts = std::min(s.first_ts, first);  // a run's calls can come after later calls
    s.last_ts = std::max(s.last_ts, last);
  };
  auto add = [&](const hal::Event& e) {
    auto [a, b] = g.groups_of(e);
    for (size_t gi : {a, b}) {
      OpStats& s = g.stats[gi];
      first_seen(s, int64_t(e.ts_ns), int64_t(e.ts_ns), e.dur_ns);
      ++s.count;
      s.sum_ns += e.dur_ns;
      s.min_ns = std::min<uint64_t>(s.min_ns, e.dur_ns);
      s.max_ns = std::max<uint64_t>(s.max_ns, e.dur_ns);
      if (e.unfinished)
        ++s.unfinished;
      else if (e.has_ret && e.ret != 0)
        ++s.errors;
      if (e.get_or(hal::Field::kErrClass, 0) == uint64_t(hal::ErrorClass::kOutOfMemory))
        ++s.oom_errors;
      s.bytes += e.get_or(hal::Field::kBytes, 0);
      s.off_cpu_ns += e.off_cpu_ns;
      s.preempts += e.preempts;
      if (e.off_cpu_ns || e.switches || e.preempts) s.per_call_off_cpu = true;
      s.pids.insert(e.pid);
      if (s.tids.size() < 4096) s.tids.insert(e.tid);
      if (q) q->add(gi, e.dur_ns);
    }
  };
  // A run's calls all succeeded on one thread, on the CPU, with no bytes: its totals suffice.
  auto add_run = [&](const CallRun& r) {
    if (q) {  // exact quantiles need every duration
      r.for_each_call(add);
      return;
    }
    auto [a, b] = g.groups_of(r.pid, r.vendor, r.api, r.op, r.kind);
    for (size_t gi : {a, b}) {
      OpStats& s = g.stats[gi];
      first_seen(s, r.ts_ns, r.last_start(), r.min_ns);
      s.count += r.calls;
      s.sum_ns += r.sum_ns;
      s.min_ns = std::min(s.min_ns, r.min_ns);
      s.max_ns = std::max(s.max_ns, r.max_ns);
      s.pids.insert(r.pid);
      if (s.tids.size() < 4096) s.tids.insert(r.tid);
    }
  };
  source.call_runs(w, add, add_run);
}

}  // namespace

OpStatsSet compute_op_stats(TraceSource& source, const Window& w,
                            const std::function<void(const std::vector<OpStats>&)>& counted,
                            const CallRider* rider) {
  Grouper g;
  ExactQuantiles q({0.50, 0.95, 0.99});
  // A per-event cache of group ids would hold all events; re-deriving them per pass keeps
  // memory bounded at the cost of a map lookup. Where calls were folded, the quantiles come
  // from the sketches.
  auto sketches = source.folded_call_sketches(w);
  add_calls(source, w, g, sketches ? nullptr : &q);
  // Before the quantiles' further pass: what waits for the counts (the step model) then runs
  // beside that pass too.
  if (counted) counted(g.stats);
  if (sketches) {
    quantiles_from_sketches(g.stats, *sketches);
  } else {
    q.resolve([&](const ExactQuantiles::Sink& sink) {
      source.calls(w, [&](const hal::Event& e) {
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
  // Tail pass: the slowest 5%, who was off-CPU and who took the CPU.
  std::vector<std::map<std::pair<uint32_t, std::string>, Preemptor>> pre(g.stats.size());
  auto tail = [&](const hal::Event& e) {
    auto [a, b] = g.groups_of(e);
    for (size_t gi : {a, b}) {
      OpStats& s = g.stats[gi];
      if (e.dur_ns < s.p95 || s.count < 2) continue;
      ++s.tail_count;
      s.tail_dur_ns += e.dur_ns;
      s.tail_off_cpu_ns += e.off_cpu_ns;
      s.tail_preempts += e.preempts;
      if (auto pid = e.get(hal::Field::kPeerPid); pid && *pid) {
        auto& p = pre[gi][{uint32_t(*pid), std::string(e.peer_comm_view())}];
        p.pid = uint32_t(*pid);
        p.comm = std::string(e.peer_comm_view());
        p.count += e.preempts ? e.preempts : 1;
        p.off_ns += e.off_cpu_ns;
      }
      if (s.tail_windows.size() < kMaxTailWindowsPerOp)
        s.tail_windows.push_back({int64_t(e.ts_ns), int64_t(e.ts_ns + e.dur_ns), e.tid});
      else
        ++s.tail_windows_dropped;
    }
  };
  auto call = [&](const hal::Event& e) {
    tail(e);
    if (rider) rider->call(e);
  };
  source.call_runs(w, call, [&](const CallRun& r) {
    if (rider) rider->run(r);
    // Only a run whose slowest call reaches an op's p95 has calls in a tail.
    auto [a, b] = g.groups_of(r.pid, r.vendor, r.api, r.op, r.kind);
    const OpStats &x = g.stats[a], &y = g.stats[b];
    if ((r.max_ns >= x.p95 && x.count >= 2) || (r.max_ns >= y.p95 && y.count >= 2))
      r.for_each_call(tail);
  });
  for (OpStats& s : g.stats)  // runs' calls may come after later calls
    std::sort(s.tail_windows.begin(), s.tail_windows.end(),
              [](const TailWindow& x, const TailWindow& y) { return x.start < y.start; });
  OpStatsSet out;
  out.quantile_passes = q.passes() + 1;
  for (size_t i = 0; i < g.stats.size(); ++i) {
    OpStats& s = g.stats[i];
    for (auto& [k, p] : pre[i]) s.preemptors.push_back(p);
    std::sort(s.preemptors.begin(), s.preemptors.end(), [](const Preemptor& a, const Preemptor& b) {
      return a.off_ns != b.off_ns ? a.off_ns > b.off_ns : a.count > b.count;
    });
    (s.key.pid ? out.per_process : out.overall).push_back(std::move(s));
  }
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

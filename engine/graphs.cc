#include "engine/graphs.h"

#include <algorithm>
#include <tuple>

#include "engine/exact_quantiles.h"

namespace ingero::engine {
namespace {

using K = hal::EventKind;

bool is_graph_kind(K k) {
  return k == K::kGraphBeginCapture || k == K::kGraphEndCapture || k == K::kGraphInstantiate ||
         k == K::kGraphLaunch;
}

bool failed(const hal::Event& e) { return e.unfinished || (e.has_ret && e.ret != 0); }

struct Capture {
  int64_t begin = 0, end = 0;
  uint64_t stream = 0;
};

// The first pass over the window's graph calls: each call updates its process's counts and its
// executable graph's use (captures are matched to the instantiations they feed).
class GraphCalls {
 public:
  explicit GraphCalls(GraphReport& rep) : rep_(rep) {}

  void on_call(const hal::Event& e) {
    if (!is_graph_kind(e.kind)) return;
    int64_t ts = int64_t(e.ts_ns);
    if (!first_) first_ = ts;
    last_ = ts;
    GraphProcessUse& p = rep_.processes[e.pid];
    p.pid = e.pid;
    uint64_t stream = e.get_or(hal::Field::kStream, 0);
    switch (e.kind) {
      case K::kGraphBeginCapture:
        return begin_capture(e, p, ts, stream);
      case K::kGraphEndCapture:
        return end_capture(e, ts, stream);
      case K::kGraphInstantiate:
        return instantiate(e, p, ts);
      case K::kGraphLaunch:
        return launch(e, p, ts, stream);
      default:
        return;
    }
  }
  // The launch latencies' second pass (ExactQuantiles), then the executables into the report,
  // in the order of their first use.
  void resolve(TraceSource& source, const Window& window);
  int64_t first() const { return first_; }
  int64_t last() const { return last_; }

 private:
  void begin_capture(const hal::Event& e, GraphProcessUse& p, int64_t ts, uint64_t stream) {
    if (failed(e)) {
      ++p.failed_captures;
      return;
    }
    ++p.captures;
    if (p.first_launch) ++p.captures_after_first_launch;
    open_captures_[{e.pid, stream}] = {ts, 0, stream};
  }

  void end_capture(const hal::Event& e, int64_t ts, uint64_t stream) {
    auto it = open_captures_.find({e.pid, stream});
    if (failed(e)) {
      if (it != open_captures_.end()) open_captures_.erase(it);
      return;
    }
    Capture c = it != open_captures_.end() ? it->second : Capture{ts, 0, stream};
    c.end = ts + int64_t(e.dur_ns);
    if (it != open_captures_.end()) open_captures_.erase(it);
    if (auto g = e.get(hal::Field::kGraph); g && *g) graphs_[{e.pid, *g}] = c;
  }

  void instantiate(const hal::Event& e, GraphProcessUse& p, int64_t ts) {
    auto x = e.get(hal::Field::kGraphExec);
    if (failed(e) || !x || !*x) {
      ++p.failed_instantiations;
      return;
    }
    ++p.instantiations;
    if (p.first_launch) ++p.instantiations_after_first_launch;
    GraphExecUse& u = execs_[{e.pid, *x}];
    u.pid = e.pid;
    u.exec = *x;
    if (u.vendor.empty()) u.vendor = std::string(e.vendor), u.api = std::string(e.api);
    if (!u.instantiated_at) u.instantiated_at = ts;
    ++u.instantiations;
    u.instantiate_ns += e.dur_ns;
    if (auto g = e.get(hal::Field::kGraph); g && *g) {
      u.graph = *g;
      if (auto c = graphs_.find({e.pid, *g}); c != graphs_.end()) {
        u.captured_at = c->second.begin;
        u.capture_ns = c->second.end - c->second.begin;
        u.capture_stream = c->second.stream;
      }
    }
  }

  void launch(const hal::Event& e, GraphProcessUse& p, int64_t ts, uint64_t stream) {
    uint64_t x = e.get_or(hal::Field::kGraphExec, 0);
    if (failed(e)) {
      ++p.failed_launches;
      if (auto it = execs_.find({e.pid, x}); it != execs_.end()) ++it->second.failed_launches;
      return;
    }
    ++p.launches;
    if (!p.first_launch) p.first_launch = ts;
    auto it = execs_.find({e.pid, x});
    if (it == execs_.end()) {  // instantiated before the window
      ++p.launches_unknown_exec;
      it = execs_.emplace(std::make_pair(e.pid, x), GraphExecUse{}).first;
      it->second.pid = e.pid;
      it->second.exec = x;
      it->second.vendor = std::string(e.vendor);
      it->second.api = std::string(e.api);
    }
    GraphExecUse& u = it->second;
    ++u.launches;
    if (!u.first_launch) u.first_launch = ts;
    u.last_launch = ts;
    u.launch_max_ns = std::max<uint64_t>(u.launch_max_ns, e.dur_ns);
    if (u.streams.size() < 8 &&
        std::find(u.streams.begin(), u.streams.end(), stream) == u.streams.end())
      u.streams.push_back(stream);
    auto [g, fresh] = launch_group_.emplace(std::make_pair(e.pid, x), launch_group_.size());
    (void)fresh;
    launch_q_.add(g->second, e.dur_ns);
  }

  GraphReport& rep_;
  std::map<std::pair<uint32_t, uint64_t>, GraphExecUse> execs_;
  std::map<std::pair<uint32_t, uint64_t>, size_t> launch_group_;  // -> quantile group
  ExactQuantiles launch_q_{{0.50, 0.99}};
  std::map<std::pair<uint32_t, uint64_t>, Capture> open_captures_;  // (pid, stream)
  std::map<std::pair<uint32_t, uint64_t>, Capture> graphs_;         // (pid, graph) -> capture
  int64_t first_ = 0, last_ = 0;
};

void GraphCalls::resolve(TraceSource& source, const Window& window) {
  launch_q_.resolve([&](const ExactQuantiles::Sink& sink) {
    auto on_call = [&](const hal::Event& e) {
      if (e.kind != K::kGraphLaunch || failed(e)) return;
      auto g = launch_group_.find({e.pid, e.get_or(hal::Field::kGraphExec, 0)});
      if (g != launch_group_.end()) sink(g->second, e.dur_ns);
    };
    source.call_runs(window, on_call, ignore_runs);
  });
  for (auto& [k, u] : execs_) {
    if (auto g = launch_group_.find(k); g != launch_group_.end()) {
      u.launch_p50_ns = launch_q_.value(g->second, 0);
      u.launch_p99_ns = launch_q_.value(g->second, 1);
    }
    rep_.execs.push_back(std::move(u));
  }
  std::sort(rep_.execs.begin(), rep_.execs.end(), [](const GraphExecUse& a, const GraphExecUse& b) {
    int64_t ta = a.instantiated_at ? a.instantiated_at : a.first_launch;
    int64_t tb = b.instantiated_at ? b.instantiated_at : b.first_launch;
    return std::tie(a.pid, ta, a.exec) < std::tie(b.pid, tb, b.exec);
  });
}

// The third pass: captures, instantiations and launches per time bucket over [first, last]
// (1 s buckets, doubled until at most kMaxGraphBuckets; a sub-second trace in tenths).
void fill_timeline(TraceSource& source, const Window& window, int64_t first, int64_t last,
                   GraphReport& rep) {
  if (!first || last < first) return;
  int64_t span = last - first + 1;
  int64_t bucket = 1'000'000'000;
  while (span / bucket >= int64_t(kMaxGraphBuckets)) bucket *= 2;
  // Sub-second traces: buckets of span/10, at least 1 ms.
  if (span < bucket) bucket = std::max<int64_t>(span / 10, 1'000'000);
  size_t n = size_t((span + bucket - 1) / bucket);
  n = std::min(n, kMaxGraphBuckets);
  rep.bucket_ns = bucket;
  rep.timeline.resize(n);
  for (size_t i = 0; i < n; ++i) rep.timeline[i].start = first + int64_t(i) * bucket;
  auto on_call = [&](const hal::Event& e) {
    if (!is_graph_kind(e.kind) || failed(e)) return;
    size_t i = std::min(size_t((int64_t(e.ts_ns) - first) / bucket), n - 1);
    if (e.kind == K::kGraphBeginCapture) ++rep.timeline[i].captures;
    if (e.kind == K::kGraphInstantiate) ++rep.timeline[i].instantiations;
    if (e.kind == K::kGraphLaunch) ++rep.timeline[i].launches;
  };
  source.call_runs(window, on_call, ignore_runs);
}

}  // namespace

GraphReport compute_graphs(TraceSource& source, const Window& window) {
  GraphReport rep;
  GraphCalls calls(rep);
  source.call_runs(
      window, [&](const hal::Event& e) { calls.on_call(e); }, ignore_runs);
  calls.resolve(source, window);
  fill_timeline(source, window, calls.first(), calls.last(), rep);
  return rep;
}

}  // namespace ingero::engine

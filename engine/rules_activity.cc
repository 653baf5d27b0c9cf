// Rules over the shape of GPU activity in time: launch throughput collapse, repeated
// synchronisation (the hidden .cpu() pattern), and graph lifecycle problems.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "engine/analysis.h"
#include "engine/thresholds.h"

namespace ingero::engine {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

bool is_launch(hal::EventKind k) {
  return k == hal::EventKind::kLaunch || k == hal::EventKind::kGraphLaunch;
}

std::string fmt(const char* f, double a, double b = 0) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), f, a, b);
  return buf;
}

// Host evidence for one process over a time range, for the timeline.
void host_lines(const Analysis& a, uint32_t pid, int64_t from, int64_t to, Chain& c) {
  uint64_t n = 0, off = 0, pre = 0;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> by;  // (pid, comm) -> off ns
  if (auto it = a.host.offcpu.find(pid); it != a.host.offcpu.end()) {
    for (const auto& iv : it->second) {
      if (iv.end < from || iv.start > to) continue;
      ++n;
      off += uint64_t(std::min(iv.end, to) - std::max(iv.start, from));
      if (iv.preempted) {
        ++pre;
        if (uint32_t pid = a.host.by_pid(iv))
          by[{pid, a.host.by_comm(iv)}] += uint64_t(iv.end - iv.start);
      }
    }
  }
  if (n) {
    std::string line = format_count(n) + " context switches (" + format_duration(off) +
                       " off-CPU, " + format_count(pre) + " preempted)";
    if (!by.empty()) {
      auto top = std::max_element(by.begin(), by.end(),
                                  [](auto& x, auto& y) { return x.second < y.second; });
      line += "; mostly by " + a.host.comm_name(top->first.second) + " (pid " +
              std::to_string(top->first.first) + ")";
    }
    c.timeline.push_back({"HOST", "sched_switch", line, off / 1000});
  }
  if (a.host.cpu_max > 0)
    c.timeline.insert(
        c.timeline.begin(),
        {"SYSTEM", "cpu", fmt("CPU %.0f%% peak, %.0f%% avg", a.host.cpu_max, a.host.cpu_avg), 0});
}

// Launches per second per (pid, api), from each process's first launch to its last.
struct LaunchRates {
  struct Series {
    int64_t first = 0;
    std::vector<uint32_t> per_sec;
    std::vector<uint32_t> other_per_sec;  // non-launch calls: is the process still working?
    std::string api, vendor;
  };
  std::map<uint32_t, Series> by_pid;
  Series* last = nullptr;  // the last launch's process's: a process's calls come in a row
  uint32_t last_pid = 0;

  Series& series(uint32_t pid, std::string_view api, std::string_view vendor, int64_t ts) {
    if (last && last_pid == pid) return *last;
    Series& s = by_pid[pid];
    if (s.per_sec.empty()) {
      s.first = ts;
      s.api = std::string(api);
      s.vendor = std::string(vendor);
    }
    last_pid = pid;
    return *(last = &s);
  }
  static void count_launch(Series& s, int64_t ts) {
    size_t sec = size_t((ts - s.first) / kSecond);
    if (sec > 7 * 24 * 3600) return;
    if (s.per_sec.size() <= sec) s.per_sec.resize(sec + 1);
    ++s.per_sec[sec];
  }
  void call(const hal::Event& e) {
    if (!is_launch(e.kind)) {
      auto it = by_pid.find(e.pid);
      if (it == by_pid.end() || it->second.per_sec.empty()) return;
      size_t sec = size_t((int64_t(e.ts_ns) - it->second.first) / kSecond);
      if (sec > 7 * 24 * 3600) return;
      if (it->second.other_per_sec.size() <= sec) it->second.other_per_sec.resize(sec + 1);
      ++it->second.other_per_sec[sec];
      return;
    }
    count_launch(series(e.pid, e.api, e.vendor, int64_t(e.ts_ns)), int64_t(e.ts_ns));
  }
  // Each call of a run in its second, without making it an event; its process looked up once
  // (66 M folded launches at 100 M events).
  void run(const CallRun& r) {
    Series* s = nullptr;
    r.for_each_span([&](uint64_t, int64_t start, uint64_t) {
      if (!s) s = &series(r.pid, r.api, r.vendor, start);
      count_launch(*s, start);
    });
  }
};

void launch_collapse_chains(LaunchRates& rates, const Analysis& a, std::vector<Chain>& out) {
  auto& by_pid = rates.by_pid;
  for (auto& [pid, s] : by_pid) {
    if (s.per_sec.size() < 4) continue;
    // Baseline: the median of active seconds, excluding the (partial) last second.
    std::vector<uint32_t> active;
    for (size_t i = 0; i + 1 < s.per_sec.size(); ++i)
      if (s.per_sec[i]) active.push_back(s.per_sec[i]);
    if (active.size() < 3) continue;
    std::nth_element(active.begin(), active.begin() + active.size() / 2, active.end());
    double baseline = active[active.size() / 2];
    if (baseline < kMinBaselineLaunchRate) continue;
    // The longest run of collapsed seconds that is followed by more launches. A second in which
    // the process made no GPU call at all is idle (an inference server between requests), not
    // a collapse: the run must keep the process busy with other calls or on the scheduler.
    auto busy = [&](size_t sec) {
      return (sec < s.other_per_sec.size() && s.other_per_sec[sec] > 0) || s.per_sec[sec] > 0;
    };
    size_t best_start = 0, best_len = 0;
    for (size_t i = 0; i + 1 < s.per_sec.size();) {
      if (s.per_sec[i] <= kCollapseFraction * baseline && busy(i)) {
        size_t j = i;
        while (j + 1 < s.per_sec.size() && s.per_sec[j] <= kCollapseFraction * baseline && busy(j))
          ++j;
        if (j - i > best_len) {
          best_len = j - i;
          best_start = i;
        }
        i = j + 1;
      } else {
        ++i;
      }
    }
    if (int(best_len) < kMinCollapseSeconds) continue;
    double low = 0;
    for (size_t i = best_start; i < best_start + best_len; ++i) low += s.per_sec[i];
    low /= double(best_len);
    int64_t from = s.first + int64_t(best_start) * kSecond, to = from + int64_t(best_len) * kSecond;
    Chain c = new_chain("launch_collapse", s.vendor, s.api, "launch", {pid}, from, to);
    double drop = 1.0 - low / baseline;
    std::string who = a.process_label(pid);
    c.summary = "Kernel launch rate dropped " + fmt("%.0f%%", drop * 100) + " for " +
                std::to_string(best_len) + " s (" + fmt("%.0f -> %.0f launches/s", baseline, low) +
                ") in " + who;
    host_lines(a, pid, from, to, c);
    // The time its threads were preempted in the collapse, overlaps counted once: a thread
    // asleep on a lock is the other branch's "blocking call", not a lost CPU, and two threads
    // off-CPU at once summed to "12.4s off-CPU during the 2 s collapse".
    uint64_t off = 0, n = 0;
    std::vector<std::pair<int64_t, int64_t>> lost;
    if (auto it = a.host.offcpu.find(pid); it != a.host.offcpu.end())
      for (const auto& iv : it->second)
        if (iv.preempted && iv.end >= from && iv.start <= to) {
          ++n;
          lost.push_back({std::max(iv.start, from), std::min(iv.end, to)});
        }
    std::sort(lost.begin(), lost.end());
    int64_t reach = from;
    for (const auto& [b, e] : lost) {
      if (e <= reach) continue;
      off += uint64_t(e - std::max(b, reach));
      reach = e;
    }
    double off_share = double(off) / double(to - from);
    bool cpu = off_share >= kOffCpuShareMedium || (n && a.host.cpu_max >= kCpuSaturatedPct);
    c.root_cause = cpu ? "The thread feeding the GPU lost the CPU: " + format_duration(off) +
                             " off-CPU during the " + std::to_string(best_len) + " s collapse"
                       : "The process stopped submitting work: no host contention explains it "
                         "(look for a Python-side stall, a lock, or a blocking call)";
    c.explanation = "Median launch rate " + fmt("%.0f/s", baseline) + " fell to " +
                    fmt("%.0f/s", low) + " for " + std::to_string(best_len) +
                    " consecutive seconds while " + who + " kept launching afterwards.";
    c.timeline.push_back(
        {layer_of(s.api), "launch", fmt("%.0f -> %.0f launches/s", baseline, low), 0});
    c.severity = drop >= 0.9 && cpu ? Severity::kHigh : Severity::kMedium;
    c.fixes = cpu ? std::vector<std::string>{"Pin the launching thread to a dedicated core",
                                             "Move CPU-heavy neighbours (tokenizers, data workers) "
                                             "to other cores"}
                  : std::vector<std::string>{
                        "Profile the host thread in the collapse window (py-spy dump, perf)"};
    c.id = c.rule + ":" + std::to_string(pid);
    c.score = drop * double(best_len);
    out.push_back(std::move(c));
  }
}

// A caller is a thread and the call site of its blocking calls (its stack, when the trace has
// stacks); the launches it waits for come from the same thread, any call site.
struct SyncCallers {
  struct Caller {
    uint32_t pid = 0;
    uint64_t syncs = 0, small_d2h = 0, launches = 0;
    uint64_t blocked_ns = 0;
    int64_t first = 0, last = 0;
    std::map<std::string, uint64_t> ops;
    std::string api, vendor;
  };
  std::map<std::pair<uint32_t, uint64_t>, Caller> callers;  // (tid, stack) -> caller
  std::map<uint32_t, uint64_t> launches_by_tid;

  void call(const hal::Event& e) {
    if (is_launch(e.kind)) {
      ++launches_by_tid[e.tid];
      return;
    }
    Caller& c = callers[{e.tid, e.stack_id}];
    if (!c.first) {
      c.first = int64_t(e.ts_ns);
      c.pid = e.pid;
    }
    c.last = int64_t(e.ts_ns + e.dur_ns);
    bool d2h = e.kind == hal::EventKind::kMemcpy &&
               e.get_or(hal::Field::kDirection, 0) == uint64_t(hal::CopyDirection::kDeviceToHost) &&
               e.get_or(hal::Field::kBytes, 0) <= kSmallCopyBytes;
    if (e.kind == hal::EventKind::kSync || d2h) {
      (e.kind == hal::EventKind::kSync ? c.syncs : c.small_d2h)++;
      c.blocked_ns += e.dur_ns;
      ++c.ops[std::string(e.op)];
      if (c.api.empty()) {
        c.api = std::string(e.api);
        c.vendor = std::string(e.vendor);
      }
    }
  }
  void run(const CallRun& r) { launches_by_tid[r.tid] += r.calls; }
};

void repeated_sync_chains(SyncCallers& sc, const Analysis& a, std::vector<Chain>& out) {
  auto& callers = sc.callers;
  auto& launches_by_tid = sc.launches_by_tid;
  // Each caller: its blocking calls against all launches of its thread.
  for (auto& [key, c] : callers) {
    c.launches = launches_by_tid[key.first];
    uint64_t n = c.syncs + c.small_d2h;
    if (n < kMinSyncCalls || c.last <= c.first) continue;
    double span = double(c.last - c.first);
    double rate = double(n) / (span / 1e9);
    double share = double(c.blocked_ns) / span;
    double per_launch = c.launches ? double(n) / double(c.launches) : double(n);
    if (rate < kMinSyncRate || share < kSyncBlockedShareLow || per_launch < kMinSyncPerLaunch)
      continue;
    Chain ch;
    ch.rule = "repeated_sync";
    ch.vendor = c.vendor;
    ch.api = c.api;
    auto top = std::max_element(c.ops.begin(), c.ops.end(),
                                [](auto& x, auto& y) { return x.second < y.second; });
    ch.op = top->first;
    ch.pids = {c.pid};
    ch.window_start = c.first;
    ch.window_end = c.last;
    std::string who = a.process_label(c.pid);  // "trainer (pid 7)", or "pid 7"
    who.insert(who.back() == ')' ? who.size() - 1 : who.size(),
               ", tid " + std::to_string(key.first));
    ch.summary = format_count(n) + " host round-trips (" + format_count(c.syncs) + " syncs, " +
                 format_count(c.small_d2h) + " small D2H copies) from one caller in " + who + ": " +
                 fmt("%.0f/s, %.0f%% of its time blocked", rate, share * 100);
    // Its thread's launches per wait; a thread that launches less than it waits (its work is
    // queued by other threads) is said in counts, never "every 0.0 launches".
    std::string how_often =
        c.launches >= n ? "every " + fmt("%.1f", double(c.launches) / double(n)) + " launches"
                        : format_count(n) + " times against " + format_count(c.launches) +
                              (c.launches == 1 ? " launch" : " launches") + " of its thread";
    ch.root_cause = "Repeated synchronisation: the same caller waits for the GPU " + how_often +
                    " (the hidden .cpu()/.item()/.numpy() pattern)";
    ch.explanation = (c.launches ? "Between " + format_count(c.launches) + " launches of its thread"
                                 : std::string("With no launch on its thread")) +
                     ", this caller blocked " + format_count(n) + " times for " +
                     format_duration(c.blocked_ns) +
                     " in total. Each round-trip drains the GPU queue and idles the device while "
                     "the host catches up; faster GPUs make it worse.";
    ch.timeline.push_back(
        {layer_of(c.api), ch.op,
         format_count(n) + " blocking calls, " + format_duration(c.blocked_ns) + " blocked",
         c.blocked_ns / 1000});
    host_lines(a, c.pid, c.first, c.last, ch);
    ch.severity = share >= kSyncBlockedShareHigh     ? Severity::kHigh
                  : share >= kSyncBlockedShareMedium ? Severity::kMedium
                                                     : Severity::kLow;
    ch.fixes = {
        "Keep the computation on the GPU: replace .cpu().numpy() / .item() in the loop with tensor "
        "ops "
        "(e.g. scatter_/gather instead of NumPy set operations)",
        "If the value is needed on the host, copy it asynchronously (non_blocking=True into pinned "
        "memory) and read it once per step, not per element"};
    // A caller is a thread and a stack: one thread may sync from several sites.
    ch.id = ch.rule + ":" + std::to_string(c.pid) + ":" + std::to_string(key.first) + ":" +
            std::to_string(key.second);
    ch.score = share * double(n);
    out.push_back(std::move(ch));
  }
}

}  // namespace

struct LaunchCollapseAndRepeatedSync::Counts {
  LaunchRates rates;
  SyncCallers sync;
};

LaunchCollapseAndRepeatedSync::LaunchCollapseAndRepeatedSync()
    : counts_(std::make_unique<Counts>()) {}
LaunchCollapseAndRepeatedSync::~LaunchCollapseAndRepeatedSync() = default;

void LaunchCollapseAndRepeatedSync::call(const hal::Event& e) {
  counts_->rates.call(e);
  counts_->sync.call(e);
}

void LaunchCollapseAndRepeatedSync::run(const CallRun& r) {
  counts_->rates.run(r);
  counts_->sync.run(r);
}

void LaunchCollapseAndRepeatedSync::chains(const Analysis& a, std::vector<Chain>& out) {
  launch_collapse_chains(counts_->rates, a, out);
  repeated_sync_chains(counts_->sync, a, out);
}

namespace {

// One process's graphs: its captures, instantiations and launches (that succeeded).
struct GraphUse {
  int64_t first_launch = 0;
  uint64_t captures_after = 0, instantiates_after = 0;
  std::vector<int64_t> launches;  // capped
  std::vector<int64_t> instantiates;
  std::set<uint64_t> execs_instantiated, execs_launched;
  uint64_t instantiate_ns = 0;
  std::string api, vendor;

  void call(const hal::Event& e) {
    using K = hal::EventKind;
    if (api.empty()) {
      api = std::string(e.api);
      vendor = std::string(e.vendor);
    }
    int64_t ts = int64_t(e.ts_ns);
    if (e.kind == K::kGraphLaunch) {
      if (!first_launch) first_launch = ts;
      if (launches.size() < 1'000'000) launches.push_back(ts);
      if (auto x = e.get(hal::Field::kGraphExec)) execs_launched.insert(*x);
      return;
    }
    if (e.kind == K::kGraphInstantiate) {
      instantiates.push_back(ts);
      instantiate_ns += e.dur_ns;
      if (auto x = e.get(hal::Field::kGraphExec); x && *x) execs_instantiated.insert(*x);
      if (first_launch) ++instantiates_after;
    }
    if (e.kind == K::kGraphBeginCapture && first_launch) ++captures_after;
  }
};

std::map<uint32_t, GraphUse> read_graph_use(TraceSource& source, const Window& window) {
  std::map<uint32_t, GraphUse> by_pid;
  auto on_call = [&](const hal::Event& e) {
    using K = hal::EventKind;
    if (e.kind != K::kGraphBeginCapture && e.kind != K::kGraphEndCapture &&
        e.kind != K::kGraphInstantiate && e.kind != K::kGraphLaunch)
      return;
    // A failed capture or launch did not happen; counting it would invent a lifecycle.
    if (e.unfinished || (e.has_ret && e.ret != 0)) return;
    by_pid[e.pid].call(e);
  };
  source.call_runs(window, on_call, ignore_runs);
  return by_pid;
}

// Captures or instantiations after the first graph launch: a re-capture storm from
// kRecaptureMedium on.
uint64_t recaptures(const GraphUse& g) { return std::max(g.captures_after, g.instantiates_after); }

Chain recapture_chain(uint32_t pid, const GraphUse& g, uint64_t n, const std::string& who) {
  Chain c = new_chain("graph_recapture", g.vendor, g.api, "graph_capture", {pid}, g.first_launch,
                      g.launches.empty() ? g.first_launch : g.launches.back());
  c.severity = n >= kRecaptureHigh ? Severity::kHigh : Severity::kMedium;
  c.summary = "Graph re-capture storm: " + format_count(n) +
              " captures/instantiations after the first graph launch in " + who + " (" +
              format_duration(g.instantiate_ns) + " instantiating)";
  c.root_cause =
      "Graphs are re-captured after warm-up: new input shapes (batch sizes, sequence "
      "lengths) miss the captured set and each miss blocks on capture + instantiate";
  c.explanation = format_count(g.launches.size()) + " graph launches, " +
                  format_count(g.instantiates.size()) + " instantiations.";
  c.timeline.push_back({layer_of(g.api), "graph_instantiate",
                        format_count(g.instantiates.size()) + " instantiations, " +
                            format_duration(g.instantiate_ns),
                        g.instantiate_ns / 1000});
  c.fixes = {"Pre-warm every expected shape at start-up (capture each batch size once)",
             "Bound shape variability: pad to a few bucket sizes, cap max_num_batched_tokens"};
  c.id = c.rule + ":" + std::to_string(pid);
  c.score = double(n);
  return c;
}

// The graph launch rate in the 5 s before and after an instantiate.
struct GraphRateDrop {
  int64_t instantiate = 0;
  double before = 0, after = 0;
};

// The first instantiate after the first launch where the launch rate collapsed (and the trace
// goes on for 5 s after it: else the trace ended, not the rate).
std::optional<GraphRateDrop> rate_drop_after_instantiate(const GraphUse& g) {
  for (int64_t inst : g.instantiates) {
    if (!g.first_launch || inst < g.first_launch) continue;
    auto lo = std::lower_bound(g.launches.begin(), g.launches.end(), inst - 5 * kSecond);
    auto mid = std::lower_bound(g.launches.begin(), g.launches.end(), inst);
    auto hi = std::lower_bound(g.launches.begin(), g.launches.end(), inst + 5 * kSecond);
    double before = double(mid - lo) / 5.0, after = double(hi - mid) / 5.0;
    if (before < kMinGraphLaunchRate || after > kGraphRateDropFraction * before) continue;
    if (g.launches.back() < inst + 5 * kSecond) continue;  // the trace ended, not the rate
    return GraphRateDrop{inst, before, after};
  }
  return std::nullopt;
}

Chain rate_drop_chain(const Analysis& a, uint32_t pid, const GraphUse& g, const GraphRateDrop& d,
                      const std::string& who) {
  int64_t inst = d.instantiate;
  double before = d.before, after = d.after;
  Chain c = new_chain("graph_launch_collapse", g.vendor, g.api, "graph_launch", {pid}, inst,
                      inst + 5 * kSecond);
  c.severity = Severity::kMedium;
  c.summary = "Graph launch rate dropped " + fmt("%.0f%%", (1 - after / before) * 100) +
              " after an instantiate (" + fmt("%.0f -> %.0f launches/s", before, after) + ") in " +
              who;
  c.root_cause =
      "Graph pool churn: a new instantiation replaced the working set and launches "
      "stalled behind re-capture";
  c.explanation = "Launches in the 5 s before the instantiate: " + fmt("%.0f/s", before) +
                  "; in the 5 s after: " + fmt("%.0f/s", after) + ".";
  host_lines(a, pid, inst, inst + 5 * kSecond, c);
  c.timeline.push_back(
      {layer_of(g.api), "graph_launch", fmt("%.0f -> %.0f launches/s", before, after), 0});
  c.fixes = {
      "Pre-warm all expected batch sizes during start-up",
      "Set max_num_batched_tokens (or the framework's equivalent) to limit shape variability"};
  c.id = c.rule + ":" + std::to_string(pid) + ":" + std::to_string(inst);
  c.score = before - after;
  return c;
}

// Graphs instantiated and never launched.
uint64_t never_launched(const GraphUse& g) {
  uint64_t unused = 0;
  for (uint64_t x : g.execs_instantiated)
    if (!g.execs_launched.count(x)) ++unused;
  return unused;
}

Chain never_launched_chain(uint32_t pid, const GraphUse& g, uint64_t unused,
                           const std::string& who) {
  Chain c = new_chain("graph_never_launched", g.vendor, g.api, "graph_instantiate", {pid}, 0, 0);
  c.severity = unused >= kRecaptureMedium ? Severity::kMedium : Severity::kLow;
  c.summary = format_count(unused) + " instantiated graph" + (unused == 1 ? "" : "s") +
              " never launched in " + who;
  c.root_cause =
      "Captured work that is never replayed: capture and instantiate cost without the "
      "launch-overhead savings";
  c.explanation = format_count(g.execs_instantiated.size()) + " graphs instantiated, " +
                  format_count(g.execs_launched.size()) + " launched.";
  c.fixes = {"Capture only the shapes that are served; drop speculative captures"};
  c.id = c.rule + ":" + std::to_string(pid);
  c.score = double(unused);
  return c;
}

}  // namespace

void rule_graph_lifecycle(TraceSource& source, const Analysis& a, std::vector<Chain>& out) {
  using K = hal::EventKind;
  if (a.stats.lacks(
          {K::kGraphBeginCapture, K::kGraphEndCapture, K::kGraphInstantiate, K::kGraphLaunch}))
    return;
  for (const auto& [pid, g] : read_graph_use(source, a.window)) {
    std::string who = a.process_label(pid);
    if (uint64_t n = recaptures(g); n >= kRecaptureMedium)
      out.push_back(recapture_chain(pid, g, n, who));
    if (auto drop = rate_drop_after_instantiate(g))  // one per process
      out.push_back(rate_drop_chain(a, pid, g, *drop, who));
    if (uint64_t n = never_launched(g); n > 0) out.push_back(never_launched_chain(pid, g, n, who));
  }
}

}  // namespace ingero::engine

// The step model, part 3: call sites, code locations, repeating sites per step, and the
// summary of the steady steps.
#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "engine/chain.h"
#include "engine/preemptors.h"
#include "engine/steps_internal.h"
#include "engine/thresholds_steps.h"
#include "hal/demangle.h"

namespace ingero::engine::steps_detail {

bool library_file(const std::string& f) {
  return f.find("/site-packages/") != std::string::npos ||
         f.find("/dist-packages/") != std::string::npos ||
         f.find("/lib/python3") != std::string::npos;
}

bool library_module(const std::string& m) {
  return m.empty() || m.front() == '[' || hal::system_library(m) || library_file(m);
}

std::string basename(const std::string& f) {
  auto slash = f.rfind('/');
  return slash == std::string::npos ? f : f.substr(slash + 1);
}

namespace {

constexpr size_t kSitesPerClass = 32;

std::string site_key(const std::vector<StackFrameInfo>& frames, uint64_t stack) {
  std::string py, native, names;
  for (const auto& f : frames) {
    std::string loc = f.file + ":" + std::to_string(f.line);
    if (f.python)
      py += (py.empty() ? "" : " < ") + loc;
    else if (!f.file.empty())
      native += (native.empty() ? "" : " < ") + loc;
    else if (!f.function.empty())
      names += (names.empty() ? "" : " < ") + f.function;
  }
  if (!py.empty()) return "py:" + py;
  if (!native.empty()) return "src:" + native;
  if (!names.empty()) return "fn:" + names;
  return "stack:" + std::to_string(stack);
}

}  // namespace

uint32_t Sites::of(uint64_t stack, std::string_view op) {
  if (stack)
    if (auto it = by_stack_.find(stack); it != by_stack_.end()) return it->second;
  std::string key = stack ? site_key(frames(stack), stack) : "op:" + std::string(op);
  auto [it, fresh] = by_key_.try_emplace(key, uint32_t(keys_.size()));
  if (fresh) {
    keys_.push_back(key);
    stacks_.push_back(stack);
  }
  if (stack) by_stack_[stack] = it->second;
  return it->second;
}

std::vector<StackFrameInfo> Sites::frames(uint64_t stack) {
  std::lock_guard<std::mutex> hold(lock_);
  return source_.stack(stack);
}

void count_sites(const Proc& p, Sites& sites, const std::vector<RoundTrip>& trips, StepSeries& s) {
  if (s.steps.empty()) return;
  std::vector<int64_t> starts;
  std::vector<int32_t> steady_pos;
  int32_t n_steady = 0;
  for (const Step& st : s.steps) {
    starts.push_back(st.start_ns);
    steady_pos.push_back(st.warmup ? -1 : n_steady++);
  }
  int64_t last = s.steps.back().end_ns;
  auto step_of = [&](int64_t t) -> int64_t {
    if (t < starts.front() || t >= last) return -1;
    return std::upper_bound(starts.begin(), starts.end(), t) - starts.begin() - 1;
  };
  struct Acc {
    SiteCount c;
    std::vector<uint64_t> per_step;
  };
  std::map<std::pair<int, uint32_t>, Acc> acc;
  auto add = [&](int cls, uint32_t site, int64_t k, hal::EventKind kind, const std::string& op,
                 uint64_t stack, uint64_t ns, uint64_t bytes) {
    if (k < 0 || steady_pos[size_t(k)] < 0) return;
    Acc& a = acc[{cls, site}];
    if (a.per_step.empty()) {
      a.per_step.resize(size_t(n_steady));
      a.c.stack = stack;
      a.c.site = sites.key(site);
      a.c.kind = kind;
      a.c.op = op;
    }
    ++a.per_step[size_t(steady_pos[size_t(k)])];
    ++a.c.calls;
    a.c.host_ns += ns;
    a.c.max_ns = std::max(a.c.max_ns, ns);
    a.c.bytes += bytes;
  };
  for (const RoundTrip& r : trips) {
    int64_t k = step_of(r.start);
    if (k < 0) continue;
    ++s.steps[size_t(k)].round_trips;
    std::string op;
    add(0, r.site, k, hal::EventKind::kSync, "", r.stack, r.wait_ns, 0);
  }
  for (const Call& c : p.calls) {
    if (c.kind != hal::EventKind::kAlloc && c.kind != hal::EventKind::kFree) continue;
    const std::string& op = p.ops[c.op].op;
    p.for_each_span(c, [&](uint64_t, const Span& x) {
      add(c.kind == hal::EventKind::kAlloc ? 1 : 2, sites.of(x.stack, op), step_of(x.start), c.kind,
          op, x.stack, x.dur, c.bytes);
    });
  }
  // Host gaps that follow a call of a site: what a round trip leaves idle after it returns.
  for (const HostGap& g : s.gaps) {
    if (!g.before_stack || g.step == kNoStep || s.steps[g.step].warmup) continue;
    auto it = acc.find({0, sites.of(g.before_stack, "")});
    if (it != acc.end()) it->second.c.gap_after_ns += g.duration();
  }
  // Name round-trip sites by the op of their first call (the copy or the sync). A site without
  // a stack is its op ("op:NAME"): every call without a stack has stack 0, so the first of them
  // would name every such site.
  for (auto& [key, a] : acc) {
    if (key.first != 0) continue;
    if (!a.c.stack) {
      if (a.c.site.rfind("op:", 0) == 0) a.c.op = a.c.site.substr(3);
      continue;
    }
    for (const Call& c : p.calls)
      if (c.cat == kWait && c.stack == a.c.stack) {
        a.c.op = p.ops[c.op].op;
        break;
      }
  }
  std::map<int, std::vector<SiteCount>> by_class;
  for (auto& [key, a] : acc) {
    for (uint64_t n : a.per_step) {
      if (n) ++a.c.steps_with;
      a.c.max_per_step = std::max(a.c.max_per_step, n);
    }
    a.c.median_per_step = quantile(a.per_step, 0.5);
    by_class[key.first].push_back(a.c);
  }
  for (auto& [cls, v] : by_class) {
    std::sort(v.begin(), v.end(), [](const SiteCount& x, const SiteCount& y) {
      return x.calls != y.calls ? x.calls > y.calls : x.site < y.site;
    });
    if (v.size() > kSitesPerClass) v.resize(kSitesPerClass);
    s.sites.insert(s.sites.end(), v.begin(), v.end());
  }
  // Each gap's round-trip site, for rules that charge a gap to the read before it.
  std::map<std::string, int32_t> trip_site;
  for (size_t i = 0; i < s.sites.size(); ++i)
    if (s.sites[i].kind == hal::EventKind::kSync) trip_site[s.sites[i].site] = int32_t(i);
  for (HostGap& g : s.gaps) {
    if (!g.before_stack) continue;
    auto it = trip_site.find(sites.key(sites.of(g.before_stack, "")));
    if (it != trip_site.end()) g.before_site = it->second;
  }
}

// Where the steady steps' launches come from: their stacks' code locations (the user's line,
// as code_location() picks it), the one issuing most of them, and one stack of it.
void count_launch_sites(const Proc& p, Sites& sites, StepSeries& s) {
  StepSummary& m = s.summary;
  if (s.steps.empty()) return;
  std::vector<int64_t> starts;
  starts.reserve(s.steps.size());
  for (const Step& st : s.steps) starts.push_back(st.start_ns);
  int64_t last = s.steps.back().end_ns;
  auto steady = [&](int64_t t) {
    if (t < starts.front() || t >= last) return false;
    return !s.steps[size_t(std::upper_bound(starts.begin(), starts.end(), t) - starts.begin() - 1)]
                .warmup;
  };
  struct Count {
    uint64_t calls = 0;
    uint32_t tid = 0;
  };
  std::unordered_map<uint64_t, Count> by_stack;
  for (const Call& c : p.calls) {
    if ((c.kind != hal::EventKind::kLaunch && c.kind != hal::EventKind::kGraphLaunch) ||
        !steady(c.start))
      continue;
    if (Proc::grouped(c)) {
      for (const Grouped& g : p.group(c)) {
        Count& x = by_stack[p.stacks[g.stack()]];
        ++x.calls;
        x.tid = c.tid;
      }
    } else {
      Count& x = by_stack[c.stack];
      x.calls += p.calls_in(c);
      x.tid = c.tid;
    }
  }
  std::map<std::string, StepSummary::LaunchSite> by_where;
  for (const auto& [stack, n] : by_stack) {
    m.launches += n.calls;
    if (!stack) continue;
    std::string w = sites.where(stack);
    if (w.empty()) continue;
    StepSummary::LaunchSite& x = by_where[w];
    x.calls += n.calls;
    if (n.calls > x.stack_calls || (n.calls == x.stack_calls && stack < x.stack)) {
      x.stack_calls = n.calls;
      x.stack = stack;
      x.tid = n.tid;
    }
  }
  for (auto& [w, x] : by_where) {
    x.where = w;
    m.launch_sites.push_back(std::move(x));
  }
  pick_launch_site(m);
}

namespace {

uint64_t top_of(const std::map<uint64_t, uint64_t>& t) {
  return t.empty() ? 0 : std::max_element(t.begin(), t.end(), [](auto& x, auto& y) {
                           return x.second < y.second;
                         })->first;
}

// Shares of steady step time, medians, and who preempted the GPU-feeding threads.
void totals(StepSeries& s, const Tallies& tally) {
  StepSummary& m = s.summary;
  std::vector<uint64_t> dur, idle_share_pm, launches, trips;
  Step sum;
  for (const Step& st : s.steps) {
    if (st.warmup) {
      ++m.warmup_steps;
      continue;
    }
    ++m.steps;
    uint64_t d = st.duration();
    dur.push_back(d);
    idle_share_pm.push_back(d ? st.gpu_idle_ns * 1'000'000 / d : 0);
    launches.push_back(st.launches);
    trips.push_back(st.round_trips);
    m.total_ns += d;
    sum.wait_ns += st.wait_ns;
    sum.enqueue_ns += st.enqueue_ns;
    sum.api_ns += st.api_ns;
    sum.host_ns += st.host_ns;
    m.host_time += st.host_time;
    sum.gpu_idle_ns += st.gpu_idle_ns;
    sum.host_gap_ns += st.host_gap_ns;
    sum.preempted_ns += st.preempted_ns;
    m.gap += st.gap;
  }
  if (!m.steps || !m.total_ns) return;
  m.median_ns = quantile(dur, 0.5);
  m.p90_ns = quantile(dur, 0.9);
  m.min_ns = *std::min_element(dur.begin(), dur.end());
  m.max_ns = *std::max_element(dur.begin(), dur.end());
  double total = double(m.total_ns);
  m.wait = double(sum.wait_ns) / total;
  m.enqueue = double(sum.enqueue_ns) / total;
  m.api = double(sum.api_ns) / total;
  m.host = double(sum.host_ns) / total;
  m.gpu_idle = double(sum.gpu_idle_ns) / total;
  m.host_gap = double(sum.host_gap_ns) / total;
  m.preempted = double(sum.preempted_ns) / total;
  m.median_gpu_idle = double(quantile(idle_share_pm, 0.5)) / 1e6;
  m.launches_per_step = uint32_t(quantile(launches, 0.5));
  m.round_trips_per_step = uint32_t(quantile(trips, 0.5));
  m.preemptors = rank_preemptors(tally.step_preemptor_ns, s.pid, &m.preempted_by, &m.preemptors_ns);
  for (const auto& [key, ns] : tally.preempted_before_ns)
    if (ns > m.preempted_before_ns) {
      m.preempted_before_ns = ns;
      m.preempted_stack = key.first;
      m.preempted_op = key.second;
      m.preempted_tid = tally.preempted_before_tid.at(key);
    }
}

// The gaps' dominant use of time, and where in the code; returns the text after the cause.
std::string gap_cause(StepSeries& s, Sites& sites, const Tallies& tally) {
  StepSummary& m = s.summary;
  const GapTime& g = m.gap;
  uint64_t top = std::max({g.on_cpu_ns, g.preempted_ns, g.io_ns, g.sleep_ns, g.unknown_ns});
  auto locate = [&](uint64_t stack, const char* how) -> std::string {
    if (!stack) return "";
    m.gap_stack = stack;
    m.gap_where = sites.where(stack);
    return m.gap_where.empty() ? "" : how + m.gap_where;
  };
  if (top == 0) return "";
  if (top == g.unknown_ns) {
    m.gap_cause = "unattributed";
    return " (the trace has no scheduler events)";
  }
  if (top == g.on_cpu_ns) {
    m.gap_cause = "on-CPU";
    if (uint64_t st = top_of(tally.samples)) {
      m.gap_where_sampled = true;
      return locate(st, " in ");
    }
    return locate(top_of(tally.after_ns), " before ");
  }
  if (top == g.preempted_ns) {
    m.gap_cause = "preempted";
    std::string by;
    auto ranked = rank_preemptors(tally.preemptor_ns, s.pid, &by);
    if (!ranked.empty()) {
      m.preemptor_pid = ranked[0].pid;
      m.preemptor = ranked[0].comm;
    }
    return by.empty() ? "" : " by " + by;
  }
  if (top == g.io_ns) {
    m.gap_cause = "blocked on I/O";
    return locate(top_of(tally.before_io_ns), " after ");
  }
  m.gap_cause = "sleeping";
  return locate(top_of(tally.after_ns), " before ");
}

}  // namespace

void summarize(StepSeries& s, Sites& sites, const Tallies& tally) {
  StepSummary& m = s.summary;
  totals(s, tally);
  if (!m.steps || !m.total_ns) {
    m.text = s.cadence_note;
    return;
  }
  std::string where = gap_cause(s, sites, tally);
  // Windows are of one length but the last, cut by the trace's end: their median was that
  // remainder where there were two ("median window 55.7ms" of 1 s windows, helper-76).
  std::string head =
      (s.cadence == Cadence::kWindows
           ? "no periodic step (" + std::to_string(m.steps) + " windows of at most " +
                 format_duration(uint64_t(kFallbackWindowNs)) + ")"
           : "median step " + format_duration(m.median_ns)) +
      ": " + gpu_share_text(m);
  // The larger of the two host-side stories: the GPU idle waiting for the host (gaps), or the
  // threads feeding it losing their CPU. Said as what it counts (a thread preempted, inside its
  // GPU calls too), not as the host's time outside them (host_time's "preempted" beside it).
  if (m.preempted >= kGapShareLow && m.preempted >= m.host_gap)
    m.text = head + ": a thread feeding the GPU preempted " + pct(m.preempted) + " of the step" +
             (m.preempted_by.empty() ? "" : ", by " + m.preempted_by);
  else if (m.host_gap >= kGapShareLow && m.gap_cause == "unattributed")
    m.text = head + ": waiting for the host" + where;
  else if (m.host_gap >= kGapShareLow && !m.gap_cause.empty())
    m.text = head + ": host " + m.gap_cause + where;
  else
    m.text = head + ": host waiting for the GPU " + pct(m.wait) + ", enqueueing " + pct(m.enqueue) +
             ", in other GPU calls " + pct(m.api) + ", " + host_time_text(m);
}

}  // namespace ingero::engine::steps_detail

namespace ingero::engine {

std::string host_time_text(const StepSummary& m) {
  const GapTime& h = m.host_time;
  uint64_t total = h.total();
  if (!total) return "in its own code " + pct(m.host);
  if (h.unknown_ns * 2 >= total)
    return "outside GPU calls " + pct(m.host) + " (no scheduler events: running or not unknown)";
  auto share = [&](uint64_t ns) { return m.host * double(ns) / double(total); };
  std::string out = "in its own code " + pct(share(h.on_cpu_ns));
  // Shares that print as 0% are left out.
  if (share(h.sleep_ns) >= 0.005) out += ", asleep " + pct(share(h.sleep_ns));
  if (share(h.io_ns) >= 0.005) out += ", blocked on I/O " + pct(share(h.io_ns));
  if (share(h.preempted_ns) >= 0.005) out += ", preempted " + pct(share(h.preempted_ns));
  return out;
}

void pick_launch_site(StepSummary& m) {
  auto& v = m.launch_sites;
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.calls != b.calls ? a.calls > b.calls : a.where < b.where;
  });
  if (v.size() > StepSummary::kMaxLaunchSites) v.resize(StepSummary::kMaxLaunchSites);
  m.launch_where.clear();
  m.launch_stack = m.launch_site_calls = 0;
  m.launch_tid = 0;
  if (v.empty() || !v.front().calls) return;
  m.launch_where = v.front().where;
  m.launch_stack = v.front().stack;
  m.launch_site_calls = v.front().calls;
  m.launch_tid = v.front().tid;
}

const std::string& CodeLocations::operator()(uint64_t stack) {
  auto [it, fresh] = where_.try_emplace(stack);
  if (fresh && stack) {
    std::vector<StackFrameInfo> frames;
    if (lock_) {
      std::lock_guard<std::mutex> hold(*lock_);
      frames = source_.stack(stack);
    } else {
      frames = source_.stack(stack);
    }
    it->second = code_location(frames);
  }
  return it->second;
}

std::string code_location(const std::vector<StackFrameInfo>& frames) {
  using steps_detail::basename;
  using steps_detail::library_file;
  using steps_detail::library_module;
  const StackFrameInfo* pick = nullptr;
  // The program's own code first (Python, then native outside system and vendor libraries),
  // so a sample that lands in libc's clock_gettime names the loop that called it.
  for (int pass = 0; pass < 6 && !pick; ++pass)
    for (const auto& f : frames) {
      bool native_own = !f.python && !library_module(f.module) &&
                        !hal::generated_launch_frame(f.function, f.file);
      bool take = pass == 0   ? f.python && !library_file(f.file)
                  : pass == 1 ? f.python
                  : pass == 2 ? native_own && !f.file.empty()
                  : pass == 3 ? !f.python && !f.file.empty()
                  : pass == 4 ? native_own && !f.function.empty()
                              : !f.function.empty();
      if (take) {
        pick = &f;
        break;
      }
    }
  if (!pick) return "";
  std::string out = pick->function.empty() ? "??" : pick->function;
  if (!pick->file.empty())
    out += " (" + basename(pick->file) + ":" + std::to_string(pick->line) + ")";
  return out;
}

}  // namespace ingero::engine

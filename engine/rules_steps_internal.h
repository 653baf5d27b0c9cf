// Internals shared by the step rules (rules_steps.cc, rules_steps_gaps.cc).
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "engine/analysis.h"
#include "engine/thresholds_steps.h"

namespace ingero::engine::step_rules {

inline Severity band(double share, double medium, double high) {
  return share >= high ? Severity::kHigh : share >= medium ? Severity::kMedium : Severity::kLow;
}

// One process's steps, with what every rule needs about it.
struct Context {
  const Analysis& a;
  TraceSource& source;
  const StepSeries& s;
  const StepSummary& m;
  std::string who, api, vendor;
  std::vector<std::string> workers;  // processes it forked (DataLoader-style)
  std::vector<bool> hidden_site;     // per StepSeries::sites entry: a hidden-sync site

  // Whether a steady gap belongs to another finding: it follows a hidden-sync read, or the
  // thread blocked on I/O in it (its on-CPU part is the write itself).
  bool charged_elsewhere(const HostGap& g) const {
    return g.time.io_ns || (g.before_site >= 0 && size_t(g.before_site) < hidden_site.size() &&
                            hidden_site[size_t(g.before_site)]);
  }

  std::string per_step(uint64_t total_ns) const {
    return format_duration(total_ns / std::max<uint64_t>(1, m.steps));
  }
  // The vendor layer of an op as the process called it ("CUDA" for cudaFree), else the
  // process's main layer.
  std::string layer(const std::string& op) const {
    for (const TopLevelOp& o : s.ops)
      if (o.op == op) return layer_of(o.api);
    return layer_of(api);
  }
  double share(uint64_t ns) const { return double(ns) / double(std::max<uint64_t>(1, m.total_ns)); }
  std::string at(uint64_t stack) const {
    std::string w = stack ? code_location(source.stack(stack)) : "";
    return w.empty() ? "" : " at " + w;
  }
  std::string step_line() const {
    return format_count(m.steps) + " steady steps, median " + format_duration(m.median_ns) +
           " (p90 " + format_duration(m.p90_ns) + "), " + format_count(m.warmup_steps) +
           " warm-up; " + gpu_share_text(m) + ", host gaps " + pct(m.host_gap) +
           ", waiting for the GPU " + pct(m.wait) + ", enqueueing " + pct(m.enqueue);
  }
  // A stack the rule located itself, with what its figures count.
  ChainStack located(uint64_t stack, StackCounts counts, uint64_t calls, uint64_t examined,
                     uint64_t worst_ns, uint32_t tid) const {
    ChainStack cs;
    cs.stack_id = stack;
    cs.counts = counts;
    cs.calls = calls;
    cs.examined = examined;
    cs.worst_ns = worst_ns;
    cs.pid = s.pid;
    cs.tid = tid;
    cs.frames = user_frames(source.stack(stack));
    return cs;
  }
  Chain chain(const std::string& rule, const std::string& op, double score) const {
    Chain c;
    c.rule = rule;
    c.vendor = vendor;
    c.api = api;
    c.op = op;
    c.pids = {s.pid};
    c.window_start = s.warmup_end_ns;
    c.window_end = s.steps.back().end_ns;
    c.id = rule + ":" + std::to_string(s.pid);
    c.score = score * 1000;
    c.timeline.push_back({"STEPS", "step", step_line(), m.median_ns / 1000});
    return c;
  }
};

// Steady gaps grouped by the line of the user's code of the call that ended them (or the one
// before them), each line under its stack with the most gap time: counted per whole stack, a
// loop's one line read "ends 102 gaps at upload (wl.c:24)" where all 299 ended there (its
// callers differed). Gaps without a line stay by stack.
struct GapSite {
  uint64_t ns = 0, count = 0, worst = 0, h2d_ns = 0, io_ns = 0, write_bytes = 0, ios = 0;
  uint32_t tid = 0;
  std::string op;
};
inline std::map<uint64_t, GapSite> gap_sites(const Context& x, bool before, bool io_only) {
  std::map<uint64_t, GapSite> by_stack;
  for (const HostGap& g : x.s.gaps) {
    if (g.step == kNoStep || x.s.steps[g.step].warmup || (io_only && !g.time.io_ns)) continue;
    GapSite& site = by_stack[before ? g.before_stack : g.after_stack];
    uint64_t d = io_only ? g.time.io_ns : g.duration();
    site.ns += d;
    ++site.count;
    site.io_ns += g.time.io_ns;
    site.write_bytes += g.block_write_bytes;
    site.ios += g.block_ios;
    if (d >= site.worst) {
      site.worst = d;
      site.tid = g.tid;
    }
    if (g.after_direction == uint64_t(hal::CopyDirection::kHostToDevice)) site.h2d_ns += d;
    if (site.op.empty()) site.op = g.after_op;
  }
  std::vector<std::pair<uint64_t, GapSite>> v(by_stack.begin(), by_stack.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::map<std::string, uint64_t> first;  // line -> the stack it is kept under
  std::map<uint64_t, GapSite> out;
  for (auto& [stack, g] : v) {
    std::string w = stack ? code_location(x.source.stack(stack)) : "";
    auto [it, fresh] = first.try_emplace(w, stack);
    if (w.empty() || fresh) {
      out[stack] = std::move(g);
      continue;
    }
    GapSite& to = out[it->second];
    to.ns += g.ns;
    to.count += g.count;
    to.h2d_ns += g.h2d_ns;
    to.io_ns += g.io_ns;
    to.write_bytes += g.write_bytes;
    to.ios += g.ios;
    if (g.worst > to.worst) {
      to.worst = g.worst;
      to.tid = g.tid;
    }
  }
  return out;
}
inline const std::pair<const uint64_t, GapSite>* top_site(const std::map<uint64_t, GapSite>& m) {
  const std::pair<const uint64_t, GapSite>* best = nullptr;
  for (const auto& e : m)
    if (!best || e.second.ns > best->second.ns) best = &e;
  return best;
}

// A round-trip site that reads back many times in nearly every step: the hidden sync.
inline bool hidden_sync_site(const SiteCount& site, const StepSummary& m) {
  return site.kind == hal::EventKind::kSync && site.median_per_step >= kHiddenSyncPerStep &&
         double(site.steps_with) >= kEveryStepShare * double(m.steps);
}

// Host-gap rules: on-CPU (data-loader starvation / host-bound), blocked on I/O, preempted,
// sleeping. rules_steps_gaps.cc.
void gap_rules(const Context& x, std::vector<Chain>& out);

}  // namespace ingero::engine::step_rules

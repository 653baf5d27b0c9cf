// Step rules over calls (hidden sync, allocator churn, launch-bound steps), the entry point of
// the step rules, and the warm-up phase. Thresholds: engine/thresholds_steps.h.
#include "engine/rules_steps.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "engine/rules_steps_internal.h"
#include "engine/thresholds_steps.h"

namespace ingero::engine {
namespace {

using step_rules::band;
using step_rules::Context;

// The innermost Python function of a stack, when it is in an installed package ("empty_cache"):
// the library call the user's line made.
std::string library_function(const std::vector<StackFrameInfo>& frames) {
  for (const auto& f : frames)
    if (f.python)
      return f.file.find("-packages/") != std::string::npos ? f.function : std::string();
  return "";
}

// Many blocking round trips per step from one site: the hidden .item()/.cpu() in a loop.
void hidden_sync(const Context& x, std::vector<Chain>& out) {
  for (const SiteCount& site : x.s.sites) {
    if (!step_rules::hidden_sync_site(site, x.m)) continue;
    double share = x.share(site.host_ns + site.gap_after_ns);
    Chain c = x.chain("hidden_sync", site.op, share);
    // The site: its stack, or without one its op (a copy's and a sync's sites both have 0).
    c.id += ":" + (site.stack ? std::to_string(site.stack) : site.op);
    c.severity = step_rules::band(share, kHiddenSyncMedium, kHiddenSyncHigh);
    std::string at = x.at(site.stack);
    c.summary = "Hidden sync: " + format_count(site.median_per_step) +
                " blocking round trips per step" + at + " in " + x.who + " (" + site.op +
                "), costing " + pct(share) + " of the step time";
    c.root_cause = "One call site reads from the GPU " + format_count(site.median_per_step) +
                   " times per step: each read waits for the queue to drain and leaves the GPU "
                   "idle until the host queues more work";
    c.explanation = format_count(site.calls) + " round trips in " + format_count(site.steps_with) +
                    " of " + format_count(x.m.steps) + " steady steps (up to " +
                    format_count(site.max_per_step) + " in one): " + format_duration(site.host_ns) +
                    " waiting in them and " + format_duration(site.gap_after_ns) +
                    " of GPU-idle host time right after them. " + x.m.text + ".";
    c.timeline.push_back({x.layer(site.op), site.op,
                          format_count(site.median_per_step) + " round trips per step" + at,
                          site.host_ns / std::max<uint64_t>(1, site.calls) / 1000});
    if (site.stack)
      c.stacks.push_back(x.located(site.stack, StackCounts::kSiteCalls, site.calls, site.calls,
                                   site.max_ns, x.s.anchor_tid));
    c.fixes = {"Keep the values on the device: replace the per-element read" + at +
                   " (.item(), .cpu(), .tolist(), Python branches on tensors) with tensor ops "
                   "over the whole batch",
               "If the host needs them, read them once per step: one copy of the whole tensor "
               "(non_blocking=True into pinned memory), not one per element"};
    out.push_back(std::move(c));
  }
}

const SiteCount* top_site_of(const StepSeries& s, hal::EventKind k) {
  const SiteCount* best = nullptr;
  for (const SiteCount& site : s.sites)
    if (site.kind == k && (!best || site.calls > best->calls)) best = &site;
  return best;
}

// `n` over `steps` steps: whole where it divides evenly, else to a tenth ("0.9"), never the
// "0 frees per step" of a division that dropped the fraction.
std::string count_per_step(uint64_t n, uint64_t steps) {
  if (!steps || n % steps == 0) return format_count(steps ? n / steps : 0);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", double(n) / double(steps));
  return buf;
}

// Allocations and frees of device memory every step.
void allocator_churn(const Context& x, std::vector<Chain>& out) {
  uint64_t steps_with = 0, ns = 0, allocs = 0, frees = 0;
  for (const Step& st : x.s.steps) {
    if (st.warmup) continue;
    if (st.allocs && st.frees) ++steps_with;
    ns += st.alloc_free_ns;
    allocs += st.allocs;
    frees += st.frees;
  }
  // The pattern is the finding (a caching allocator never does this); its cost sets the severity.
  double share = x.share(ns);
  if (double(steps_with) < kEveryStepShare * double(x.m.steps)) return;
  const SiteCount* free_site = top_site_of(x.s, hal::EventKind::kFree);
  const SiteCount* alloc_site = top_site_of(x.s, hal::EventKind::kAlloc);
  Chain c = x.chain("allocator_churn", free_site ? free_site->op : "free", share);
  c.severity = step_rules::band(share, kChurnShareMedium, kChurnShareHigh);
  std::string free_at = free_site ? x.at(free_site->stack) : "";
  std::string alloc_at = alloc_site ? x.at(alloc_site->stack) : "";
  std::string via = free_site ? library_function(x.source.stack(free_site->stack)) : "";
  // A site named beside a count holds all of it, or says how many it holds.
  auto at_site = [&](const SiteCount* site, uint64_t total, const std::string& at) {
    if (!site || at.empty() || site->calls >= total) return at;
    return ", " + count_per_step(site->calls, x.m.steps) + " of them" + at;
  };
  c.summary = "Allocator churn: " + x.who + " frees and re-allocates device memory every step (" +
              count_per_step(frees, x.m.steps) + " frees per step" +
              at_site(free_site, frees, free_at) + "; " + count_per_step(allocs, x.m.steps) +
              " allocations" + at_site(alloc_site, allocs, alloc_at) + "), " + pct(share) +
              " of the step time";
  c.root_cause = "Device memory is released inside the loop" +
                 (via.empty() ? std::string() : " by " + via + "()") + free_at +
                 " and allocated again in the next step; device allocation and release are slow, "
                 "synchronous driver calls";
  c.explanation = "In " + format_count(steps_with) + " of " + format_count(x.m.steps) +
                  " steady steps: " + format_count(frees) + " frees and " + format_count(allocs) +
                  " allocations, " + format_duration(ns) + " inside them (" + x.per_step(ns) +
                  " per step of a " + format_duration(x.m.median_ns) + " median step).";
  if (free_site) {
    c.timeline.push_back({x.layer(free_site->op), free_site->op,
                          format_count(free_site->calls) + " frees" + free_at,
                          free_site->host_ns / 1000});
    c.stacks.push_back(x.located(free_site->stack, StackCounts::kSiteCalls, free_site->calls, frees,
                                 free_site->max_ns, x.s.anchor_tid));
  }
  if (alloc_site) {
    c.timeline.push_back({x.layer(alloc_site->op), alloc_site->op,
                          format_count(alloc_site->calls) + " allocations" + alloc_at,
                          alloc_site->host_ns / 1000});
    c.stacks.push_back(x.located(alloc_site->stack, StackCounts::kSiteCalls, alloc_site->calls,
                                 allocs, alloc_site->max_ns, x.s.anchor_tid));
  }
  if (!via.empty())
    c.fixes.push_back("Remove the " + via + "() call" + free_at +
                      " from the loop: it hands cached memory back every step and the next step "
                      "allocates it again");
  else
    c.fixes.push_back("Allocate once before the loop and reuse the buffers: memory is freed" +
                      free_at + " and allocated again" + alloc_at + " every step");
  c.fixes.push_back(
      "If memory must be returned (fragmentation, a second model), do it every N steps, not "
      "every step");
  out.push_back(std::move(c));
}

// Many small kernels and a host that never waits for the GPU: the host's launch rate sets
// the step time. Where the device measured its busy share, its idle sets the severity (and a
// GPU that keeps up is no finding); without, the idle share is only a lower bound: never HIGH.
void launch_bound(const Context& x, std::vector<Chain>& out) {
  if (x.m.launches_per_step < kLaunchBoundLaunches || x.m.wait >= kLaunchBoundMaxWait) return;
  uint64_t per_launch = x.m.median_ns / x.m.launches_per_step;
  if (per_launch > kLaunchBoundHostPerLaunchNs) return;
  double idle = x.m.measured_idle();
  if (idle >= 0 && idle < kLaunchBoundMinMeasuredIdle) return;
  Chain c = x.chain("launch_bound", "launch", idle >= 0 ? idle : x.m.enqueue);
  if (idle >= 0)
    c.severity = band(idle, kMeasuredIdleMedium, kMeasuredIdleHigh);
  else
    c.severity = x.m.enqueue >= kLaunchBoundEnqueueMedium ? Severity::kMedium : Severity::kLow;
  // Where the launches come from: the line issuing most of them.
  double site_share = x.m.launches ? double(x.m.launch_site_calls) / double(x.m.launches) : 0;
  std::string from;
  if (!x.m.launch_where.empty())
    from = site_share >= 0.5 ? " from " + x.m.launch_where
                             : ", the most (" + pct(site_share) + ") from " + x.m.launch_where;
  std::string gpu = gpu_share_text(x.m);
  // Which kernels (engine/kernels.h), where the trace names them: they say where they come from.
  const ProcessKernels* k = x.a.kernels.find(x.s.pid);
  std::string kernels = k ? kernels_per_step_text(*k) : "";
  c.summary = "Launch-bound steps: " + x.who + " launches " + format_count(x.m.launches_per_step) +
              " kernels per " + format_duration(x.m.median_ns) + " step (" +
              format_duration(per_launch) + " of host time each)" +
              (kernels.empty() ? from : ": " + kernels) + " and waits for the GPU only " +
              pct(x.m.wait) + " of the step; " + gpu;
  c.root_cause =
      idle >= 0 ? "The host issues many small kernels and the GPU, measured idle " + pct(idle) +
                      " of the step (" + gpu +
                      "), finishes each before the next arrives: the step "
                      "time is the host's launch and dispatch time"
                : "The host issues many small kernels and the GPU finishes them as fast as they "
                  "come: the step time is the host's launch and dispatch time (how idle the GPU is "
                  "between them is not measured: " +
                      gpu + ")";
  c.explanation = "The host spends " + pct(x.m.enqueue) +
                  " of the step inside launch and copy calls; between them, " +
                  host_time_text(x.m) + "; it waited for the GPU " + pct(x.m.wait) + ".";
  if (!x.m.launch_where.empty())
    c.explanation += " " + format_count(x.m.launch_site_calls) + " of the " +
                     format_count(x.m.launches) + " launches of the steady steps come from " +
                     x.m.launch_where + ".";
  c.timeline.push_back({x.layer(""), "launch",
                        format_count(x.m.launches_per_step) + " launches per step, " +
                            pct(x.m.enqueue) + " of the step enqueueing" + from,
                        0});
  if (!kernels.empty()) {
    c.explanation += " Most launched: " + kernels + ".";
    c.timeline.push_back({x.layer(""), "launch", kernels, 0});
  }
  if (k && k->unnamed_launches)
    c.explanation +=
        " " + format_count(k->unnamed_launches) + " of its " + format_count(k->launches) +
        " launches have no kernel name: " + unnamed_cause(x.a.kernels, k->unnamed_functions) + ".";
  if (x.m.launch_stack)
    c.stacks.push_back(x.located(x.m.launch_stack, StackCounts::kSiteCalls, x.m.launch_site_calls,
                                 x.m.launches, 0, x.m.launch_tid));
  c.fixes = {"Replay the step as one graph (CUDA graphs; torch.compile mode=\"reduce-overhead\")" +
                 (x.m.launch_where.empty()
                      ? std::string()
                      : ": the launches" + from.substr(from.find(" from ")) + " first"),
             "Fuse small operations (torch.compile, fused optimizers) or raise the batch size so "
             "each kernel does more work"};
  out.push_back(std::move(c));
}

bool is_step_chain(const Chain& c) {
  static const std::set<std::string> kRules = {
      "data_loader_starvation", "host_bound",  "blocking_io", "host_wait", "hidden_sync",
      "allocator_churn",        "launch_bound"};
  return kRules.count(c.rule) || c.id.rfind("cpu_contention:steps:", 0) == 0;
}

}  // namespace

void rule_step_faults(TraceSource& source, const Analysis& a, std::vector<Chain>& out) {
  for (const StepSeries& s : a.steps.processes) {
    if (s.cadence != Cadence::kSync && s.cadence != Cadence::kBursts) continue;
    if (s.summary.steps < kMinSteadySteps || !s.summary.total_ns) continue;
    Context x{a, source, s, s.summary, a.process_label(s.pid), "", "", {}, {}};
    // The process's main layer: the api of its most frequent top-level call.
    if (!s.ops.empty()) x.api = s.ops.front().api;
    for (const OpStats& st : a.stats.per_process)
      if (st.key.pid == s.pid && st.key.api == x.api) x.vendor = st.key.vendor;
    for (const ForkEdge& f : a.host.forks)
      if (f.parent == s.pid) x.workers.push_back(f.child_comm);
    for (const SiteCount& site : s.sites)
      x.hidden_site.push_back(step_rules::hidden_sync_site(site, s.summary));
    step_rules::gap_rules(x, out);
    hidden_sync(x, out);
    allocator_churn(x, out);
    launch_bound(x, out);
  }
}

void apply_step_phases(Analysis& a) {
  std::set<uint32_t> hidden;
  for (const Chain& c : a.chains)
    if (c.rule == "hidden_sync") hidden.insert(c.pids.begin(), c.pids.end());
  std::erase_if(a.chains, [&](const Chain& c) {
    return c.rule == "repeated_sync" && c.pids.size() == 1 && hidden.count(c.pids[0]);
  });
  // A straggler rank's step findings are why it is late: they join its straggler chain.
  std::set<size_t> folded;
  for (Chain& st : a.chains) {
    if (st.rule != "collective_straggler") continue;
    for (size_t i = 0; i < a.chains.size(); ++i) {
      const Chain& c = a.chains[i];
      // The straggler is the rank its summary names ("... pid 5005) arrives last"); the chain's
      // pids are all ranks of the communicator.
      if (!is_step_chain(c) || c.pids.size() != 1 ||
          st.summary.find("pid " + std::to_string(c.pids[0]) + ")") == std::string::npos)
        continue;
      st.timeline.push_back({"STEPS", c.rule, c.summary, 0});
      for (const auto& f : c.fixes)
        if (std::find(st.fixes.begin(), st.fixes.end(), f) == st.fixes.end()) st.fixes.push_back(f);
      folded.insert(i);
    }
  }
  for (auto it = folded.rbegin(); it != folded.rend(); ++it)
    a.chains.erase(a.chains.begin() + long(*it));
  // Faults are faults in any phase: a device fault surfacing at step 3 is not model loading, and
  // an out-of-memory at step 5,000 was called "(warm-up)" and LOW because its op's slowest
  // calls (a caching allocator's allocations) all came in warm-up. Only how fast things ran is
  // judged by phase.
  static const std::set<std::string> kFaults = {"failed_calls", "gpu_oom",   "oom_kill",
                                                "device_error", "hung_call", "collective_hang",
                                                "fabric_errors"};
  for (Chain& c : a.chains) {
    if (is_step_chain(c) || c.pids.size() != 1 || kFaults.count(c.rule)) continue;
    const StepSeries* s = a.steps.find(c.pids[0]);
    if (!s || (s->cadence != Cadence::kSync && s->cadence != Cadence::kBursts)) continue;
    // The chain's evidence: its op's slowest calls, or its time window.
    const OpStats* op = nullptr;
    for (const OpStats& st : a.stats.per_process)
      if (st.key.pid == c.pids[0] && st.key.op == c.op) op = &st;
    bool warm = false;
    if (op && !op->tail_windows.empty()) {
      size_t n = 0;
      for (const TailWindow& w : op->tail_windows) n += s->in_warmup(w.start);
      warm = 2 * n >= op->tail_windows.size();
    } else {
      warm = c.window_end > c.window_start && c.window_end <= s->warmup_end_ns;
    }
    if (!warm) continue;
    c.severity = Severity::kLow;
    c.score *= 1e-6;  // below the steady-phase findings of the same severity
    c.summary += " (warm-up)";
    c.warmup = true;
    c.root_cause =
        "During warm-up (imports, model load, first iterations), not the training "
        "steps: " +
        c.root_cause;
  }
}

}  // namespace ingero::engine

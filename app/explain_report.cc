#include "app/explain_report.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <set>

#include "engine/loss_notes.h"

namespace ingero::app {
namespace {

using engine::format_count;
using engine::format_duration;

std::string pad(std::string s, size_t w) {
  if (s.size() < w) s += std::string(w - s.size(), ' ');
  return s;
}
std::string lpad(const std::string& s, size_t w) {
  return s.size() < w ? std::string(w - s.size(), ' ') + s : s;
}

// The GPU API table. Columns are as wide as their widest cell, at least the usual width, and
// two spaces apart at the least: a 7-digit error count or a long op name never runs into its
// neighbour.
void print_op_table(std::ostream& out, const std::vector<const engine::OpStats*>& ops,
                    const char* indent) {
  static const char* kHead[] = {"op", "api", "calls", "avg", "p50", "p95", "p99", "max", "errors"};
  constexpr size_t kCols = std::size(kHead);
  static const size_t kMinWidth[kCols] = {26, 14, 9, 9, 9, 9, 9, 9, 8};
  std::vector<std::array<std::string, kCols>> rows;
  rows.reserve(ops.size());
  for (const auto* s : ops) {
    auto dur = [s](uint64_t ns) { return s->timed() ? format_duration(ns) : std::string("-"); };
    rows.push_back({s->key.op, s->key.api, format_count(s->count), dur(uint64_t(s->avg_ns())),
                    dur(s->p50), dur(s->p95), dur(s->p99), dur(s->max_ns),
                    format_count(s->errors + s->unfinished)});
  }
  std::array<size_t, kCols> w;
  for (size_t i = 0; i < kCols; ++i) {
    w[i] = kMinWidth[i];
    for (const auto& r : rows) {
      // The two left columns are padded on the right, the figures on the left.
      size_t need = r[i].size() + 2;
      w[i] = std::max(w[i], need);
    }
  }
  auto line = [&](const auto& cells) {
    out << indent;
    for (size_t i = 0; i < kCols; ++i) out << (i < 2 ? pad(cells[i], w[i]) : lpad(cells[i], w[i]));
    out << "\n";
  };
  line(kHead);
  for (const auto& r : rows) line(r);
}

// "    kernels per step: 400 × mul, 400 × add, 3 others (12 launches unnamed)".
void print_step_kernels(std::ostream& out, const engine::ProcessKernels& k) {
  std::vector<const engine::KernelCount*> shown;
  for (const auto& c : k.kernels)
    if (c.per_step_median) shown.push_back(&c);
  std::stable_sort(shown.begin(), shown.end(),
                   [](auto* x, auto* y) { return x->per_step_median > y->per_step_median; });
  if (shown.empty() && !k.unnamed_launches && !k.folded_launches) return;
  constexpr size_t kShown = 6;
  out << "    kernels per step:";
  for (size_t i = 0; i < shown.size() && i < kShown; ++i)
    out << (i ? ", " : " ") << format_count(shown[i]->per_step_median) << " \u00d7 "
        << shown[i]->label();
  if (shown.size() > kShown) out << ", " << shown.size() - kShown << " more";
  if (shown.empty())
    out << (k.steady_steps && !k.whole_steps ? " not known (every steady step has folded launches)"
                                             : " none in steady steps");
  if (k.unnamed_launches)
    out << " (" << format_count(k.unnamed_launches) << " of " << format_count(k.launches)
        << " launches have no kernel name)";
  // Runs that kept no kernel (files before runs kept their kernels' counts, runs of more
  // kernels than the store keeps): the counts above leave them out, and say so (a trace
  // recorded with --keep-all keeps each).
  if (k.folded_launches)
    out << "; not counted: " << format_count(k.folded_launches) << " of "
        << format_count(k.folded_launches + k.launches)
        << " launches, folded into runs that kept no kernel (--keep-all keeps each kernel)";
  // The per-step figures are those of the steps no such run, nor a run across a step's edge,
  // falls in (engine/kernels.h).
  if (std::string whole = engine::whole_steps_text(k); k.whole_steps && !whole.empty())
    out << "; per step: " << whole;  // none at all is said above
  out << "\n";
}

}  // namespace

void print_chain(std::ostream& out, const engine::Chain& c) {
  out << "\n[" << engine::severity_name(c.severity) << "] " << c.summary << "\n";
  if (!c.timeline.empty()) {
    out << "  Timeline:\n";
    for (const auto& t : c.timeline) out << "    [" << pad(t.layer, 6) << "] " << t.detail << "\n";
  }
  for (const auto& st : c.stacks) {
    // What the figures count is the rule's own set (engine::StackCounts).
    std::string counts = engine::stack_counts_text(st);
    out << "  Stack (" << counts << (counts.empty() ? "" : ", ");
    out << "pid " << st.pid << " tid " << st.tid << "):\n";
    for (const auto& f : st.frames) out << "    " << f << "\n";
  }
  out << "  Root cause: " << c.root_cause << "\n";
  if (!c.explanation.empty()) out << "  Why: " << c.explanation << "\n";
  for (size_t i = 0; i < c.fixes.size(); ++i)
    out << (i ? "       " : "  Fix: ") << c.fixes[i] << "\n";
}

std::string folded_tails_line(const std::vector<const engine::Chain*>& tails) {
  if (tails.empty()) return "";
  std::set<uint32_t> pids;
  for (const auto* c : tails) pids.insert(c->pids.begin(), c->pids.end());
  std::string line = format_count(tails.size()) + (tails.size() == 1 ? " op has" : " ops have") +
                     " tail latency with no host-side cause:";
  for (size_t i = 0; i < tails.size(); ++i) {
    const engine::Chain& c = *tails[i];
    line += (i ? ", " : " ") + c.op;
    // Several processes: say whose op it is.
    if (pids.size() > 1 && c.pids.size() == 1) line += " (pid " + std::to_string(c.pids[0]) + ")";
    line += " p99 " + format_duration(c.p99_ns) + (c.warmup ? " (warm-up)" : "");
  }
  return line + "; explain --all-chains shows each";
}

void print_chains(std::ostream& out, const std::vector<engine::Chain>& chains, bool all) {
  size_t high = 0, med = 0, low = 0;
  std::vector<const engine::Chain*> shown, folded;
  for (const auto& c : chains) {
    (c.severity == engine::Severity::kHigh     ? high
     : c.severity == engine::Severity::kMedium ? med
                                               : low)++;
    (!all && engine::no_host_cause(c) ? folded : shown).push_back(&c);
  }
  out << "CAUSAL CHAINS \u2014 " << chains.size() << " (" << high << " HIGH, " << med << " MEDIUM, "
      << low << " LOW";
  if (!folded.empty()) out << "; " << folded.size() << " folded into the last line";
  out << ")\n";
  if (chains.empty()) out << "  No causal chain: nothing in this window needs explaining.\n";
  for (const auto* c : shown) print_chain(out, *c);
  if (!folded.empty()) out << "\n" << folded_tails_line(folded) << "\n";
}

// The report opens with where each GPU process's training steps go: "median step 16.1 ms:
// GPU idle 80%: host on-CPU in SlowDS.__getitem__ (faults.py:15)".
static void print_steps(std::ostream& out, const engine::Analysis& a) {
  // A host of many short-lived GPU processes (health checks, scripts) had a line each: 5,000
  // lines before the chains. The processes with the most steps are shown, in pid order.
  constexpr size_t kMaxProcesses = 20;
  std::vector<const engine::StepSeries*> shown;
  for (const auto& s : a.steps.processes)
    if (s.summary.steps != 0 && !s.summary.text.empty()) shown.push_back(&s);
  const size_t total = shown.size();
  if (total > kMaxProcesses) {
    std::stable_sort(shown.begin(), shown.end(), [](const auto* x, const auto* y) {
      return x->summary.steps > y->summary.steps;
    });
    shown.resize(kMaxProcesses);
    std::stable_sort(shown.begin(), shown.end(),
                     [](const auto* x, const auto* y) { return x->pid < y->pid; });
  }
  if (shown.empty()) return;
  out << "Training steps\n";
  for (const engine::StepSeries* sp : shown) {
    const auto& s = *sp;
    out << "  " << a.process_name(s.pid) << " (pid " << s.pid << "): " << s.summary.text << "\n";
    if (const engine::ProcessKernels* k = a.kernels.find(s.pid)) print_step_kernels(out, *k);
    if (s.after_steps_said()) {
      const int64_t end = s.steps.back().end_ns;
      char from[32];  // Unix seconds, as --from takes them
      std::snprintf(from, sizeof from, "%lld.%09lld", static_cast<long long>(end / 1'000'000'000),
                    static_cast<long long>(end % 1'000'000'000));
      out << "    steps end at " << format_wall(end) << ": its "
          << format_count(s.calls_after_steps) << " later GPU calls, to "
          << format_wall(s.last_call_ns)
          << ", are in no step (another loop, at another site; explain --from " << from
          << " looks at them alone)\n";
    }
    if (s.calls_dropped)
      out << "    steps modelled until " << format_wall(s.last_call_ns)
          << " only: " << format_count(s.calls_dropped)
          << " later GPU calls are over the model's memory cap (explain --from covers them)\n";
  }
  if (total > shown.size())
    out << "  " << format_count(total - shown.size()) << " more processes with fewer steps: "
        << "explain --pid PID for one, --json for all\n";
  out << "\n";
}

// Per tenant (explain --group-by): GPU API time, preempted time, and who preempted whom.
static void print_tenants(std::ostream& out, const engine::Analysis& a, engine::TenantGrouping g) {
  engine::TenantReport r = engine::tenant_report(a, g);
  out << "\nTENANTS (by " << engine::grouping_name(g) << ")\n";
  if (!r.named)
    out << "  No pod or container names in this trace: tenants are cgroups (docs/schema.md, "
           "cgroup_metadata).\n";
  if (r.tenants.empty()) {
    out << "  No GPU calls or preemptions in this window.\n";
    return;
  }
  out << "  " << pad("tenant", 48) << lpad("GPU calls", 10) << lpad("API time", 10)
      << lpad("preempted", 11) << lpad("by others", 11) << lpad("took", 10) << "\n";
  for (const auto& t : r.tenants) {
    std::string name = t.name;
    if (!t.gpu_pids.empty()) {
      name += " (pid";
      for (size_t i = 0; i < t.gpu_pids.size() && i < 3; ++i)
        name += (i ? ", " : " ") + std::to_string(t.gpu_pids[i]);
      name += t.gpu_pids.size() > 3 ? ", ...)" : ")";
    }
    // A long name (a cgroup path) gets a line of its own.
    if (name.size() > 47) {
      out << "  " << name << "\n";
      name.clear();
    }
    out << "  " << pad(name, 48) << lpad(format_count(t.calls), 10)
        << lpad(format_duration(t.api_ns), 10) << lpad(format_duration(t.preempted_ns), 11)
        << lpad(format_duration(t.preempted_by_others_ns), 11)
        << lpad(format_duration(t.preempting_ns), 10) << "\n";
  }
  if (r.tenants_omitted) out << "  (" << r.tenants_omitted << " more tenants)\n";
  if (r.across.empty()) return;
  out << "  Preempted across tenants:\n";
  for (const auto& x : r.across)
    out << "    " << x.victim << " lost " << format_duration(x.ns) << " (" << format_count(x.count)
        << (x.count == 1 ? " preemption) to " : " preemptions) to ") << x.by << ", mostly "
        << x.top_comm << " (pid " << x.top_pid << ")\n";
  if (r.across_omitted) out << "    (" << r.across_omitted << " more)\n";
}

void print_report(std::ostream& out, const engine::Analysis& a, const ReportOptions& o) {
  // Losses come first: every figure below is a lower bound when calls are missing.
  if (std::string lost = engine::losses_line(a.losses); !lost.empty()) out << lost << "\n";
  if (std::string unnamed = engine::unnamed_kernels_line(a.kernels); !unnamed.empty())
    out << unnamed << "\n";
  out << "INGERO INCIDENT REPORT";
  if (!o.title.empty()) out << " \u2014 " << o.title;
  out << "\n";
  if (!o.subtitle.empty()) out << o.subtitle << "\n";
  double secs = a.span.second > a.span.first ? double(a.span.second - a.span.first) / 1e9 : 0;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.0f s", secs);
  // Under a second, "0 s" said nothing: the span as a duration ("34.5ms").
  std::string span = secs >= 1 || secs == 0
                         ? std::string(buf)
                         : format_duration(uint64_t(a.span.second - a.span.first));
  out << format_count(a.events) << " events over " << span;
  if (a.span.first)
    out << " (" << format_wall(a.span.first) << " \u2192 " << format_wall(a.span.second) << ")";
  if (a.window.pid) out << ", pid " << *a.window.pid;
  out << "\n\n";
  print_steps(out, a);

  std::vector<const engine::OpStats*> overall;
  for (const auto& s : a.stats.overall) overall.push_back(&s);
  std::sort(overall.begin(), overall.end(), [](auto* x, auto* y) { return x->sum_ns > y->sum_ns; });
  if (!overall.empty()) {
    out << "GPU API calls\n";
    print_op_table(out, overall, "  ");
    if (std::any_of(overall.begin(), overall.end(), [](auto* s) { return !s->timed(); }))
      out << "  -: no call of the op was timed (launches seen at entry only: one in "
             "--launch-timing per thread is timed, among all its launches; 1 times every one)\n";
    if (a.stats.sketch_quantiles)
      // Sketches where the window has launches seen at entry only (no duration of their own)
      // or folded into runs (SqlTraceSource::has_folded_calls): either, not always both.
      out << "  p50/p95/p99 of the timed calls, from the per-second sketches, within 1%: the "
             "window has launches seen at entry only or folded into runs (a trace recorded with "
             "--launch-timing 1 --keep-all gives them exact)\n";
    out << "\n";
  }
  if (!a.host.ops.empty()) {
    out << "Host events\n";
    for (const auto& [name, h] : a.host.ops) {
      out << "  " << pad(name, 24) << lpad(format_count(h.count), 9);
      if (h.sum_ns)
        out << "  avg " << format_duration(h.sum_ns / h.count) << ", max "
            << format_duration(h.max_ns);
      out << "\n";
    }
    if (a.host.offcpu_dropped) out << "  " << engine::offcpu_kept_line(a.host) << "\n";
    out << "\n";
  }
  print_chains(out, a.chains, o.all_chains);
  if (o.group_by) print_tenants(out, a, *o.group_by);
  if (o.per_process && !a.processes.empty()) {
    out << "\nPER-PROCESS BREAKDOWN\n";
    for (const auto& p : a.processes) {
      std::string tenant = engine::tenant_label(p.cgroup);
      out << "\n"
          << p.name << " (pid " << p.pid << ", " << p.role << ")"
          << (tenant.empty() ? "" : " in " + tenant) << "\n";
      if (!p.ops.empty()) print_op_table(out, p.ops, "  ");
      out << "  " << format_count(p.switches) << " context switches ("
          << format_count(p.involuntary) << " preempted), " << format_duration(p.off_cpu_ns)
          << " off-CPU, worst stall " << format_duration(p.max_off_cpu_ns) << "; "
          << format_count(p.page_allocs) << " page allocations ("
          << engine::format_bytes(p.page_bytes) << "); " << format_count(p.forks) << " forks\n";
    }
  }
}

}  // namespace ingero::app

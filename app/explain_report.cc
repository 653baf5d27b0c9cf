#include "app/explain_report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

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

void print_op_table(std::ostream& out, const std::vector<const engine::OpStats*>& ops,
                    const char* indent) {
  out << indent << pad("op", 26) << pad("api", 14) << lpad("calls", 9) << lpad("avg", 9)
      << lpad("p50", 9) << lpad("p95", 9) << lpad("p99", 9) << lpad("max", 9) << lpad("errors", 8)
      << "\n";
  for (const auto* s : ops) {
    out << indent << pad(s->key.op, 26) << pad(s->key.api, 14) << lpad(format_count(s->count), 9)
        << lpad(format_duration(uint64_t(s->avg_ns())), 9) << lpad(format_duration(s->p50), 9)
        << lpad(format_duration(s->p95), 9) << lpad(format_duration(s->p99), 9)
        << lpad(format_duration(s->max_ns), 9) << lpad(format_count(s->errors + s->unfinished), 8)
        << "\n";
  }
}

}  // namespace

void print_chain(std::ostream& out, const engine::Chain& c) {
  out << "\n[" << engine::severity_name(c.severity) << "] " << c.summary << "\n";
  if (!c.timeline.empty()) {
    out << "  Timeline:\n";
    for (const auto& t : c.timeline) out << "    [" << pad(t.layer, 6) << "] " << t.detail << "\n";
  }
  for (const auto& st : c.stacks) {
    // A chain's slowest calls (with the worst), or a site's calls (a launch site: no worst).
    out << "  Stack (";
    if (st.examined && st.worst_ns)
      out << st.calls << " of the " << st.examined << " slowest calls, worst "
          << format_duration(st.worst_ns) << ", ";
    else if (st.examined)
      out << format_count(st.calls) << " of " << format_count(st.examined) << " calls, ";
    out << "pid " << st.pid << " tid " << st.tid << "):\n";
    for (const auto& f : st.frames) out << "    " << f << "\n";
  }
  out << "  Root cause: " << c.root_cause << "\n";
  if (!c.explanation.empty()) out << "  Why: " << c.explanation << "\n";
  for (size_t i = 0; i < c.fixes.size(); ++i)
    out << (i ? "       " : "  Fix: ") << c.fixes[i] << "\n";
}

// The report opens with where each GPU process's training steps go: "median step 16.1 ms:
// GPU idle 80%: host on-CPU in SlowDS.__getitem__ (faults.py:15)".
static void print_steps(std::ostream& out, const engine::Analysis& a) {
  bool any = false;
  for (const auto& s : a.steps.processes) {
    if (s.summary.steps == 0 || s.summary.text.empty()) continue;
    if (!any) out << "Training steps\n";
    any = true;
    out << "  " << a.process_name(s.pid) << " (pid " << s.pid << "): " << s.summary.text << "\n";
    if (s.calls_dropped)
      out << "    steps modelled until " << format_wall(s.last_call_ns)
          << " only: " << format_count(s.calls_dropped)
          << " later GPU calls are over the model's memory cap (explain --from covers them)\n";
  }
  if (any) out << "\n";
}

void print_report(std::ostream& out, const engine::Analysis& a, const ReportOptions& o) {
  // Losses come first: every figure below is a lower bound when calls are missing.
  if (std::string lost = engine::losses_line(a.losses); !lost.empty()) out << lost << "\n";
  out << "INGERO INCIDENT REPORT";
  if (!o.title.empty()) out << " \u2014 " << o.title;
  out << "\n";
  if (!o.subtitle.empty()) out << o.subtitle << "\n";
  double secs = a.span.second > a.span.first ? double(a.span.second - a.span.first) / 1e9 : 0;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.0f s", secs);
  out << format_count(a.events) << " events over " << buf;
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
    if (a.stats.sketch_quantiles)
      out << "  p50/p95/p99 from the per-second sketches, within 1%: tiered retention folded "
             "launches into runs (a trace recorded with --keep-all gives them exact)\n";
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
    out << "\n";
  }
  size_t high = 0, med = 0, low = 0;
  for (const auto& c : a.chains)
    (c.severity == engine::Severity::kHigh     ? high
     : c.severity == engine::Severity::kMedium ? med
                                               : low)++;
  out << "CAUSAL CHAINS \u2014 " << a.chains.size() << " (" << high << " HIGH, " << med
      << " MEDIUM, " << low << " LOW)\n";
  if (a.chains.empty()) out << "  No causal chain: nothing in this window needs explaining.\n";
  for (const auto& c : a.chains) print_chain(out, c);
  if (o.per_process && !a.processes.empty()) {
    out << "\nPER-PROCESS BREAKDOWN\n";
    for (const auto& p : a.processes) {
      out << "\n" << p.name << " (pid " << p.pid << ", " << p.role << ")\n";
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

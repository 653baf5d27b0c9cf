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

std::string format_wall(int64_t ns) {
  time_t t = time_t(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

void print_chain(std::ostream& out, const engine::Chain& c) {
  out << "\n[" << engine::severity_name(c.severity) << "] " << c.summary << "\n";
  if (!c.timeline.empty()) {
    out << "  Timeline:\n";
    for (const auto& t : c.timeline) out << "    [" << pad(t.layer, 6) << "] " << t.detail << "\n";
  }
  for (const auto& st : c.stacks) {
    out << "  Stack (" << st.calls << " of the " << st.examined << " slowest calls, worst "
        << format_duration(st.worst_ns) << ", pid " << st.pid << " tid " << st.tid << "):\n";
    for (const auto& f : st.frames) out << "    " << f << "\n";
  }
  out << "  Root cause: " << c.root_cause << "\n";
  if (!c.explanation.empty()) out << "  Why: " << c.explanation << "\n";
  for (size_t i = 0; i < c.fixes.size(); ++i)
    out << (i ? "       " : "  Fix: ") << c.fixes[i] << "\n";
}

void print_report(std::ostream& out, const engine::Analysis& a, const ReportOptions& o) {
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

  std::vector<const engine::OpStats*> overall;
  for (const auto& s : a.stats.overall) overall.push_back(&s);
  std::sort(overall.begin(), overall.end(), [](auto* x, auto* y) { return x->sum_ns > y->sum_ns; });
  if (!overall.empty()) {
    out << "GPU API calls\n";
    print_op_table(out, overall, "  ");
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

nlohmann::json op_stats_json(const engine::OpStats& s) {
  nlohmann::json j = {{"op", s.key.op},
                      {"vendor", s.key.vendor},
                      {"api", s.key.api},
                      {"kind", std::string(hal::kind_name(s.key.kind))},
                      {"calls", s.count},
                      {"errors", s.errors},
                      {"unfinished", s.unfinished},
                      {"avg_ns", uint64_t(s.avg_ns())},
                      {"min_ns", s.min_ns},
                      {"p50_ns", s.p50},
                      {"p95_ns", s.p95},
                      {"p99_ns", s.p99},
                      {"max_ns", s.max_ns},
                      {"bytes", s.bytes},
                      {"off_cpu_ns", s.off_cpu_ns}};
  if (s.key.pid) j["pid"] = s.key.pid;
  return j;
}

nlohmann::json process_json(const engine::ProcessReport& p) {
  return {{"pid", p.pid},
          {"name", p.name},
          {"role", p.role},
          {"parent", p.parent},
          {"calls", p.calls},
          {"switches", p.switches},
          {"involuntary", p.involuntary},
          {"off_cpu_ns", p.off_cpu_ns},
          {"max_off_cpu_ns", p.max_off_cpu_ns},
          {"page_allocs", p.page_allocs},
          {"page_bytes", p.page_bytes},
          {"forks", p.forks},
          {"block_ios", p.block_ios}};
}

nlohmann::json chain_json(const engine::Chain& c) {
  nlohmann::json stacks = nlohmann::json::array();
  for (const auto& s : c.stacks)
    stacks.push_back({{"stack_id", s.stack_id},
                      {"calls", s.calls},
                      {"examined", s.examined},
                      {"worst_ns", s.worst_ns},
                      {"pid", s.pid},
                      {"tid", s.tid},
                      {"frames", s.frames}});
  nlohmann::json tl = nlohmann::json::array();
  for (const auto& t : c.timeline)
    tl.push_back({{"layer", t.layer}, {"op", t.op}, {"detail", t.detail}, {"dur_us", t.dur_us}});
  nlohmann::json j = {{"id", c.id},
                      {"severity", engine::severity_name(c.severity)},
                      {"rule", c.rule},
                      {"op", c.op},
                      {"vendor", c.vendor},
                      {"api", c.api},
                      {"pids", c.pids},
                      {"summary", c.summary},
                      {"root_cause", c.root_cause},
                      {"explanation", c.explanation},
                      {"fixes", c.fixes},
                      {"timeline", tl},
                      {"stacks", stacks},
                      {"p50_ns", c.p50_ns},
                      {"p99_ns", c.p99_ns},
                      {"tail_ratio", c.tail_ratio},
                      {"window_start_ns", c.window_start},
                      {"window_end_ns", c.window_end}};
  if (!c.node.empty()) j["node"] = c.node;
  return j;
}

nlohmann::json report_json(const engine::Analysis& a, const ReportOptions& o) {
  nlohmann::json j;
  j["trace"] = o.title;
  if (!o.subtitle.empty()) j["note"] = o.subtitle;
  j["events"] = a.events;
  j["window"] = {
      {"start_ns", a.span.first},
      {"end_ns", a.span.second},
      {"seconds", a.span.second > a.span.first ? double(a.span.second - a.span.first) / 1e9 : 0.0}};
  if (a.window.pid) j["window"]["pid"] = *a.window.pid;
  j["stats"] = nlohmann::json::array();
  for (const auto& s : a.stats.overall) j["stats"].push_back(op_stats_json(s));
  j["host"] = nlohmann::json::object();
  for (const auto& [name, h] : a.host.ops)
    j["host"][name] = {
        {"count", h.count}, {"avg_ns", h.count ? h.sum_ns / h.count : 0}, {"max_ns", h.max_ns}};
  j["chains"] = nlohmann::json::array();
  for (const auto& c : a.chains) j["chains"].push_back(chain_json(c));
  if (o.per_process) {
    j["processes"] = nlohmann::json::array();
    for (const auto& p : a.processes) {
      nlohmann::json ops = nlohmann::json::array();
      for (const auto* s : p.ops) ops.push_back(op_stats_json(*s));
      nlohmann::json pj = process_json(p);
      pj["ops"] = std::move(ops);
      j["processes"].push_back(std::move(pj));
    }
  }
  return j;
}

}  // namespace ingero::app

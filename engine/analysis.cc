#include "engine/analysis.h"

#include <algorithm>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "engine/hangs.h"
#include "engine/rules_steps.h"
#include "engine/tenants.h"

namespace ingero::engine {

std::string layer_of(std::string_view api) {
  std::string s(api);
  constexpr std::string_view kRuntime = "_runtime";
  if (s.size() > kRuntime.size() &&
      s.compare(s.size() - kRuntime.size(), kRuntime.size(), kRuntime) == 0)
    s.resize(s.size() - kRuntime.size());
  for (auto& c : s) c = char(toupper(static_cast<unsigned char>(c)));
  return s.empty() ? "GPU" : s;
}

std::string Analysis::process_name(uint32_t pid) const {
  if (auto it = names.find(pid); it != names.end() && !it->second.name.empty())
    return it->second.name;
  if (auto it = host.per_pid.find(pid); it != host.per_pid.end() && !it->second.comm.empty())
    return it->second.comm;
  return "pid " + std::to_string(pid);
}

std::string Analysis::process_label(uint32_t pid) const {
  std::string name = process_name(pid), id = "pid " + std::to_string(pid);
  return name == id ? id : name + " (" + id + ")";
}

bool is_tracer(const Analysis& a, uint32_t pid) { return pid && a.tracer_pids.count(pid); }

std::string preemptor_label(const Analysis& a, const Preemptor& p) {
  if (!is_tracer(a, p.pid)) return p.comm + " (pid " + std::to_string(p.pid) + ")";
  return "the tracer itself (" + p.comm + ", pid " + std::to_string(p.pid) + ", " +
         format_duration(p.off_ns) + " of CPU taken)";
}

std::string name_tracer(const Analysis& a, const std::vector<Preemptor>& ps, std::string text) {
  for (const Preemptor& p : ps) {
    if (!is_tracer(a, p.pid)) continue;
    std::string plain = p.comm + " (pid " + std::to_string(p.pid) + ")";
    if (size_t at = text.find(plain); at != std::string::npos)
      text.replace(at, plain.size(),
                   "the tracer itself (" + p.comm + ", pid " + std::to_string(p.pid) + ")");
  }
  return text;
}

std::string tracer_fix(const Preemptor& p) {
  return "The tracer (" + p.comm + ", pid " + std::to_string(p.pid) + ") took " +
         format_duration(p.off_ns) +
         " of CPU from these calls: give it a core of its own (taskset -c) away from the "
         "GPU-feeding threads, or trace with less (--no-stack, fewer backends)";
}

namespace {

void build_breakdown(Analysis& a) {
  std::map<uint32_t, ProcessReport> rep;
  for (const OpStats& s : a.stats.per_process) {
    ProcessReport& r = rep[s.key.pid];
    r.pid = s.key.pid;
    r.role = "gpu";
    r.ops.push_back(&s);
    r.calls += s.count;
  }
  // Children forked by GPU processes (DataLoader workers and the like).
  for (const ForkEdge& f : a.host.forks) {
    if (!rep.count(f.parent) || rep.count(f.child)) continue;
    ProcessReport& r = rep[f.child];
    r.pid = f.child;
    r.parent = f.parent;
    r.role = "worker of " + std::to_string(f.parent);
    if (r.name.empty()) r.name = f.child_comm;
  }
  for (auto& [pid, r] : rep) {
    if (auto it = a.host.per_pid.find(pid); it != a.host.per_pid.end()) {
      const PidHost& h = it->second;
      r.off_cpu_ns = h.off_cpu_ns;
      r.max_off_cpu_ns = h.max_off_cpu_ns;
      r.switches = h.switches;
      r.involuntary = h.involuntary;
      r.page_allocs = h.page_allocs;
      r.page_bytes = h.page_bytes;
      r.forks = h.forks;
      r.block_ios = h.block_ios;
    }
    std::string n = a.process_name(pid);
    if (r.name.empty() || n.rfind("pid ", 0) != 0) r.name = n;
    r.cgroup_id = process_cgroup(a, pid);
    if (auto c = a.host.cgroups.find(r.cgroup_id); c != a.host.cgroups.end()) r.cgroup = c->second;
    std::sort(r.ops.begin(), r.ops.end(),
              [](const OpStats* x, const OpStats* y) { return x->sum_ns > y->sum_ns; });
    a.processes.push_back(std::move(r));
  }
  std::sort(a.processes.begin(), a.processes.end(),
            [](const ProcessReport& x, const ProcessReport& y) {
              if ((x.role == "gpu") != (y.role == "gpu")) return x.role == "gpu";
              return x.calls != y.calls ? x.calls > y.calls : x.switches > y.switches;
            });
}

// What analyze() reads besides the calls: host context, the on-CPU samples, the event count and
// what the devices reported. None of it depends on the calls: where the source allows it, it is
// read on a second connection while the calls are read.
struct HostReads {
  HostContext host;
  CpuSamples samples;
  uint64_t events = 0;
  DeviceBusy device;
  std::vector<hal::DeviceEvent> device_events;
};

HostReads read_host(TraceSource& s, const Window& window, const Window& recent) {
  HostReads r{collect_host_context(s, window, recent.from_ns),
              read_cpu_samples(s, recent),
              s.event_count(window),
              {},
              s.device_events(window)};
  s.device_samples(window, [&](const hal::DeviceSample& x) { r.device.add(x); });
  r.device.done();
  return r;
}

// The window's events span: from its first call to its last (`first`, `last`: none when
// INT64_MAX, INT64_MIN), widened to the trace's own span and bounded by the window.
// A window wholly before or after the trace holds nothing: its span is then the window's edge
// nearest the trace, an instant, never one that ends before it begins.
std::pair<int64_t, int64_t> events_span(int64_t first, int64_t last,
                                        std::pair<int64_t, int64_t> trace, const Window& window) {
  std::pair<int64_t, int64_t> s{
      std::max(first == INT64_MAX ? trace.first : std::min(first, trace.first), window.from_ns),
      std::min(last == INT64_MIN ? trace.second : std::max(last, trace.second), window.to_ns)};
  if (s.second < s.first)
    s.first = s.second = window.to_ns < trace.first ? window.to_ns : window.from_ns;
  return s;
}

// The step model words preemptors without knowing the tracer: its texts name it here.
void name_tracer_in_steps(Analysis& a) {
  for (StepSeries& s : a.steps.processes) {
    s.summary.preempted_by = name_tracer(a, s.summary.preemptors, s.summary.preempted_by);
    s.summary.text = name_tracer(a, s.summary.preemptors, s.summary.text);
  }
}

// HIGH first; within a severity, a tail the host does not explain after the findings that say
// what to change (the text report folds those tails into its last line; the JSON, MCP and the
// HTML report list them in this order too), then by score; equal chains keep the order in which
// the rules found them.
void rank_chains(std::vector<Chain>& chains) {
  std::stable_sort(chains.begin(), chains.end(), [](const Chain& x, const Chain& y) {
    if (x.severity != y.severity) return x.severity > y.severity;
    if (no_host_cause(x) != no_host_cause(y)) return no_host_cause(y);
    return x.score > y.score;
  });
}

// Whatever happens in an analysis: nothing is left waiting for the counts, and the source calls
// nothing of the analysis after it.
struct Release {
  Release(TraceSource& s, const Window& w, std::promise<void>& c)
      : source(s), window(w), counted(c) {}
  Release(const Release&) = delete;
  Release& operator=(const Release&) = delete;
  TraceSource& source;
  const Window& window;
  std::promise<void>& counted;
  bool done = false;
  void counts_known() {
    done = true;
    counted.set_value();
  }
  ~Release() {
    source.when_calls_held(window, nullptr);
    if (!done) counted.set_value();
  }
};

// One analyze() call. Where the window's calls are in memory, the step model (which reads them,
// and stacks) runs beside the op statistics' quantile and tail passes, the rules that need no
// steps and read nothing but the calls, and the stack attribution of their chains; the others
// wait for it. It models once host context and the samples are read (`counted`).
// It fills `a`, which outlives it. The members are in the order in which they must be
// destroyed, last to first: the step model's and the host reads' threads are joined before what
// they read goes.
class AnalysisRun {
 public:
  AnalysisRun(TraceSource& source, const Window& window, const EngineOptions& opts, Analysis& a)
      : source_(source), window_(window), opts_(opts), a_(a) {}
  void run();

 private:
  void start_host_reads();
  void read_calls();
  StepModel model(const std::map<uint32_t, uint64_t>& per_pid, bool early);
  void counted(const std::vector<OpStats>& groups);
  void chains_from_calls();
  void join_step_model();
  void chains_from_steps();

  TraceSource& source_;
  const Window& window_;
  const EngineOptions& opts_;
  Analysis& a_;
  std::map<uint32_t, uint64_t> calls_per_pid_;
  Window recent_;
  std::unique_ptr<TraceSource> other_;
  std::future<HostReads> ahead_;
  HostReads h_;
  std::mutex stacks_lock_;  // the step model's threads and stack attribution read stacks
  std::promise<void> counted_done_;
  std::shared_future<void> host_known_ = counted_done_.get_future().share();
  std::map<uint32_t, uint64_t> held_per_pid_;  // for a model begun before the counts
  std::future<StepModel> steps_;
  std::optional<Release> release_;
  // Launch collapse and repeated syncs count the calls the statistics' tail pass reads.
  LaunchCollapseAndRepeatedSync launches_and_syncs_;
  FailedCalls failed_{source_};
  CallRider rider_{[this](const hal::Event& e) {
                     launches_and_syncs_.call(e);
                     failed_.call(e);
                   },
                   [this](const CallRun& r) {
                     launches_and_syncs_.run(r);
                     failed_.run(r);
                   }};
};

void AnalysisRun::run() {
  a_.window = window_;
  a_.names = source_.processes_of(window_.node);
  recent_ = window_;
  if (opts_.model_calls) recent_.from_ns = source_.recent_start(window_, opts_.model_calls);
  start_host_reads();
  read_calls();
  chains_from_calls();
  join_step_model();
  h_.samples = {};
  if (opts_.kernels) {
    a_.kernels = compute_kernels(source_, recent_, a_.steps, &stacks_lock_);
    apply_kernel_sites(a_.steps, a_.kernels);
  }
  chains_from_steps();
  rank_chains(a_.chains);
  attribute_stacks(source_, a_);
  a_.stats.kept.reset();  // only stack attribution reads them
  if (opts_.breakdown) build_breakdown(a_);
}

void AnalysisRun::start_host_reads() {
  other_ = source_.open_another();
  if (other_)
    ahead_ =
        std::async(std::launch::async, [this] { return read_host(*other_, window_, recent_); });
}

// The op statistics, and beside them the step model where the source allows it.
void AnalysisRun::read_calls() {
  release_.emplace(source_, window_, counted_done_);
  // Where the first read holds every call before this thread has passed them all to the op
  // statistics (a read split between two connections), the model starts then: its collection
  // of the calls runs beside the rest of that pass, not after it.
  source_.when_calls_held(window_, [this](const std::map<uint32_t, uint64_t>& per_pid) {
    held_per_pid_ = per_pid;
    steps_ = std::async(std::launch::async, [this] { return model(held_per_pid_, true); });
  });
  a_.stats = compute_op_stats(
      source_, window_, [this](const std::vector<OpStats>& groups) { counted(groups); }, &rider_);
  if (!steps_.valid()) a_.steps = model(calls_per_pid_, false);
}

StepModel AnalysisRun::model(const std::map<uint32_t, uint64_t>& per_pid, bool early) {
  std::function<void()> wait;
  if (early) wait = [this] { host_known_.wait(); };
  return compute_steps(source_, recent_, a_.host, opts_.model_bytes, per_pid, &h_.samples, 0,
                       &stacks_lock_, wait, &a_.device);
}

// The op statistics have counted the calls: the host reads are taken, and the step model starts
// if it has not and the source allows it.
void AnalysisRun::counted(const std::vector<OpStats>& groups) {
  h_ = other_ ? ahead_.get() : read_host(source_, window_, recent_);
  other_.reset();  // its errors become the source's
  a_.host = std::move(h_.host);
  a_.events = h_.events;
  a_.device = std::move(h_.device);
  a_.device_events = std::move(h_.device_events);
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const OpStats& s : groups) {
    if (!s.key.pid) continue;  // all processes
    calls_per_pid_[s.key.pid] += s.count;
    first = std::min(first, s.first_ts);
    last = std::max(last, s.last_ts);
  }
  // Read here: the step model reads stacks on this connection once it models.
  a_.losses = window_.node ? source_.node_losses(*window_.node) : source_.losses();
  a_.tracer_pids = source_.tracer_pids(window_.node);
  auto span = window_.node ? source_.node_span(*window_.node) : source_.time_span();
  a_.span = events_span(first, last, span, window_);
  release_->counts_known();
  if (!steps_.valid() && source_.concurrent_call_reads(window_))
    steps_ = std::async(std::launch::async, [this] { return model(calls_per_pid_, false); });
}

// The rules that need no steps.
void AnalysisRun::chains_from_calls() {
  rule_tail_latency(a_, a_.chains);
  launches_and_syncs_.chains(a_, a_.chains);
  rule_graph_lifecycle(source_, a_, a_.chains);
  rule_noisy_neighbour(a_, a_.chains);
  rule_process_contention(a_, a_.chains);
  rule_oom(a_, a_.chains);
  // These read the file on this connection (collectives from the trace's start, the calls in
  // flight, the stacks of hung calls) while the step model's threads may read stacks on it: they
  // take turns under the same lock. Unlocked, two threads on one connection linked a cursor
  // into its list twice, and SQLite then walked the list forever (Tiers.* hung in CI).
  std::lock_guard<std::mutex> hold(stacks_lock_);
  rule_collective_straggler(source_, a_, a_.chains);
  a_.inflight = source_.inflight(window_);
  rule_hangs(source_, a_, a_.chains);
  failed_.chains(source_, a_, a_.chains);
}

void AnalysisRun::join_step_model() {
  if (steps_.valid()) {
    // While the step model runs: the stacks of the chains found so far (their windows, ops and
    // processes do not change after), then of those found from the steps.
    attribute_stacks(source_, a_, &stacks_lock_);
    a_.steps = steps_.get();
  }
  name_tracer_in_steps(a_);
}

// The rules that run once the steps are known, then the step phases given to every chain.
void AnalysisRun::chains_from_steps() {
  rule_fabric_errors(source_, a_, a_.chains);
  rule_step_faults(source_, a_, a_.chains);
  rule_device_errors(a_, a_.chains);
  apply_step_phases(a_);
}

}  // namespace

Analysis analyze(TraceSource& source, const Window& window, const EngineOptions& opts) {
  Analysis a;
  AnalysisRun(source, window, opts, a).run();
  return a;
}

}  // namespace ingero::engine

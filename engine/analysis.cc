#include "engine/analysis.h"

#include <algorithm>
#include <future>
#include <memory>
#include <mutex>
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

}  // namespace

Analysis analyze(TraceSource& source, const Window& window, const EngineOptions& opts) {
  Analysis a;
  a.window = window;
  a.names = source.processes();
  std::map<uint32_t, uint64_t> calls_per_pid;
  Window recent = window;
  if (opts.model_calls) recent.from_ns = source.recent_start(window, opts.model_calls);
  // Host context, the on-CPU samples and the event count do not depend on the calls: where
  // the source allows it, they are read on a second connection while the calls are read.
  struct HostReads {
    HostContext host;
    CpuSamples samples;
    uint64_t events = 0;
    DeviceBusy device;
    std::vector<hal::DeviceEvent> device_events;
  };
  auto read_host = [&window, &recent](TraceSource& s) {
    HostReads r{collect_host_context(s, window),
                read_cpu_samples(s, recent),
                s.event_count(window),
                {},
                s.device_events(window)};
    s.device_samples(window, [&](const hal::DeviceSample& x) { r.device.add(x); });
    r.device.done();
    return r;
  };
  std::unique_ptr<TraceSource> other = source.open_another();
  std::future<HostReads> ahead;
  if (other) ahead = std::async(std::launch::async, [&] { return read_host(*other); });
  HostReads h;
  // Where the window's calls are in memory, the step model (which reads them, and stacks)
  // runs beside the op statistics' quantile and tail passes, the rules that need no steps and
  // read nothing but the calls, and the stack attribution of their chains; the others wait for
  // it. It models once host context and the samples are read (`counted`).
  std::mutex stacks_lock;  // the step model's threads and stack attribution read stacks
  std::promise<void> counted_done;
  std::shared_future<void> host_known = counted_done.get_future().share();
  auto model = [&](const std::map<uint32_t, uint64_t>& per_pid, bool early) {
    std::function<void()> wait;
    if (early) wait = [&] { host_known.wait(); };
    return compute_steps(source, recent, a.host, opts.model_bytes, per_pid, &h.samples, 0,
                         &stacks_lock, wait, &a.device);
  };
  std::map<uint32_t, uint64_t> held_per_pid;  // for a model begun before the counts
  std::future<StepModel> steps;
  // Whatever happens below: nothing is left waiting for the counts, and the source calls
  // nothing of this frame after it.
  struct Release {
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
  } release{source, window, counted_done};
  // Where the first read holds every call before this thread has passed them all to the op
  // statistics (a read split between two connections), the model starts then: its collection
  // of the calls runs beside the rest of that pass, not after it.
  source.when_calls_held(window, [&](const std::map<uint32_t, uint64_t>& per_pid) {
    held_per_pid = per_pid;
    steps = std::async(std::launch::async, [&] { return model(held_per_pid, true); });
  });
  // Launch collapse and repeated syncs count the calls the statistics' tail pass reads.
  LaunchCollapseAndRepeatedSync launches_and_syncs;
  CallRider rider{[&](const hal::Event& e) { launches_and_syncs.call(e); },
                  [&](const CallRun& r) { launches_and_syncs.run(r); }};
  auto counted = [&](const std::vector<OpStats>& groups) {
    h = other ? ahead.get() : read_host(source);
    other.reset();  // its errors become the source's
    a.host = std::move(h.host);
    a.events = h.events;
    a.device = std::move(h.device);
    a.device_events = std::move(h.device_events);
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const OpStats& s : groups) {
      if (!s.key.pid) continue;  // all processes
      calls_per_pid[s.key.pid] += s.count;
      first = std::min(first, s.first_ts);
      last = std::max(last, s.last_ts);
    }
    // Read here: the step model reads stacks on this connection once it models.
    a.losses = window.node ? source.node_losses(*window.node) : source.losses();
    a.tracer_pids = source.tracer_pids(window.node);
    auto span = window.node ? source.node_span(*window.node) : source.time_span();
    a.span = {
        std::max(first == INT64_MAX ? span.first : std::min(first, span.first), window.from_ns),
        std::min(last == INT64_MIN ? span.second : std::max(last, span.second), window.to_ns)};
    release.counts_known();
    if (!steps.valid() && source.concurrent_call_reads(window))
      steps = std::async(std::launch::async, [&] { return model(calls_per_pid, false); });
  };
  a.stats = compute_op_stats(source, window, counted, &rider);
  if (!steps.valid()) a.steps = model(calls_per_pid, false);
  rule_tail_latency(a, a.chains);
  launches_and_syncs.chains(a, a.chains);
  rule_graph_lifecycle(source, a, a.chains);
  rule_noisy_neighbour(a, a.chains);
  rule_process_contention(a, a.chains);
  rule_oom(a, a.chains);
  rule_collective_straggler(source, a, a.chains);
  a.inflight = source.inflight(window);
  rule_hangs(source, a, a.chains);
  if (steps.valid()) {
    // While the step model runs: the stacks of the chains found so far (their windows, ops and
    // processes do not change after), then of those found from the steps.
    attribute_stacks(source, a, &stacks_lock);
    a.steps = steps.get();
  }
  // The step model words preemptors without knowing the tracer: its texts name it here.
  for (StepSeries& s : a.steps.processes) {
    s.summary.preempted_by = name_tracer(a, s.summary.preemptors, s.summary.preempted_by);
    s.summary.text = name_tracer(a, s.summary.preemptors, s.summary.text);
  }
  h.samples = {};
  if (opts.kernels) a.kernels = compute_kernels(source, recent, a.steps, &stacks_lock);
  rule_fabric_errors(source, a, a.chains);
  rule_step_faults(source, a, a.chains);
  rule_device_errors(a, a.chains);
  apply_step_phases(a);
  std::stable_sort(a.chains.begin(), a.chains.end(), [](const Chain& x, const Chain& y) {
    if (x.severity != y.severity) return x.severity > y.severity;
    return x.score > y.score;
  });
  attribute_stacks(source, a);
  a.stats.kept.reset();  // only stack attribution reads them
  if (opts.breakdown) build_breakdown(a);
  return a;
}

}  // namespace ingero::engine

#include "serve/metrics/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "engine/chain.h"
#include "hal/call_failure.h"
#include "hal/utf8.h"
#include "serve/http/web_config.h"

namespace ingero::serve {

Metrics::Metrics(bool per_process, const hal::BackendRegistry* backends)
    : per_process_(per_process),
      backends_(backends),
      registry_(std::make_shared<prometheus::Registry>()) {
  // In this order: the exposition lists each type's families in the order they were registered.
  auto& r = *registry_;
  register_call_families(r);
  register_collective_families(r);
  register_host_families(r);
  register_step_families(r);
  register_chain_family(r);
  register_agent_families(r);
  register_kernel_family(r);
  register_build_info(r);
  make_inflight_gauges();
}

ingero::Status Metrics::serve(const std::string& addr, const std::string& web_config,
                              std::optional<int> nice) {
  http::ServerOptions o;
  o.listen = addr;
  o.nice = nice;
  o.hosts.check_host = false;  // scraped by name from other hosts; no page a browser could use
  o.workers = 2;
  o.max_queued = 16;
  if (!web_config.empty()) {
    auto wc = http::load_web_config(web_config);
    if (!wc) return ingero::make_error("--prometheus-web-config: " + wc.error().message);
    if (auto st = http::apply_web_config(*wc, o, "ingero metrics"); !st) return st;
    authenticated_ = o.auth != nullptr;
  }
  auto server = std::make_unique<http::Server>(std::move(o));
  server->route("GET", "/metrics", [this](const http::Request&) {
    http::Response r;
    r.headers.set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    r.body = exposition();
    return r;
  });
  if (auto st = server->start(); !st)
    return ingero::make_error("cannot serve Prometheus metrics on " + addr + ": " +
                              st.error().message);
  server_ = std::move(server);
  return {};
}

bool Metrics::loopback_only() const { return server_ && server_->loopback_only(); }

std::string Metrics::url() const { return server_ ? server_->url("/metrics") : ""; }

uint64_t Metrics::process_key(const hal::Event& ev) {
  if (!per_process_) return 0;
  if (processes_.count(ev.pid)) return ev.pid;
  size_t live = 0;
  for (const auto& [pid, p] : processes_) live += p.exited_ns == 0;
  if (live >= kMaxProcesses) return kOtherProcess;
  processes_[ev.pid];
  return ev.pid;
}

prometheus::Labels Metrics::call_labels(const hal::Event& ev, uint64_t process) const {
  prometheus::Labels l = {{"vendor", std::string(ev.vendor)},
                          {"api", std::string(ev.api)},
                          {"op", std::string(ev.op)},
                          {"kind", std::string(hal::kind_name(ev.kind))}};
  if (per_process_) {
    bool other = process == kOtherProcess;
    l["pid"] = other ? "other" : std::to_string(process);
    l["comm"] = other ? "other" : std::string(ev.comm_view());
    // Who the process runs for, where known (an absent label is Prometheus's ""): read once
    // per cgroup (the tenant watch usually has).
    if (!other && tenants_) {
      add_tenant_labels(l, tenants_->resolve(ev.cgroup_id, ev.pid).names);
    }
  }
  return l;
}

void Metrics::add_tenant_labels(prometheus::Labels& l, const kernelside::TenantNames& n) {
  if (n.pod_namespace) l["namespace"] = *n.pod_namespace;
  if (n.pod) l["pod"] = *n.pod;
  if (n.container) l["container"] = *n.container;
}

Metrics::CallMetrics& Metrics::call_metrics(const hal::Event& ev) {
  CallKey key{ev.api.data(), ev.op.data(), process_key(ev)};
  auto it = call_cache_.find(key);
  if (it != call_cache_.end()) return it->second;
  auto labels = call_labels(ev, key.process);
  prometheus::Labels short_labels = labels;
  short_labels.erase("kind");
  CallMetrics m;
  m.duration = &call_duration_->Add(labels, latency_buckets());
  m.calls = &calls_->Add(labels);
  m.off_cpu = &off_cpu_->Add(short_labels);
  m.preempted = &preempted_->Add(short_labels);
  if (per_process_ && key.process != kOtherProcess) {
    ProcessSeries& p = processes_[ev.pid];
    p.keys.push_back(key);
    if (ev.cgroup_id) p.cgroup = ev.cgroup_id;
  }
  return call_cache_.emplace(key, std::move(m)).first->second;
}

void Metrics::retire_exited(int64_t now_ns, int64_t retention_ns) {
  std::lock_guard<std::mutex> g(mu_);
  flush_pending();  // a retired series' counts go with it, but into it first
  for (auto it = processes_.begin(); it != processes_.end();) {
    if (it->second.exited_ns == 0 || now_ns - it->second.exited_ns < retention_ns) {
      ++it;
      continue;
    }
    for (const auto& key : it->second.keys) {
      auto c = call_cache_.find(key);
      if (c == call_cache_.end()) continue;
      call_duration_->Remove(c->second.duration);
      calls_->Remove(c->second.calls);
      off_cpu_->Remove(c->second.off_cpu);
      preempted_->Remove(c->second.preempted);
      call_cache_.erase(c);
    }
    it = processes_.erase(it);
  }
}

void Metrics::observe(const hal::Event& ev) {
  std::lock_guard<std::mutex> g(mu_);
  double secs = double(ev.dur_ns) / 1e9;
  if (!hal::is_host_kind(ev.kind)) {
    CallMetrics& m = call_metrics(ev);
    // A launch seen at its entry only (one in --launch-timing is timed) has no duration.
    if (ev.timed) {
      const auto& b = latency_buckets();
      if (m.duration_pending.empty()) m.duration_pending.assign(b.size() + 1, 0.0);
      // The bucket Histogram::Observe takes: the first bound not below the value.
      m.duration_pending[size_t(std::lower_bound(b.begin(), b.end(), secs) - b.begin())] += 1;
      m.seconds_pending += secs;
    }
    if (!m.calls_pending++) pending_calls_.push_back(&m);
    if (ev.off_cpu_ns) m.off_cpu->Increment(double(ev.off_cpu_ns) / 1e9);
    if (ev.preempts) m.preempted->Increment();
    // A query's "not ready" (a call still in progress) is an answer, not an error.
    if (hal::is_failure(ev)) {
      prometheus::Counter* counter = nullptr;
      if (auto e = m.errors.find(ev.ret); e != m.errors.end()) {
        counter = e->second;
      } else {
        std::string code = std::to_string(ev.ret);
        if (!codes_.count(code))
          code = codes_.size() < kMaxCodes ? *codes_.insert(code).first : "other";
        // Errors carry the code, not the process: per-process mode keeps its pid labels off them.
        counter = &call_errors_->Add({{"vendor", std::string(ev.vendor)},
                                      {"api", std::string(ev.api)},
                                      {"op", std::string(ev.op)},
                                      {"code", code}});
        // "other" is not cached: a stream of new codes must not grow the map.
        if (code != "other") m.errors.emplace(ev.ret, counter);
      }
      counter->Increment();
    }
    uint64_t stream = ev.get_or(hal::Field::kStream, 0);
    if (ev.kind == hal::EventKind::kLaunch) observe_launch(ev);
    if (ev.kind == hal::EventKind::kCollective || ev.kind == hal::EventKind::kP2P) {
      prometheus::Labels l = {{"vendor", std::string(ev.vendor)}, {"op", std::string(ev.op)}};
      collectives_->Add(l).Increment();
      collective_bytes_->Add(l).Increment(double(ev.get_or(hal::Field::kBytes, 0)));
      collective_duration_->Add(l, latency_buckets()).Observe(secs);
      open_collectives_[{ev.pid, stream}] = {std::string(ev.vendor), std::string(ev.op)};
    } else if (ev.kind == hal::EventKind::kSync) {
      // Barrier correlator, live: the first sync after a collective on the same stream.
      auto it = open_collectives_.find({ev.pid, stream});
      if (it == open_collectives_.end() && !ev.has(hal::Field::kStream))
        it = open_collectives_.lower_bound({ev.pid, 0});
      if (it != open_collectives_.end() && it->first.first == ev.pid) {
        barrier_wait_->Add({{"vendor", it->second.first}, {"op", it->second.second}})
            .Increment(secs);
        open_collectives_.erase(it);
      }
    } else if (ev.kind == hal::EventKind::kRdmaAsyncEvent && ev.has(hal::Field::kRdmaEvent)) {
      observe_device_event(ev);
    }
    return;
  }
  switch (ev.kind) {
    case hal::EventKind::kSchedSwitch:
      switches_->Add({{"preempted", ev.get_or(hal::Field::kFlags, 0) ? "true" : "false"}})
          .Increment();
      break;
    case hal::EventKind::kBlockIo: {
      // The trace's op is "block_read", "block_write", ...: the metric's name says block I/O.
      std::string_view op = ev.op;
      if (op.substr(0, 6) == "block_") op.remove_prefix(6);
      block_duration_->Add({{"op", std::string(op)}}, latency_buckets()).Observe(secs);
      break;
    }
    case hal::EventKind::kProcessExit:
      kernel_of_.erase(ev.pid);
      if (auto it = processes_.find(ev.pid); it != processes_.end())
        it->second.exited_ns = ev.ts_ns ? ev.ts_ns : 1;
      open_collectives_.erase(open_collectives_.lower_bound({ev.pid, 0}),
                              open_collectives_.lower_bound({ev.pid + 1, 0}));
      break;
    case hal::EventKind::kTcpRetransmit:
      tcp_retransmits_->Add({}).Increment();
      break;
    default:
      break;
  }
}

ingero::Status Metrics::on_tick(int64_t mono_ns) {
  retire_exited(mono_ns);
  refresh_kernel_series();
  return {};
}

ingero::Status Metrics::on_process_stats(int64_t, int64_t,
                                         const std::vector<hal::ProcessStats>& deltas) {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t n = 0, b = 0;
  for (const auto& d : deltas) {
    n += d.page_allocs;
    b += d.page_bytes;
  }
  page_allocs_->Add({}).Increment(double(n));
  page_bytes_->Add({}).Increment(double(b));
  return {};
}

ingero::Status Metrics::on_agent_stats(const hal::AgentStats& a) {
  const hal::SessionCounters& lost = a.lost;
  std::lock_guard<std::mutex> g(mu_);
  // Counters from cumulative totals: add what grew since the last call (they never shrink).
  auto grow = [](prometheus::Counter& c, uint64_t& last, uint64_t now) {
    if (now > last) c.Increment(double(now - last));
    last = std::max(last, now);
  };
  grow(events_->Add({}), events_last_, a.events_total);
  grow(drops_->Add({}), drops_last_,
       lost.call_drops + lost.stack_drops + lost.host_drops + lost.sample_drops);
  grow(dropped_->Add({{"kind", "calls"}}), lost_last_[0], lost.call_drops);
  grow(dropped_->Add({{"kind", "stacks"}}), lost_last_[1], lost.stack_drops);
  grow(dropped_->Add({{"kind", "host"}}), lost_last_[2], lost.host_drops);
  grow(dropped_->Add({{"kind", "samples"}}), lost_last_[3], lost.sample_drops);
  grow(untraced_->Add({}), lost_last_[4], lost.lost_calls);
  grow(store_errors_->Add({}), lost_last_[5], a.store_errors);
  events_rate_->Add({}).Set(a.events_per_s);
  for (const auto& [b, n] : a.probes_by_backend) probes_->Add({{"backend", b}}).Set(double(n));
  db_bytes_->Add({}).Set(double(a.db_bytes));
  if (a.shipping) {
    grow(shipped_rows_->Add({}), shipped_last_, a.shipping->rows);
    grow(ship_failures_->Add({}), ship_failures_last_, a.shipping->failures);
    clickhouse_up_->Add({}).Set(a.shipping->failing ? 0 : 1);
    unshipped_->Add({}).Set(double(a.shipping->unshipped));
  }
  return {};
}

ingero::Status Metrics::on_steps(const std::vector<StepSample>& steps) {
  // 1 ms .. ~16 s, doubling; idle share in tenths.
  static const prometheus::Histogram::BucketBoundaries kSeconds = [] {
    prometheus::Histogram::BucketBoundaries b;
    for (double v = 0.001; v < 20; v *= 2) b.push_back(v);
    return b;
  }();
  static const prometheus::Histogram::BucketBoundaries kShare = {0.1, 0.2, 0.3, 0.4, 0.5,
                                                                 0.6, 0.7, 0.8, 0.9, 1.0};
  std::lock_guard<std::mutex> g(mu_);
  auto& dur = step_duration_->Add({}, kSeconds);
  auto& idle = step_gpu_idle_->Add({}, kShare);
  prometheus::Histogram* busy = nullptr;
  for (const auto& s : steps) {
    dur.Observe(s.seconds);
    idle.Observe(s.gpu_idle);
    if (s.gpu_busy < 0) continue;
    if (!busy) busy = &step_gpu_busy_->Add({}, kShare);
    busy->Observe(s.gpu_busy);
  }
  return {};
}

ingero::Status Metrics::on_chains(const std::vector<engine::Chain>& chains, int64_t) {
  std::map<std::string, uint64_t> active;
  for (const auto& c : chains) ++active[engine::severity_name(c.severity)];
  std::lock_guard<std::mutex> g(mu_);
  for (const char* s : {"HIGH", "MEDIUM", "LOW"}) {
    auto it = active.find(s);
    chains_->Add({{"severity", s}}).Set(it == active.end() ? 0.0 : double(it->second));
  }
  return {};
}

void Metrics::flush_pending() {
  for (CallMetrics* m : pending_calls_) {
    m->calls->Increment(double(m->calls_pending));
    m->calls_pending = 0;
    if (!m->duration_pending.empty()) {
      m->duration->ObserveMultiple(m->duration_pending, m->seconds_pending);
      m->duration_pending.clear();
      m->seconds_pending = 0;
    }
  }
  pending_calls_.clear();
  for (uint32_t i : pending_kernels_) {
    KernelSeries& k = kernels_[i];
    (k.series ? k.series : kernel_other_)->Increment(double(k.pending));
    k.pending = 0;
  }
  pending_kernels_.clear();
  if (unnamed_pending_) kernel_unnamed_->Increment(double(unnamed_pending_));
  unnamed_pending_ = 0;
}

class Metrics::Flushing final : public prometheus::Collectable {
 public:
  explicit Flushing(Metrics& m) : m_(m) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return m_.collect(); }

 private:
  Metrics& m_;
};

std::shared_ptr<prometheus::Collectable> Metrics::collectable() {
  return std::make_shared<Flushing>(*this);
}

std::vector<prometheus::MetricFamily> Metrics::collect() {
  {
    std::lock_guard<std::mutex> g(mu_);
    flush_pending();
  }
  return registry_->Collect();
}

std::string Metrics::exposition() {
  std::vector<prometheus::MetricFamily> families = collect();
  // Label values name what a process chose (comm, cgroup, kernel and device names): one that
  // is not UTF-8 makes Prometheus refuse the whole scrape.
  for (auto& f : families)
    for (auto& m : f.metric)
      for (auto& l : m.label)
        if (!hal::is_utf8(l.value)) l.value = hal::valid_utf8(l.value);
  prometheus::TextSerializer ser;
  std::ostringstream out;
  ser.Serialize(out, families);
  return out.str();
}

}  // namespace ingero::serve

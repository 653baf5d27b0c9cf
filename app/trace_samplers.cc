#include "app/trace_samplers.h"

#include "capture/host_info.h"

namespace ingero::app {

HostSamplers::HostSamplers(store::TraceWriter& writer, capture::EventPipeline& pipeline,
                           serve::Metrics* metrics, int pid_stats_fd, std::string sysfs_root,
                           std::vector<const hal::VendorBackend*> pollers)
    : writer_(writer),
      pipeline_(pipeline),
      metrics_(metrics),
      sysfs_root_(std::move(sysfs_root)),
      pollers_(std::move(pollers)) {
  if (pid_stats_fd >= 0) pstats_ = std::make_unique<kernelside::ProcessStatsReader>(pid_stats_fd);
}

void HostSamplers::start(int64_t mono_ns, int64_t wall_ns) {
  if (pstats_) (void)pstats_->read_deltas();
  snapshots_.sample(wall_ns);  // primes the CPU counters
  device_counters(wall_ns);
  pstats_wall_ = wall_ns;
  pstats_mono_ = mono_ns;
  next_snapshot_ = mono_ns + 1'000'000'000;
  next_pstats_ = mono_ns + 5'000'000'000LL;
}

void HostSamplers::sample(int64_t mono, bool final) {
  int64_t wall = capture::wall_now_ns();
  if (final || mono >= next_snapshot_) {
    snapshot(wall);
    next_snapshot_ = mono + 1'000'000'000;
  }
  if (!final && mono < next_pstats_) return;
  device_counters(wall);
  process_stats(mono, wall);
  next_pstats_ = mono + 5'000'000'000LL;
}

void HostSamplers::snapshot(int64_t wall) {
  auto s = snapshots_.sample(wall);
  pipeline_.commit();
  (void)writer_.add_snapshot(
      {s.ts_ns, s.cpu_pct, s.mem_pct, s.load_avg, s.mem_avail_mb, s.swap_used_mb, s.procs_running});
}

void HostSamplers::process_stats(int64_t mono, int64_t wall) {
  if (!pstats_) return;
  auto deltas = pstats_->read_deltas();
  if (deltas && metrics_) metrics_->on_process_stats(*deltas);
  if (deltas) {
    for (const auto& d : *deltas) {
      store::ProcessStatsRow r{pstats_wall_,     wall - pstats_wall_, d.pid,         d.comm,
                               d.cgroup_id,      d.switches,          d.involuntary, d.off_cpu_ns,
                               d.max_off_cpu_ns, d.wakeups,           d.page_allocs, d.page_bytes,
                               d.forks,          d.block_ios,         d.block_bytes, d.block_ns};
      (void)writer_.add_process_stats(r);
      if (d.page_allocs && pipeline_.gpu_pids().count(d.pid))
        pipeline_.add(
            kernelside::page_alloc_event(d, uint64_t(pstats_mono_), uint64_t(mono - pstats_mono_)));
    }
  }
  pstats_wall_ = wall;
  pstats_mono_ = mono;
}

// Each backend's device counters (InfiniBand/RoCE ports, ...). A host without the devices has
// no rows.
void HostSamplers::device_counters(int64_t ts) {
  for (const hal::VendorBackend* b : pollers_) {
    auto ports = b->poll_counters(sysfs_root_);
    if (ports.empty()) continue;
    if (metrics_) metrics_->on_device_counters(b->name(), ports);
    for (const auto& p : ports)
      for (const auto& c : p.counters)
        (void)writer_.add_device_counter({ts, std::string(b->name()), p.device, c.counter, c.unit,
                                          p.port, c.value, c.value * c.factor, c.is_error,
                                          p.attributes});
  }
}

}  // namespace ingero::app

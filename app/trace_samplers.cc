#include "app/trace_samplers.h"

#include "capture/host_info.h"

namespace ingero::app {

HostSamplers::HostSamplers(hal::EventSink& sinks, capture::EventPipeline& pipeline,
                           int pid_stats_fd, std::string sysfs_root,
                           std::vector<const hal::VendorBackend*> pollers)
    : sinks_(sinks),
      pipeline_(pipeline),
      sysfs_root_(std::move(sysfs_root)),
      pollers_(std::move(pollers)) {
  if (pid_stats_fd >= 0) pstats_ = std::make_unique<kernelside::ProcessStatsReader>(pid_stats_fd);
}

void HostSamplers::start(int64_t mono_ns, capture::TraceClock clock) {
  clock_ = clock;
  int64_t wall_ns = clock.wall(mono_ns);
  if (pstats_) (void)pstats_->read_deltas();
  snapshots_.sample(wall_ns);  // primes the CPU counters
  device_counters(wall_ns);
  pstats_wall_ = wall_ns;
  pstats_mono_ = mono_ns;
  next_snapshot_ = mono_ns + 1'000'000'000;
  next_pstats_ = mono_ns + 5'000'000'000LL;
}

void HostSamplers::sample(int64_t mono, bool final) {
  int64_t wall = clock_.wall(mono);
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
  (void)sinks_.on_snapshot(s);  // an error is reported by the SinkSet
}

void HostSamplers::process_stats(int64_t mono, int64_t wall) {
  if (!pstats_) return;
  auto deltas = pstats_->read_deltas();
  if (deltas) {
    (void)sinks_.on_process_stats(pstats_wall_, wall - pstats_wall_, *deltas);
    for (const auto& d : *deltas) {
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
    if (!ports.empty()) (void)sinks_.on_device_counters(ts, b->name(), ports);
  }
}

}  // namespace ingero::app

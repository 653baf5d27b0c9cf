// What `ingero trace` samples besides the rings: a system snapshot every second, and every
// 5 s the kernel's per-process aggregates (with, for GPU processes, their page-allocation
// totals as events) and the device counters of every backend with a poller (InfiniBand/RoCE
// ports, ...; hal/side_channel.h). Each kind goes once to the tracer's sinks (the SinkSet:
// the trace file, the Prometheus registry, ...; hal/event_sink.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capture/event_pipeline.h"
#include "capture/host_info.h"
#include "hal/backend.h"
#include "hal/event_sink.h"
#include "kernelside/host_decoder.h"
#include "kernelside/system_snapshot.h"

namespace ingero::app {

class HostSamplers {
 public:
  // `pid_stats_fd` < 0: no per-process aggregates (host context off). `sinks`: every sink,
  // as one. `pollers`: the backends whose poll_counters() read under `sysfs_root`.
  HostSamplers(hal::EventSink& sinks, capture::EventPipeline& pipeline, int pid_stats_fd,
               std::string sysfs_root, std::vector<const hal::VendorBackend*> pollers);
  // Primes the counters: activity before the trace is not ours. Samples are stamped on `clock`
  // (the session's).
  void start(int64_t mono_ns, capture::TraceClock clock);
  // Samples what is due at `mono_ns`; `final` samples everything.
  void sample(int64_t mono_ns, bool final);

 private:
  void snapshot(int64_t wall_ns);
  void process_stats(int64_t mono_ns, int64_t wall_ns);
  void device_counters(int64_t wall_ns);

  hal::EventSink& sinks_;
  capture::EventPipeline& pipeline_;
  std::string sysfs_root_;
  std::vector<const hal::VendorBackend*> pollers_;
  kernelside::SnapshotSampler snapshots_;
  std::unique_ptr<kernelside::ProcessStatsReader> pstats_;
  capture::TraceClock clock_;
  int64_t pstats_wall_ = 0, pstats_mono_ = 0, next_pstats_ = 0, next_snapshot_ = 0;
};

}  // namespace ingero::app

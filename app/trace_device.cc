// The tracer's device side channel (app/trace_session.h): NVML and amdgpu sampled on the
// poller's own thread, drained here on the event loop into the sinks (the trace file, the
// registry).
#include <iostream>

#include "app/trace_session.h"
#include "hal/sampler_process.h"

namespace ingero::app::trace_detail {

void Trace::start_devices() {
  if (opts_.device_poll_ms == 0) return;
  hal::DeviceSamplerOptions o;
  o.sysfs_root = opts_.sysfs_root;
  o.poll_ns = int64_t(opts_.device_poll_ms) * 1'000'000;
  // Every registered backend's sampler, as the counter pollers (--backends selects probes);
  // --device-poll-ms 0 turns them off.
  devices_ = std::make_unique<DevicePoller>(registry_.all(), o, clock_);
  if (!opts_.quiet) {
    for (const hal::DeviceSamplerInfo* i : devices_->infos())
      std::cerr << "ingero: device sampling every " << opts_.device_poll_ms << " ms: " << i->source
                << ", " << i->devices.size() << " device" << (i->devices.size() == 1 ? "" : "s")
                << " (" << i->library << ")\n";
    // One line for what is not there: it changes nothing else.
    if (!devices_->active() && !devices_->notes().empty()) {
      std::string why;
      for (const auto& n : devices_->notes()) why += (why.empty() ? "" : "; ") + n;
      std::cerr << "ingero: GPU busy not measured (" << why
                << "): explain gives GPU idle as a lower bound\n";
    }
  }
  if (!devices_->active()) {
    devices_.reset();  // nothing to poll: no thread, no cost
    return;
  }
  devices_->start();
}

void Trace::drain_devices(bool final) {
  if (!devices_) return;
  std::vector<uint32_t> pids(pipeline_->gpu_pids().begin(), pipeline_->gpu_pids().end());
  devices_->set_gpu_pids(pids);
  if (final) {
    // The thread stops; one last poll here takes the figures and events since its last one.
    devices_->stop();
    devices_->poll_once(clock_.now());
  }
  DevicePoller::Batch b = devices_->take();
  device_rows_lost_ += b.dropped;
  // A sampler whose own process died or hung (NVML's): said as it happens; the event is stored.
  for (const hal::DeviceEvent& e : b.events)
    if (e.kind == hal::kSamplerLost && !opts_.quiet)
      std::cerr << "ingero: " << e.source << ": " << e.detail << "\n";
  if (auto st = record_device_batch(b, sinks_); !st) {
    device_rows_lost_ += b.samples.size() + b.events.size();
    if (!device_warned_ && !opts_.quiet)
      std::cerr << "ingero: storing device samples failed: " << st.error().message << "\n";
    device_warned_ = true;
  }
  if (device_labels_.size() > 4 * pids.size() + 64) device_labels_.forget_except(pids);
  if (!final) return;
  if (device_rows_lost_ && !opts_.quiet)
    std::cerr << "ingero: " << device_rows_lost_
              << " device samples were not stored (the event loop fell behind or the trace file "
                 "refused them)\n";
  devices_.reset();
}

}  // namespace ingero::app::trace_detail

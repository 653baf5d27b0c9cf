// The device side channel's series (hal/device_sampler.h): per device, and with
// --prometheus-per-process per process, what NVML or amdgpu sysfs measured. A figure the
// device did not give has no series (absent, never 0). Labels stay bounded: source, gpu (the
// index), uuid; per process also pid, comm, container and pod (empty where unknown), at most
// kMaxProcesses processes a device, retired kExitedRetentionNs after their last sample.
#include <algorithm>

#include "hal/sampler_process.h"
#include "serve/metrics/metrics.h"

namespace ingero::serve {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

// NVML clocks-event reason bits and their label values.
constexpr std::pair<uint64_t, const char*> kReasons[] = {
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks_setting"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clock_setting"},
};

}  // namespace

void Metrics::make_gpu_families() {
  if (gpu_) return;
  auto& r = *registry_;
  auto gauge = [&](const char* name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Register(r);
  };
  gpu_ = std::make_unique<GpuFamilies>();
  GpuFamilies& g = *gpu_;
  g.util = gauge("ingero_gpu_utilization_ratio",
                 "Share of the last sample period a kernel ran on the device (NVML gpu, amdgpu "
                 "gpu_busy_percent)");
  g.mem_util = gauge("ingero_gpu_memory_utilization_ratio",
                     "Share of the last sample period device memory was read or written");
  g.mem_used = gauge("ingero_gpu_memory_used_bytes", "Device memory in use");
  g.mem_total = gauge("ingero_gpu_memory_total_bytes", "Device memory in total");
  g.sm_clock = gauge("ingero_gpu_sm_clock_hertz", "SM (shader) clock");
  g.mem_clock = gauge("ingero_gpu_memory_clock_hertz", "Memory clock");
  g.power = gauge("ingero_gpu_power_watts", "Power draw");
  g.temperature = gauge("ingero_gpu_temperature_celsius", "GPU temperature");
  g.throttle = gauge("ingero_gpu_clocks_event_reason",
                     "1 while NVML reports this reason for holding the clocks down (throttling)");
  g.ecc = &BuildCounter()
               .Name("ingero_gpu_ecc_errors_total")
               .Help("ECC errors the device counted (volatile totals), by type")
               .Register(r);
  g.events = &BuildCounter()
                  .Name("ingero_gpu_device_events_total")
                  .Help("Device events: Xid errors (code = the Xid), ECC errors, a lost GPU")
                  .Register(r);
  g.proc_util = gauge("ingero_gpu_process_utilization_ratio",
                      "Share of the last sample period the process's kernels ran on the device "
                      "(NVML per-process SM, amdgpu fdinfo engine time); --prometheus-per-process");
  g.proc_mem_util = gauge("ingero_gpu_process_memory_utilization_ratio",
                          "Share of the last sample period the process's work read or wrote "
                          "device memory; --prometheus-per-process");
  g.proc_mem_used = gauge("ingero_gpu_process_memory_used_bytes",
                          "Device memory the process holds; --prometheus-per-process");
}

ingero::Status Metrics::on_device_samples(const std::vector<hal::DeviceSample>& samples) {
  if (samples.empty()) return {};
  std::lock_guard<std::mutex> g(mu_);
  make_gpu_families();
  GpuFamilies& f = *gpu_;
  int64_t newest = 0;
  for (const auto& s : samples) {
    newest = std::max(newest, s.ts_ns);
    std::string dev_key = s.source + ":" + std::to_string(s.device);
    auto made = gpu_devices_.try_emplace(dev_key + ":" + s.uuid);
    GpuDevice& d = made.first->second;
    if (made.second)
      d.labels = {{"source", s.source}, {"gpu", std::to_string(s.device)}, {"uuid", s.uuid}};
    const prometheus::Labels& l = d.labels;
    if (!s.pid) {
      // Each series is added to its family once, with the first sample that has the figure.
      auto set = [&](prometheus::Gauge*& g, prometheus::Family<prometheus::Gauge>* fam,
                     const auto& v, double scale) {
        if (!v) return;
        if (!g) g = &fam->Add(l);
        g->Set(double(*v) * scale);
      };
      set(d.util, f.util, s.sm_util, 0.01);
      set(d.mem_util, f.mem_util, s.mem_util, 0.01);
      set(d.mem_used, f.mem_used, s.mem_used, 1);
      set(d.mem_total, f.mem_total, s.mem_total, 1);
      set(d.sm_clock, f.sm_clock, s.sm_clock_mhz, 1e6);
      set(d.mem_clock, f.mem_clock, s.mem_clock_mhz, 1e6);
      set(d.power, f.power, s.power_mw, 1e-3);
      set(d.temperature, f.temperature, s.temperature_c, 1);
      if (s.throttle_reasons)
        for (size_t i = 0; i < std::size(kReasons); ++i) {
          if (!d.reasons[i]) {
            prometheus::Labels r = l;
            r["reason"] = kReasons[i].second;
            d.reasons[i] = &f.throttle->Add(r);
          }
          d.reasons[i]->Set((*s.throttle_reasons & kReasons[i].first) ? 1 : 0);
        }
      // Volatile totals: the counter grows by each rise (the first read brings the total).
      auto grow = [&](int i, const char* type, const std::optional<uint64_t>& v) {
        if (!v) return;
        if (!d.ecc[i]) {
          prometheus::Labels e = l;
          e["type"] = type;
          d.ecc[i] = &f.ecc->Add(e);
        }
        uint64_t& last = d.ecc_last[i];
        d.ecc[i]->Increment(double(*v >= last ? *v - last : *v));
        last = *v;
      };
      grow(0, "corrected", s.ecc_corrected);
      grow(1, "uncorrected", s.ecc_uncorrected);
      continue;
    }
    if (!per_process_) continue;
    auto key = std::make_pair(dev_key, *s.pid);
    auto it = gpu_procs_.find(key);
    if (it == gpu_procs_.end()) {
      size_t on_device = 0;
      for (const auto& [k, p] : gpu_procs_) on_device += k.first == key.first;
      if (on_device >= kMaxProcesses) continue;  // bounded: later processes get no series
      ProcessLabels pl = labels_of_ ? labels_of_(*s.pid) : ProcessLabels{};
      GpuProcess np;
      np.labels = l;
      np.labels["pid"] = std::to_string(*s.pid);
      np.labels["comm"] = pl.comm;
      np.labels["container_id"] = pl.container_id;
      np.labels["pod_uid"] = pl.pod_uid;
      it = gpu_procs_.emplace(key, std::move(np)).first;
    }
    GpuProcess& p = it->second;
    p.last_ns = s.ts_ns;
    // The names the per-call series carry, once the process's traced calls brought its cgroup
    // and the tenant resolver named it (read from the cache: the device path reads no file of
    // a process, nor of one ingero does not trace). `pod` and `container` then mean one thing
    // in every family, and the two join on them. A series made before is made again with them.
    if (!p.named && tenants_)
      if (auto c = processes_.find(*s.pid);
          c != processes_.end() && c->second.cgroup && tenants_->settled(c->second.cgroup))
        if (auto t = tenants_->find(c->second.cgroup)) {
          add_tenant_labels(p.labels, t->names);
          p.named = true;
          for (auto& [fam, gauge] : p.gauges)
            if (gauge) {
              fam->Remove(gauge);
              gauge = nullptr;
            }
        }
    auto put = [&](int i, prometheus::Family<prometheus::Gauge>* fam, const auto& v, double scale) {
      if (!v) return;
      if (!p.gauges[i].second) p.gauges[i] = {fam, &fam->Add(p.labels)};
      p.gauges[i].second->Set(double(*v) * scale);
    };
    put(0, f.proc_util, s.sm_util, 0.01);
    put(1, f.proc_mem_util, s.mem_util, 0.01);
    put(2, f.proc_mem_used, s.mem_used, 1);
  }
  // Processes not sampled for a while are gone from the device: their series go.
  for (auto it = gpu_procs_.begin(); it != gpu_procs_.end();) {
    if (newest - it->second.last_ns < kExitedRetentionNs) {
      ++it;
      continue;
    }
    for (auto [fam, gauge] : it->second.gauges)
      if (gauge) fam->Remove(gauge);
    it = gpu_procs_.erase(it);
  }
  return {};
}

ingero::Status Metrics::on_device_events(const std::vector<hal::DeviceEvent>& events) {
  if (events.empty()) return {};
  std::lock_guard<std::mutex> g(mu_);
  make_gpu_families();
  for (const auto& e : events) {
    // ECC rises are counted by ingero_gpu_ecc_errors_total from the totals themselves.
    if (e.kind == "ecc_corrected" || e.kind == "ecc_uncorrected") continue;
    gpu_->events
        ->Add({{"source", e.source},
               {"gpu", hal::is_sampler_event(e) ? "" : std::to_string(e.device)},
               {"uuid", e.uuid},
               {"kind", e.kind},
               {"code", e.kind == "xid" ? std::to_string(e.code) : ""}})
        .Increment();
  }
  return {};
}

}  // namespace ingero::serve

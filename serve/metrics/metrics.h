// Prometheus metrics while tracing (`ingero trace --prometheus ADDR`): prometheus-cpp's
// registry, served as the text exposition format at /metrics by ingero's HTTP server
// (serve/http: the listen rule of every ingero endpoint, and TLS and basic auth from the
// Prometheus web-config file). Names follow the Prometheus conventions (base units, _total
// counters, _seconds, _bytes); labels stay bounded: vendor/api/op/kind, never pid or tid
// unless --prometheus-per-process (pid, comm, namespace, pod, container: one series per
// process, at most kMaxProcesses). Every metric is listed in docs/metrics.md.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hal/backend.h"
#include "hal/device_sampler.h"
#include "hal/event.h"
#include "hal/event_sink.h"
#include "hal/result.h"
#include "hal/sink_records.h"
#include "kernelside/tenant_names.h"
#include "serve/http/server.h"

namespace ingero::serve {

// A sink of the capture seam (hal/event_sink.h): every kind it receives updates the registry.
// It includes no other sink; what it shares with them is hal/sink_records.h.
class Metrics final : public hal::EventSink {
 public:
  // `backends` names device asynchronous events (hal::BackendRegistry::device_event_name);
  // null: they are counted as "unknown". It must outlive the Metrics.
  explicit Metrics(bool per_process, const hal::BackendRegistry* backends = nullptr);
  // Serves GET /metrics at ADDR: "PORT" and ":PORT" listen on 127.0.0.1 only, as for
  // `mcp --http`; "0.0.0.0:PORT" or another address as written (loopback_only() is then false
  // and the caller warns). `web_config`: a Prometheus web-config file (tls_server_config,
  // basic_auth_users, http_server_config.headers; serve/http/web_config.h), "" for plain HTTP
  // without authentication. A port in use or a bad web-config file is an Error, so the tracer
  // can refuse to start half-way. Host names are not checked: Prometheus scrapes by any name.
  // `nice`: the server threads' nice value (http::ServerOptions::nice); unset: the caller's.
  ingero::Status serve(const std::string& addr, const std::string& web_config = "",
                       std::optional<int> nice = std::nullopt);
  bool loopback_only() const;
  bool authenticated() const { return authenticated_; }  // basic auth from the web config
  std::string url() const;  // "http(s)://HOST:PORT/metrics", "" before serve()

  // Per-process mode: the series of a process in a container or a pod also carry namespace,
  // pod and container, named by `tenants` ("" where unknown). It must outlive the Metrics.
  void set_tenants(kernelside::TenantResolver* tenants) { tenants_ = tenants; }
  void observe(const hal::Event& ev);  // calls and host events
  ingero::Status on_event(const hal::Event& ev) override {
    observe(ev);
    return {};
  }
  // Per-process mode: drops the series of processes that exited more than `retention_ns`
  // before `now_ns` (monotonic clock of the events), so short-lived processes do not pile up.
  void retire_exited(int64_t now_ns, int64_t retention_ns = kExitedRetentionNs);
  // Once a second: retire_exited(mono_ns), then refresh_kernel_series().
  ingero::Status on_tick(int64_t mono_ns) override;
  // The page allocations of the interval (ingero_page_allocs_total, ingero_page_alloc_bytes_total).
  ingero::Status on_process_stats(int64_t ts_ns, int64_t dur_ns,
                                  const std::vector<hal::ProcessStats>& deltas) override;
  // A backend's counter poll (hal/side_channel.h): each counter is the family
  // ingero_<backend>_<metric>[_bytes]_total, labelled <backend>_device, <backend>_port and the
  // port's metric_label attributes; it grows by the increase since the last poll.
  ingero::Status on_device_counters(int64_t ts_ns, std::string_view backend,
                                    const std::vector<hal::DevicePortSample>& ports) override;
  // The device side channel (hal/device_sampler.h; serve/metrics/gpu_metrics.cc): per device
  // gauges (utilisation, memory, clocks, power, temperature, throttle reasons) and ECC
  // counters, and with per_process the process series, labelled by set_process_labels()
  // (comm, the container id and pod UID its cgroup path holds; none set: the pid's series have
  // empty labels), and for a process whose traced calls came with a cgroup set_tenants() has
  // named, those names as the per-call series have them (namespace, pod, container). A figure
  // a sample lacks has no series.
  struct ProcessLabels {
    std::string comm, container_id, pod_uid;
  };
  using LabelFn = std::function<ProcessLabels(uint32_t pid)>;
  void set_process_labels(LabelFn labels) { labels_of_ = std::move(labels); }
  ingero::Status on_device_samples(const std::vector<hal::DeviceSample>& samples) override;
  // Xid errors, lost GPUs: ingero_gpu_device_events_total.
  ingero::Status on_device_events(const std::vector<hal::DeviceEvent>& events) override;
  // The agent's own counters, as cumulative totals since the trace began.
  ingero::Status on_agent_stats(const hal::AgentStats& stats) override;
  // The active chains: ingero_active_chains{severity} (engine/chain.h).
  ingero::Status on_chains(const std::vector<engine::Chain>& chains, int64_t now_ns) override;
  // Steady training steps that ended since the last call (the tracer's periodic analysis):
  // each step's duration and GPU-idle share.
  using StepSample = hal::StepSample;
  ingero::Status on_steps(const std::vector<StepSample>& steps) override;

  // Launches by kernel (ingero_kernel_launches_total{kernel}; hal/kernel_names.h): at most
  // `k` kernels get a series of their own (0: none), the rest share kernel="other", and
  // launches whose function has no name count as kernel="unnamed". Labels are the short names
  // (hal::short_kernel_name), at most kMaxKernelLabel bytes, summed over processes.
  void set_kernel_series(uint32_t k) { kernel_series_ = k; }
  ingero::Status on_kernel_name(const hal::KernelName& k) override;
  // Gives a series to the kernels with the most launches so far while fewer than K have one
  // (on_tick: once a second). A series, once given, stays, and counts the
  // kernel's launches from then on; those before it stay in kernel="other", so every counter
  // only grows and the family's sum is every launch.
  void refresh_kernel_series();
  static constexpr size_t kMaxKernelLabel = 128;

  // Calls in flight (capture/inflight_monitor.h; serve/metrics/inflight_metrics.cc):
  // ingero_inflight_calls, the traced calls in flight longer than --inflight-after now, and
  // ingero_inflight_oldest_seconds, how long the oldest of them has been inside (0: none),
  // and ingero_collective_hang, this node's ranks waiting inside a collective that long.
  ingero::Status on_inflight(const hal::InflightReport& report) override;

  // The text format, as /metrics serves it.
  std::string exposition();
  // Every family, the counts of the events observed so far included: what an exporter reads
  // (serve/otlp). The launches' and calls' counts wait in plain integers between collections
  // (an update of a series is an atomic read-modify-write loop on a double, ~20 ns, and a launch
  // made two to four of them), and each collection adds them to their series first. Reads the
  // Metrics, which must outlive it.
  std::shared_ptr<prometheus::Collectable> collectable();
  std::vector<prometheus::MetricFamily> collect();
  // Histogram bucket boundaries in seconds: 1 us .. 10 s.
  static const std::vector<double>& latency_buckets();

  // Label bounds. Per-process mode keeps at most kMaxProcesses processes with their own
  // series; later ones share pid="other". Return codes beyond kMaxCodes distinct values are
  // counted as code="other".
  static constexpr size_t kMaxProcesses = 512;
  static constexpr size_t kMaxCodes = 64;
  static constexpr int64_t kExitedRetentionNs = 120'000'000'000LL;

 private:
  prometheus::Labels call_labels(const hal::Event& ev, uint64_t process) const;
  // Who a process runs for, as every per-process family labels it: namespace, pod and
  // container, each where its cgroup's names have it.
  static void add_tenant_labels(prometheus::Labels& l, const kernelside::TenantNames& n);
  uint64_t process_key(const hal::Event& ev);
  void observe_launch(const hal::Event& ev);  // ingero_kernel_launches_total
  // Device asynchronous events: ingero_<vendor>_async_event_total by event type.
  void observe_device_event(const hal::Event& ev);
  // The constructor's families, by what they describe (registered in this order).
  void register_call_families(prometheus::Registry& r);
  void register_collective_families(prometheus::Registry& r);
  void register_host_families(prometheus::Registry& r);
  void register_step_families(prometheus::Registry& r);
  void register_chain_family(prometheus::Registry& r);
  void register_agent_families(prometheus::Registry& r);
  void register_kernel_family(prometheus::Registry& r);
  void register_build_info(prometheus::Registry& r);
  void make_inflight_gauges();
  prometheus::Gauge* inflight_calls_ = nullptr;
  prometheus::Gauge* inflight_oldest_ = nullptr;
  prometheus::Gauge* collective_hang_ = nullptr;
  // The GPU device families, registered with the first device sample.
  void make_gpu_families();
  struct GpuFamilies {
    prometheus::Family<prometheus::Gauge>*util, *mem_util, *mem_used, *mem_total, *sm_clock,
        *mem_clock, *power, *temperature, *throttle, *proc_util, *proc_mem_util, *proc_mem_used;
    prometheus::Family<prometheus::Counter>*ecc, *events;
  };
  std::unique_ptr<GpuFamilies> gpu_;
  struct GpuProcess {
    prometheus::Labels labels;
    int64_t last_ns = 0;  // its newest sample (wall clock)
    bool named = false;   // its cgroup's names are in `labels`
    // Its utilisation, memory utilisation and memory series, each once it had the figure.
    std::array<std::pair<prometheus::Family<prometheus::Gauge>*, prometheus::Gauge*>, 3> gauges{};
  };
  std::map<std::pair<std::string, uint32_t>, GpuProcess> gpu_procs_;  // (device key, pid)
  // A device's series, added to their families with the first sample that has the figure.
  struct GpuDevice {
    prometheus::Labels labels;
    prometheus::Gauge *util = nullptr, *mem_util = nullptr, *mem_used = nullptr,
                      *mem_total = nullptr, *sm_clock = nullptr, *mem_clock = nullptr,
                      *power = nullptr, *temperature = nullptr;
    std::array<prometheus::Gauge*, 9> reasons{};
    std::array<prometheus::Counter*, 2> ecc{};  // corrected, uncorrected
    std::array<uint64_t, 2> ecc_last{};
  };
  std::map<std::string, GpuDevice> gpu_devices_;  // source:index:uuid
  // A counter family registered on first use (device counters and events).
  prometheus::Family<prometheus::Counter>* counter_family(const std::string& name,
                                                          const std::string& help);
  struct CallMetrics {
    prometheus::Histogram* duration = nullptr;
    prometheus::Counter* calls = nullptr;
    prometheus::Counter* off_cpu = nullptr;
    prometheus::Counter* preempted = nullptr;
    std::map<int64_t, prometheus::Counter*> errors;  // by return code (bounded by kMaxCodes)
    // Not yet in `calls` and `duration` (added by flush_pending): calls (in pending_calls_
    // while not 0), and timed calls by duration bucket (latency_buckets(), then +Inf) with
    // their seconds.
    uint64_t calls_pending = 0;
    std::vector<double> duration_pending;  // empty while none
    double seconds_pending = 0;
  };
  // Event api/op views point at static or interned storage, so the cache keys on the
  // pointers (no string building per event); equal names at two addresses only cost a
  // second cache entry, as Family::Add returns the existing series.
  struct CallKey {
    const char* api;
    const char* op;
    uint64_t process;  // pid, kOtherProcess, or 0 when not per-process
    bool operator==(const CallKey& o) const {
      return api == o.api && op == o.op && process == o.process;
    }
  };
  struct CallKeyHash {
    size_t operator()(const CallKey& k) const {
      return std::hash<const void*>()(k.api) ^ (std::hash<const void*>()(k.op) << 1) ^
             (k.process * 0x9e3779b97f4a7c15ULL);
    }
  };
  static constexpr uint64_t kOtherProcess = ~uint64_t{0};
  CallMetrics& call_metrics(const hal::Event& ev);

  bool per_process_;
  const hal::BackendRegistry* backends_;
  LabelFn labels_of_;
  kernelside::TenantResolver* tenants_ = nullptr;
  std::shared_ptr<prometheus::Registry> registry_;
  std::mutex mu_;
  prometheus::Family<prometheus::Histogram>* call_duration_;
  prometheus::Family<prometheus::Counter>* calls_;
  prometheus::Family<prometheus::Counter>* call_errors_;
  prometheus::Family<prometheus::Counter>* off_cpu_;
  prometheus::Family<prometheus::Counter>* preempted_;
  prometheus::Family<prometheus::Counter>* collectives_;
  prometheus::Family<prometheus::Counter>* collective_bytes_;
  prometheus::Family<prometheus::Histogram>* collective_duration_;
  prometheus::Family<prometheus::Counter>* barrier_wait_;
  prometheus::Family<prometheus::Counter>* switches_;
  prometheus::Family<prometheus::Counter>* page_allocs_;
  prometheus::Family<prometheus::Counter>* page_bytes_;
  prometheus::Family<prometheus::Histogram>* block_duration_;
  prometheus::Family<prometheus::Counter>* tcp_retransmits_;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> device_families_;
  prometheus::Family<prometheus::Gauge>* chains_;
  prometheus::Family<prometheus::Histogram>* step_duration_;
  prometheus::Family<prometheus::Histogram>* step_gpu_idle_;
  prometheus::Family<prometheus::Histogram>* step_gpu_busy_;
  prometheus::Family<prometheus::Counter>* events_;
  prometheus::Family<prometheus::Gauge>* events_rate_;
  prometheus::Family<prometheus::Counter>* drops_;
  prometheus::Family<prometheus::Counter>* dropped_;
  prometheus::Family<prometheus::Counter>* untraced_;
  prometheus::Family<prometheus::Counter>* store_errors_;
  prometheus::Family<prometheus::Gauge>* probes_;
  prometheus::Family<prometheus::Gauge>* db_bytes_;
  prometheus::Family<prometheus::Counter>* shipped_rows_;
  prometheus::Family<prometheus::Counter>* ship_failures_;
  prometheus::Family<prometheus::Gauge>* clickhouse_up_;
  prometheus::Family<prometheus::Gauge>* unshipped_;
  prometheus::Family<prometheus::Counter>* kernel_launches_;
  struct KernelSeries {
    std::string label;
    uint64_t launches = 0;
    prometheus::Counter* series = nullptr;  // null: counted in `other`
    uint64_t pending = 0;                   // launches not yet in its series (or `other`)
  };
  uint32_t kernel_series_ = 20;
  uint32_t kernels_given_ = 0;  // kernels with a series
  std::vector<KernelSeries> kernels_;
  std::unordered_map<std::string, uint32_t> kernel_index_;  // by label
  // (pid, func) -> kernels_ index, per process (dropped when it exits)
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, uint32_t>> kernel_of_;
  prometheus::Counter* kernel_other_ = nullptr;
  prometheus::Counter* kernel_unnamed_ = nullptr;
  uint64_t unnamed_pending_ = 0;
  // The series with counts waiting (CallMetrics::calls_pending, KernelSeries::pending), added to
  // them by flush_pending (mu_ held) at each collection, and before a series is retired or a
  // kernel given its own.
  std::vector<CallMetrics*> pending_calls_;
  std::vector<uint32_t> pending_kernels_;
  void flush_pending();
  class Flushing;
  std::unordered_map<CallKey, CallMetrics, CallKeyHash> call_cache_;
  struct ProcessSeries {
    std::vector<CallKey> keys;  // call_cache_ keys
    int64_t exited_ns = 0;      // 0 while running
    uint64_t cgroup = 0;        // its calls' cgroup: its GPU series' names (gpu_metrics.cc)
  };
  std::unordered_map<uint32_t, ProcessSeries> processes_;  // per-process mode only
  std::set<std::string> codes_;
  std::map<std::pair<uint32_t, uint64_t>, std::pair<std::string, std::string>>
      open_collectives_;                         // (pid, stream) -> vendor, op
  std::map<std::string, uint64_t> device_last_;  // family, device, port -> last value
  uint64_t events_last_ = 0, drops_last_ = 0;
  uint64_t lost_last_[6] = {};
  uint64_t shipped_last_ = 0, ship_failures_last_ = 0;
  bool authenticated_ = false;
  // Last: stopped (its handlers done) before the registry and the families go.
  std::unique_ptr<http::Server> server_;
};

}  // namespace ingero::serve

// The families ingero serves at /metrics, registered by the Metrics constructor in the order
// the exposition lists them (serve/metrics/metrics.h, docs/metrics.md).
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include "serve/metrics/metrics.h"

namespace ingero::serve {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

const std::vector<double>& Metrics::latency_buckets() {
  static const std::vector<double> b = {1e-6, 2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4,
                                        5e-4, 1e-3,   2.5e-3, 5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,
                                        0.25, 0.5,    1.0,    2.5,  5.0,    10.0};
  return b;
}

// The traced GPU API calls: duration, count, errors, time off-CPU and preemption.
void Metrics::register_call_families(prometheus::Registry& r) {
  call_duration_ = &BuildHistogram()
                        .Name("ingero_gpu_api_call_duration_seconds")
                        .Help("Duration of traced GPU runtime/driver/collective API calls")
                        .Register(r);
  calls_ =
      &BuildCounter().Name("ingero_gpu_api_calls_total").Help("Traced GPU API calls").Register(r);
  call_errors_ = &BuildCounter()
                      .Name("ingero_gpu_api_errors_total")
                      .Help("Traced GPU API calls that returned an error, by return code")
                      .Register(r);
  off_cpu_ = &BuildCounter()
                  .Name("ingero_gpu_api_off_cpu_seconds_total")
                  .Help("Time threads spent off-CPU while inside GPU API calls")
                  .Register(r);
  preempted_ = &BuildCounter()
                    .Name("ingero_gpu_api_preempted_calls_total")
                    .Help("GPU API calls during which the calling thread was preempted")
                    .Register(r);
}

// NCCL/RCCL collectives: count, bytes, duration, and the barrier wait after them.
void Metrics::register_collective_families(prometheus::Registry& r) {
  collectives_ = &BuildCounter()
                      .Name("ingero_collectives_total")
                      .Help("NCCL/RCCL collective and p2p calls")
                      .Register(r);
  collective_bytes_ = &BuildCounter()
                           .Name("ingero_collective_bytes_total")
                           .Help("Bytes moved by collective calls")
                           .Register(r);
  collective_duration_ = &BuildHistogram()
                              .Name("ingero_collective_duration_seconds")
                              .Help("Duration of collective calls")
                              .Register(r);
  barrier_wait_ = &BuildCounter()
                       .Name("ingero_collective_barrier_wait_seconds_total")
                       .Help("Time hosts waited in the stream sync that follows a collective")
                       .Register(r);
}

// The host around the GPU processes: context switches, page allocations, block I/O, TCP.
void Metrics::register_host_families(prometheus::Registry& r) {
  switches_ =
      &BuildCounter()
           .Name("ingero_gpu_thread_context_switches_total")
           .Help(
               "Context switches of threads of GPU-calling processes (preempted=true: involuntary)")
           .Register(r);
  page_allocs_ = &BuildCounter()
                      .Name("ingero_page_allocations_total")
                      .Help("Kernel page allocations, all processes")
                      .Register(r);
  page_bytes_ = &BuildCounter()
                     .Name("ingero_page_allocated_bytes_total")
                     .Help("Bytes of kernel page allocations")
                     .Register(r);
  block_duration_ =
      &BuildHistogram()
           .Name("ingero_block_io_duration_seconds")
           .Help("Block I/O request latency (requests of GPU processes, or slower than 1 ms)")
           .Register(r);
  tcp_retransmits_ = &BuildCounter()
                          .Name("ingero_tcp_retransmits_total")
                          .Help("TCP segment retransmissions")
                          .Register(r);
}

// The step model of `ingero explain`: step duration and GPU idle/busy shares.
void Metrics::register_step_families(prometheus::Registry& r) {
  step_duration_ = &BuildHistogram()
                        .Name("ingero_step_duration_seconds")
                        .Help(
                            "Duration of the steady training steps of GPU processes (the step "
                            "model of ingero explain)")
                        .Register(r);
  step_gpu_idle_ = &BuildHistogram()
                        .Name("ingero_step_gpu_idle_ratio")
                        .Help(
                            "Lower bound of the share of each steady training step with no GPU "
                            "work outstanding, from the syncs alone (not a measurement)")
                        .Register(r);
  step_gpu_busy_ = &BuildHistogram()
                        .Name("ingero_step_gpu_busy_ratio")
                        .Help(
                            "Share of each steady training step the GPU was busy, measured by "
                            "NVML or amdgpu (steps their samples cover)")
                        .Register(r);
}

// Causal chains by severity: every severity has a series, 0 until a chain is found.
void Metrics::register_chain_family(prometheus::Registry& r) {
  chains_ = &BuildGauge()
                 .Name("ingero_causal_chains_active")
                 .Help("Causal chains over the last 5 minutes of the trace, by severity")
                 .Register(r);
  for (const char* s : {"HIGH", "MEDIUM", "LOW"}) chains_->Add({{"severity", s}}).Set(0);
}

// The tracer's own health: events, drops, untraced calls, store errors, probes, file size.
void Metrics::register_agent_families(prometheus::Registry& r) {
  events_ =
      &BuildCounter().Name("ingero_events_total").Help("Events decoded by the tracer").Register(r);
  events_rate_ = &BuildGauge()
                      .Name("ingero_events_per_second")
                      .Help("Events decoded per second, last interval")
                      .Register(r);
  drops_ = &BuildCounter()
                .Name("ingero_ringbuf_drops_total")
                .Help(
                    "Records lost because a ring buffer was full, every kind (the sum of "
                    "ingero_dropped_records_total)")
                .Register(r);
  dropped_ = &BuildCounter()
                  .Name("ingero_dropped_records_total")
                  .Help(
                      "Records lost because their ring buffer was full, by kind: calls (the "
                      "counts are lower bounds), stacks, host, samples")
                  .Register(r);
  untraced_ = &BuildCounter()
                   .Name("ingero_untraced_calls_total")
                   .Help("Calls never traced: thread table full or nesting too deep")
                   .Register(r);
  store_errors_ = &BuildCounter()
                       .Name("ingero_store_errors_total")
                       .Help("Events decoded but not written to the trace file (disk full, I/O)")
                       .Register(r);
  probes_ = &BuildGauge()
                 .Name("ingero_attached_probes")
                 .Help("Uprobes attached (entry and return probes, not functions), per backend")
                 .Register(r);
  db_bytes_ = &BuildGauge()
                   .Name("ingero_db_bytes")
                   .Help("Bytes the trace takes on disk: the file and its WAL")
                   .Register(r);
  // The ClickHouse shipper's (trace --clickhouse): series only where there is one.
  shipped_rows_ = &BuildCounter()
                       .Name("ingero_clickhouse_shipped_rows_total")
                       .Help("Rows of the trace file ClickHouse confirmed it holds")
                       .Register(r);
  ship_failures_ = &BuildCounter()
                        .Name("ingero_clickhouse_ship_failures_total")
                        .Help("Shipping passes that failed (each is retried; the rows stay)")
                        .Register(r);
  clickhouse_up_ = &BuildGauge()
                        .Name("ingero_clickhouse_up")
                        .Help(
                            "1 while shipping to ClickHouse succeeds, 0 from a failed pass "
                            "until the next that succeeds")
                        .Register(r);
  unshipped_ = &BuildGauge()
                    .Name("ingero_clickhouse_unshipped_events")
                    .Help("Events written to the trace file that ClickHouse does not hold yet")
                    .Register(r);
}

// Kernel launches by kernel name (series added by refresh_kernel_series and observe_launch).
void Metrics::register_kernel_family(prometheus::Registry& r) {
  kernel_launches_ = &BuildCounter()
                          .Name("ingero_kernel_launches_total")
                          .Help(
                              "Kernel launches by kernel name: the kernels with the most launches "
                              "(--prometheus-kernels), then other and unnamed")
                          .Register(r);
}

// ingero_build_info{version}: 1.
void Metrics::register_build_info(prometheus::Registry& r) {
  BuildGauge()
      .Name("ingero_build_info")
      .Help("ingero build")
      .Register(r)
      .Add({{"version", INGERO_VERSION}})
      .Set(1);
}

}  // namespace ingero::serve

// `ingero trace`: attach, consume the ring buffers, decode, store; until a duration passes,
// a signal arrives, or the command it launched exits. On SIGINT/SIGTERM the command is
// stopped first (it gets the signal and a grace period while the tracer keeps reading), then
// the probes are detached and everything recorded is read and committed: what BPF recorded
// and the tracer never read is counted (calls_lost_at_exit), never silently lost.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "hal/backend.h"

namespace ingero::app {

struct TraceOptions {
  std::vector<uint32_t> pids;
  double duration_s = 0;  // 0: until SIGINT/SIGTERM or the command exits
  std::string db_path;
  // A trace file of a schema before blocks (an earlier ingero's): refused ("refuse"), or moved
  // aside beside itself and a new file begun ("move-aside": the agent's unit and DaemonSet).
  std::string older_schema = "refuse";
  std::string node;
  std::string backends;              // comma list; "" = all
  std::vector<std::string> command;  // run this and trace it (and its children)
  bool trace_all = false;            // with a command: trace every process, not just it
  bool live = true;                  // live one-line summary when stderr is a TTY
  bool quiet = false;
  int flush_ms = 200;
  uint32_t ringbuf_mb = 0;          // calls ring in MiB (a power of two); 0: sized by CPU count
  std::string flags;                // recorded in the session row
  std::string sysfs_root = "/sys";  // backends poll their device counters under it
  uint32_t device_poll_ms = 100;    // NVML / amdgpu sampling period (0: off)
  std::string prometheus;           // serve /metrics here while tracing ("" = off)
  bool prometheus_per_process = false;
  uint32_t prometheus_kernels = 20;   // kernels with their own launch series (0: none)
  bool kernel_names = true;           // name launches' kernels (hal/kernel_names.h)
  std::string prometheus_web_config;  // Prometheus web-config file: TLS, basic auth ("" = none)
  bool stacks = true;                 // user stacks (native + Python frames) of traced calls
  uint32_t stack_samples = 2;         // calls per call site that walk their stack
  uint32_t launch_timing = 32;        // one launch in this many per thread is timed
  bool keep_runtime_probes = false;   // never detach a runtime's launch probes, once proven
  bool keep_lookup_probes = false;    // never rest the kernel look-ups (capture/lookup_rest.h)
  uint32_t stack_interval_ms = 20;    // then one walk per thread per interval
  double retain_s = 0;                // delete rows older than this while tracing (0: keep)
  uint64_t max_db_bytes = 0;          // keep the trace's used pages under this (0: no limit)
  double full_rows_s = 600;           // launches older than this are folded (store/tiers.h)
  bool keep_all = false;              // never fold: every call keeps its row
  bool no_archive = false;            // a flag of older builds: said to have no effect
  int nice = -10;               // the tracer's priority (lowered only; the command keeps its own)
  uint32_t cpu_sample_hz = 49;  // on-CPU sampling of GPU processes (0: off; needs stacks)
  std::string clickhouse;       // ship the trace file to this ClickHouse URL ("" = off)
  double clickhouse_exit_timeout_s = 10;  // shipping at exit ends by then (app/fleet_hook.h)
  // Calls in flight longer than this are reported while they last (capture/inflight_monitor.h;
  // 0: off).
  double inflight_after_s = 5;
  // Container runtimes' state roots read for container and pod names (kernelside/
  // tenant_names.h); empty: the defaults.
  std::vector<std::string> runtime_state;
  bool tenant_names = true;  // read names for cgroups of containers and pods (else paths only)
  // OTLP/HTTP export (serve/otlp): a base URL, or "env" for OTEL_EXPORTER_OTLP_ENDPOINT;
  // "" = off.
  std::string otlp;
  double otlp_interval_s = 10;           // metrics every this long
  bool otlp_spans = false;               // slow calls and collectives as spans
  double otlp_span_threshold_s = 0.001;  // a call this slow is a span
  uint32_t otlp_span_rate = 100;         // spans per second at most
  double otlp_exit_timeout_s = 10;       // delivery at exit ends within this long
};

// Runs the trace. Returns the command's exit status when one ran (128 + N when signal N ended
// it), else the tracer's exit code (see commands.h).
int run_trace(const TraceOptions& opts, const hal::BackendRegistry& registry);

}  // namespace ingero::app

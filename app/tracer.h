// `ingero trace`: attach, consume the ring buffer, decode, store; until a duration passes,
// a signal arrives, or the command it launched exits. Nothing decoded is lost on
// SIGINT/SIGTERM: the ring buffer is drained and the last batch committed before exit.
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
  std::string node;
  std::string backends;              // comma list; "" = all
  std::vector<std::string> command;  // run this and trace it (and its children)
  bool trace_all = false;            // with a command: trace every process, not just it
  bool live = true;                  // live one-line summary when stderr is a TTY
  bool quiet = false;
  int flush_ms = 200;
  uint32_t ringbuf_mb = 16;
  std::string flags;                // recorded in the session row
  std::string sysfs_root = "/sys";  // InfiniBand counters are read under SYSFS/class/infiniband
  bool rdma_verbs = false;          // also trace libibverbs async events
  std::string prometheus;           // serve /metrics here while tracing ("" = off)
  bool prometheus_per_process = false;
  std::string prometheus_web_config;  // Prometheus web-config file: TLS, basic auth ("" = none)
  bool stacks = true;                 // user stacks (native + Python frames) of traced calls
  uint32_t stack_samples = 100;       // calls per (process, stack) that ship it; anomalous always
  std::string clickhouse;             // ship the trace file to this ClickHouse URL ("" = off)
};

// Runs the trace; returns the process exit code (see commands.h).
int run_trace(const TraceOptions& opts, const hal::BackendRegistry& registry);

}  // namespace ingero::app

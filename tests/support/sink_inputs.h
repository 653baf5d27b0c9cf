// Builders for the sampled kinds of the sink seam (hal/event_sink.h), for tests that feed a
// sink by hand.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chain.h"
#include "hal/device_sampler.h"
#include "hal/sink_records.h"

namespace ingero::test {

// A call of `op` as the decoder hands it to the sinks: ended, `dur_ns` long, returning `ret`,
// made by process `pid` (its only thread), comm "train.py".
inline hal::Event call(std::string_view vendor, std::string_view api, hal::EventKind kind,
                       std::string_view op, uint64_t dur_ns, int64_t ret, uint32_t pid = 100) {
  hal::Event e;
  e.vendor = vendor;
  e.api = api;
  e.kind = kind;
  e.op = op;
  e.dur_ns = dur_ns;
  e.ret = ret;
  e.has_ret = true;
  e.pid = pid;
  e.tid = pid;
  e.set_comm("train.py");
  return e;
}

// NVML's sample of process `pid` on GPU-0 (device 0) at `ts`: `util` percent of the 100 ms
// period running its kernels, 4 KiB of device memory.
inline hal::DeviceSample gpu_process_sample(int64_t ts, uint32_t pid, double util) {
  hal::DeviceSample s;
  s.ts_ns = ts;
  s.period_ns = 100'000'000;
  s.source = "nvml";
  s.uuid = "GPU-0";
  s.pid = pid;
  s.sm_util = util;
  s.mem_used = 4096;
  return s;
}

inline hal::AgentStats agent_stats(uint64_t events_total, double events_per_s,
                                   const hal::SessionCounters& lost, uint64_t store_errors,
                                   std::map<std::string, uint64_t> probes, uint64_t db_bytes) {
  hal::AgentStats a;
  a.events_total = events_total;
  a.events_per_s = events_per_s;
  a.lost = lost;
  a.store_errors = store_errors;
  a.probes_by_backend = std::move(probes);
  a.db_bytes = db_bytes;
  return a;
}

// `n` chains of each severity ("HIGH", "MEDIUM", "LOW").
inline std::vector<engine::Chain> chains_of(const std::map<std::string, int>& by_severity) {
  std::vector<engine::Chain> out;
  for (const auto& [name, n] : by_severity)
    for (int i = 0; i < n; ++i) {
      engine::Chain c;
      c.severity = name == "HIGH"     ? engine::Severity::kHigh
                   : name == "MEDIUM" ? engine::Severity::kMedium
                                      : engine::Severity::kLow;
      c.id = name + "-" + std::to_string(i);
      out.push_back(std::move(c));
    }
  return out;
}

}  // namespace ingero::test

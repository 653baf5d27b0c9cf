// Once-a-second system context from /proc: CPU, memory, swap, load.
#pragma once

#include <cstdint>
#include <string>

#include "hal/sink_records.h"

namespace ingero::kernelside {

// The host's figures, as every sink receives them (hal/sink_records.h).
using SystemSnapshot = hal::HostSnapshot;

class SnapshotSampler {
 public:
  explicit SnapshotSampler(std::string proc = "/proc") : proc_(std::move(proc)) {}
  // The first call primes the CPU counters and reports cpu_pct over boot time.
  SystemSnapshot sample(int64_t wall_ns);

 private:
  std::string proc_;
  uint64_t last_busy_ = 0, last_total_ = 0;
};

// Pure parsers, for tests.
bool parse_proc_stat_cpu(const std::string& text, uint64_t* busy, uint64_t* total,
                         int64_t* running);
void parse_meminfo(const std::string& text, SystemSnapshot* s);

}  // namespace ingero::kernelside

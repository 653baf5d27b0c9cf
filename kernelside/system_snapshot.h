// Once-a-second system context from /proc: CPU, memory, swap, load.
#pragma once

#include <cstdint>
#include <string>

namespace ingero::kernelside {

struct SystemSnapshot {
  int64_t ts_ns = 0;   // wall clock
  double cpu_pct = 0;  // busy share of all CPUs since the previous sample
  double mem_pct = 0;  // (total - available) / total
  int64_t mem_avail_mb = 0;
  int64_t swap_used_mb = 0;
  double load_avg = 0;  // 1-minute
  int64_t procs_running = 0;
};

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
